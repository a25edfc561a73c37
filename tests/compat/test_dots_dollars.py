"""Field names with dots and dollars (MongoDB 5.0+ rules)."""
import pytest
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure, WriteError


def test_stored_and_returned_as_given(db):
    db.c.insert_one({"_id": 1, "$a": 1, "a.b": 2, "x": {"$db": "foo", "c.d": 1}})
    db.c.insert_many([{"_id": 2, "$top": True}, {"_id": 3, "e": {"$b": 1}}])
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "$a": 1, "a.b": 2, "x": {"$db": "foo", "c.d": 1}}
    assert db.c.find_one({"_id": 2}) == {"_id": 2, "$top": True}
    db.c.insert_one({"_id": {"a.b": 1}})
    assert db.c.find_one({"_id": {"a.b": 1}}) == {"_id": {"a.b": 1}}
    with pytest.raises(WriteError) as e:
        db.c.insert_one({"_id": {"$a": 1}})
    assert e.value.code == 52
    # Replacements may hold dotted names and nested $ names; a top-level $ name is an operator.
    db.c.replace_one({"_id": 3}, {"a.b": 9, "y": {"$b": 1}})
    assert db.c.find_one({"_id": 3}) == {"_id": 3, "a.b": 9, "y": {"$b": 1}}
    assert db.c.find_one_and_replace({"_id": 3}, {"a.b": 10}, return_document=ReturnDocument.AFTER) == {"_id": 3, "a.b": 10}
    with pytest.raises(WriteError) as e:
        db.c.replace_one({"_id": 3}, {"a": 1, "$b": 2})
    assert e.value.code == 52


def test_reached_through_field_expressions(db):
    db.c.insert_one({"_id": 1, "$a": 1, "a.b": 2, "foo": {}})
    db.c.update_one({"_id": 1}, [{"$replaceWith": {"$setField": {"field": {"$literal": "$z"}, "value": 5, "input": "$$ROOT"}}}])
    db.c.update_one({"_id": 1}, [{"$set": {"foo": {"$setField": {"field": {"$literal": "$q"}, "value": 7, "input": "$foo"}}}}])
    db.c.update_one({"_id": 1}, [{"$set": {"foo": {"$setField": {"field": "c.d", "value": 8, "input": "$foo"}}}}])
    assert db.c.find_one() == {"_id": 1, "$a": 1, "a.b": 2, "foo": {"$q": 7, "c.d": 8}, "$z": 5}
    out = list(db.c.aggregate([{"$project": {"v": {"$getField": {"$literal": "$a"}}, "w": {"$getField": "a.b"},
                                              "l": {"$literal": "$notAPath"}}}]))
    assert out == [{"_id": 1, "v": 1, "w": 2, "l": "$notAPath"}]
    d = db.c.find_one_and_update({"_id": 1}, [{"$replaceWith": {"$unsetField": {"field": "a.b", "input": "$$ROOT"}}}],
                                 return_document=ReturnDocument.AFTER)
    assert "a.b" not in d and d["$a"] == 1
    # $expr reaches them too.
    assert db.c.count_documents({"$expr": {"$eq": [{"$getField": {"$literal": "$a"}}, 1]}}) == 1
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$project": {"v": "$a.b.$c"}}]))
    assert e.value.code == 16410
