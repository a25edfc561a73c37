"""Repeated field names, sent as raw BSON (Go's bson.D, Java's builders and raw clients can
send them): refused where mongod refuses them, with its codes and messages, and honoured
where they mean something (a filter's repeated conditions all apply)."""
import bson
import pytest
from bson.raw_bson import RawBSONDocument
from bson.son import SON
from pymongo.errors import BulkWriteError, OperationFailure, WriteError


def raw(*pairs):
    """A document with the given (key, value) pairs in order, repeats included."""
    body = b"".join(bson.encode({k: v})[4:-1] for k, v in pairs)
    return RawBSONDocument((len(body) + 5).to_bytes(4, "little") + body + b"\x00")


def fails(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value


def test_insert_refuses_two_ids(db):
    e = fails(lambda: db.c.insert_one(raw(("_id", "foo"), ("_id", "bar"))))
    assert e.code == 2 and "can't have multiple _id fields in one document" in str(e)
    assert db.c.count_documents({}) == 0
    batch = [{"_id": 1}, raw(("_id", 2), ("_id", 3)), {"_id": 4}]
    with pytest.raises(BulkWriteError) as b:
        db.c.insert_many(batch)
    r = b.value.details
    assert r["nInserted"] == 1 and r["writeErrors"][0]["index"] == 1
    assert r["writeErrors"][0]["code"] == 2
    with pytest.raises(BulkWriteError) as b:
        db.d.insert_many(batch, ordered=False)
    assert b.value.details["nInserted"] == 2
    assert sorted(d["_id"] for d in db.d.find()) == [1, 4]


@pytest.mark.parametrize("update,path", [
    (SON([("$set", raw(("v", 42), ("v", "hello")))]), "v"),
    (SON([("$inc", raw(("v", 1), ("v", 2)))]), "v"),
    (SON([("$unset", raw(("v", 1), ("v", 1)))]), "v"),
    (SON([("$rename", raw(("v", "a"), ("v", "b")))]), "v"),
])
def test_update_operators_refuse_a_repeated_path(db, update, path):
    db.c.insert_one({"_id": 1, "v": 0})
    e = fails(lambda: db.c.update_one({"_id": 1}, update))
    assert isinstance(e, WriteError)
    assert e.code == 40
    assert f"Updating the path '{path}' would create a conflict at '{path}'" in str(e)
    assert db.c.find_one() == {"_id": 1, "v": 0}
    e = fails(lambda: db.c.find_one_and_update({"_id": 1}, update))
    assert e.code == 40


def test_an_operator_given_twice_applies_both(db):
    """`{$set: {a: 1}, $set: {b: 2}}` sets both (mongod applies every element); a path set by
    both occurrences is 40, for that statement or, in findAndModify, the command."""
    db.c.insert_one({"_id": 1})
    db.c.update_one({"_id": 1}, raw(("$set", {"a": 1}), ("$inc", {"n": 1}), ("$set", {"b": 2})))
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "a": 1, "n": 1, "b": 2}
    e = fails(lambda: db.c.update_one({"_id": 1}, raw(("$set", {"a": 5}), ("$set", {"a": 6}))))
    assert isinstance(e, WriteError) and e.code == 40
    assert db.c.find_one({"_id": 1})["a"] == 1
    r = db.command("findAndModify", "c", query={"_id": 1},
                   update=raw(("$set", {"c": 3}), ("$set", {"d": 4})), new=True)
    assert r["value"] == {"_id": 1, "a": 1, "n": 1, "b": 2, "c": 3, "d": 4}
    e = fails(lambda: db.command("findAndModify", "c", query={"_id": 1},
                                 update=raw(("$set", {"c": 3}), ("$set", {"c": 4}))))
    assert e.code == 40


def test_a_replacement_with_two_ids(db):
    db.c.insert_one({"_id": 1, "v": 0})
    # The statement fails as a write error (the command itself is ok).
    r = db.command(SON([
        ("update", "c"),
        ("updates", [SON([("q", {"_id": 1}), ("u", raw(("_id", 1), ("_id", 2)))])]),
    ]))
    assert r["writeErrors"][0]["code"] == 2
    assert "Can't have multiple _id fields in one document" in r["writeErrors"][0]["errmsg"]


def test_a_filter_with_repeated_conditions_means_all_of_them(db):
    db.c.insert_many([{"_id": 1, "a": [1, 2]}, {"_id": 2, "a": 1}, {"_id": 3, "a": 2},
                      {"_id": 4, "a": 7}])
    both = raw(("a", 1), ("a", 2))
    assert [d["_id"] for d in db.c.find(both)] == [1]
    assert db.c.count_documents(both) == 1
    ops = SON([("a", raw(("$gt", 1), ("$lt", 9), ("$gt", 5)))])
    assert [d["_id"] for d in db.c.find(ops)] == [4]
    inside_or = {"$or": [raw(("a", 1), ("a", 2)), {"_id": 3}]}
    assert [d["_id"] for d in db.c.find(inside_or)] == [1, 3]
    assert [d["_id"] for d in db.c.aggregate([{"$match": both}])] == [1]
    assert db.c.distinct("_id", both) == [1]
    db.c.delete_many(both)
    assert sorted(d["_id"] for d in db.c.find()) == [2, 3, 4]


def test_aggregation_refuses_repeated_fields(db):
    db.c.insert_one({"_id": 1, "v": 1})
    e = fails(lambda: list(db.c.aggregate([
        {"$group": SON([("_id", raw(("v", "$v"), ("v", "$non-existent")))])}])))
    assert e.code == 16406
    assert 'duplicate field name specified in object literal: { v: "$v", v: "$non-existent" }' in str(e)
    e = fails(lambda: list(db.c.aggregate([{"$project": raw(("v", 1), ("v", 1))}])))
    assert e.code == 31250 and "Invalid $project :: caused by :: Path collision at v" in str(e)
    e = fails(lambda: list(db.c.aggregate([{"$addFields": raw(("a", 1), ("a", 2))}])))
    assert e.code == 40176
    assert "Cannot specify both 'a' and 'a': { a: 1, a: 2 }" in str(e)
    e = fails(lambda: list(db.c.find({}, raw(("v", 1), ("v", 1)))))
    assert e.code == 31250 and "Path collision at v" in str(e)


def test_an_index_key_with_a_repeated_field(db):
    e = fails(lambda: db.command(SON([
        ("createIndexes", "c"),
        ("indexes", [SON([("key", raw(("v", -1), ("v", 1))), ("name", "v_-1_v_1")])]),
    ])))
    assert e.code == 2
    assert "The field 'v' appears multiple times in the index key pattern { v: -1, v: 1 }" in str(e)
    assert [i["name"] for i in db.c.list_indexes()] == [] or \
        [i["name"] for i in db.c.list_indexes()] == ["_id_"]


def test_other_repeats_are_accepted(db):
    # mongod stores a document's own repeated fields as given; siltd keeps the last value.
    db.c.insert_one(raw(("_id", 1), ("a", 1), ("a", 2)))
    assert db.c.find_one() == {"_id": 1, "a": 2}
