"""Update operators with arrays, nested documents and positional forms."""
import datetime

import pytest
from pymongo.errors import OperationFailure


def upd(db, start, update, **kw):
    db.u.delete_many({})
    db.u.insert_one(dict({"_id": 1}, **start))
    db.u.update_one({"_id": 1, **kw.pop("q", {})}, update, **kw)
    d = db.u.find_one({"_id": 1})
    del d["_id"]
    return d


def test_field_operators(db):
    assert upd(db, {"a": 1}, {"$set": {"b.c": 2}}) == {"a": 1, "b": {"c": 2}}
    assert upd(db, {"a": 1, "b": 2}, {"$unset": {"a": ""}}) == {"b": 2}
    assert upd(db, {"a": 1}, {"$inc": {"a": 2, "n": 1}}) == {"a": 3, "n": 1}
    assert upd(db, {"a": 3}, {"$mul": {"a": 2}}) == {"a": 6}
    assert upd(db, {"a": 3}, {"$min": {"a": 1}}) == {"a": 1}
    assert upd(db, {"a": 3}, {"$max": {"a": 1}}) == {"a": 3}
    assert upd(db, {"a": 1}, {"$rename": {"a": "z"}}) == {"z": 1}
    d = upd(db, {}, {"$currentDate": {"t": True}})
    assert isinstance(d["t"], datetime.datetime)


def test_array_operators(db):
    assert upd(db, {"a": [1]}, {"$push": {"a": 2}}) == {"a": [1, 2]}
    assert upd(db, {"a": [1]}, {"$push": {"a": {"$each": [5, 3, 4], "$sort": 1, "$slice": 3}}}) == {"a": [1, 3, 4]}
    assert upd(db, {"a": [1, 2]}, {"$push": {"a": {"$each": [9], "$position": 0}}}) == {"a": [9, 1, 2]}
    assert upd(db, {"a": [1, 2, 1]}, {"$pull": {"a": 1}}) == {"a": [2]}
    assert upd(db, {"a": [1, 5, 9]}, {"$pull": {"a": {"$gte": 5}}}) == {"a": [1]}
    assert upd(db, {"a": [1, 2, 3]}, {"$pullAll": {"a": [1, 3]}}) == {"a": [2]}
    assert upd(db, {"a": [1]}, {"$addToSet": {"a": {"$each": [1, 2]}}}) == {"a": [1, 2]}
    assert upd(db, {"a": [1, 2, 3]}, {"$pop": {"a": 1}}) == {"a": [1, 2]}
    assert upd(db, {"a": [1, 2, 3]}, {"$pop": {"a": -1}}) == {"a": [2, 3]}


def test_positional(db):
    assert upd(db, {"a": [1, 2, 3]}, {"$set": {"a.$": 20}}, q={"a": 2}) == {"a": [1, 20, 3]}
    assert upd(db, {"a": [{"k": 1, "v": 0}, {"k": 2, "v": 0}]}, {"$inc": {"a.$.v": 1}},
               q={"a.k": 2}) == {"a": [{"k": 1, "v": 0}, {"k": 2, "v": 1}]}
    assert upd(db, {"a": [1, 2, 3]}, {"$inc": {"a.$[]": 10}}) == {"a": [11, 12, 13]}
    assert upd(db, {"a": [1, 5, 9]}, {"$set": {"a.$[big]": 0}},
               array_filters=[{"big": {"$gte": 5}}]) == {"a": [1, 0, 0]}
    assert upd(db, {"a": [{"g": 80}, {"g": 95}]}, {"$set": {"a.$[e].top": True}},
               array_filters=[{"e.g": {"$gte": 90}}]) == {"a": [{"g": 80}, {"g": 95, "top": True}]}


def test_update_errors(db):
    db.u.insert_one({"_id": 1, "s": "str", "n": 1})
    for update, code in [
        ({"$inc": {"s": 1}}, 14),
        ({"$push": {"n": 1}}, 2),
        ({"$set": {"n": 1}, "$inc": {"n": 1}}, 40),
        ({"$set": {"_id": 2}}, 66),
        ({"$set": {"n.x": 1}}, 28),
    ]:
        with pytest.raises(OperationFailure) as e:
            db.u.update_one({"_id": 1}, update)
        assert e.value.code == code, update
    assert db.u.find_one({"_id": 1}) == {"_id": 1, "s": "str", "n": 1}
