"""Pipeline-style updates and command `let` variables (MongoDB 5.0+ behaviour)."""
import datetime

import pytest
from pymongo import ReturnDocument, UpdateOne, UpdateMany
from pymongo.errors import BulkWriteError, OperationFailure, WriteError


def seed(db):
    db.c.insert_many([
        {"_id": 1, "x": 1, "tags": ["a"], "s": "one"},
        {"_id": 2, "x": 2, "tags": [], "s": "two"},
        {"_id": 3, "x": 3, "s": "three"},
    ])


def test_pipeline_stages(db):
    seed(db)
    r = db.c.update_one({"_id": 1}, [{"$set": {"y": {"$add": ["$x", 10]}}}, {"$unset": "s"}])
    assert (r.matched_count, r.modified_count) == (1, 1)
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "x": 1, "tags": ["a"], "y": 11}
    # $addFields, then $project keeps _id.
    db.c.update_one({"_id": 2}, [{"$addFields": {"n": {"$size": "$tags"}}}, {"$project": {"n": 1}}])
    assert db.c.find_one({"_id": 2}) == {"_id": 2, "n": 0}
    # $replaceWith / $replaceRoot keep the original _id.
    db.c.update_one({"_id": 3}, [{"$replaceWith": {"v": "$x", "w": "$s"}}])
    assert db.c.find_one({"_id": 3}) == {"_id": 3, "v": 3, "w": "three"}
    db.c.update_one({"_id": 3}, [{"$replaceRoot": {"newRoot": {"z": "$v"}}}])
    assert db.c.find_one({"_id": 3}) == {"_id": 3, "z": 3}
    # An update that changes nothing is matched, not modified.
    r = db.c.update_one({"_id": 3}, [{"$set": {"z": 3}}])
    assert (r.matched_count, r.modified_count) == (1, 0)
    # Empty pipeline: a no-op.
    r = db.command("update", "c", updates=[{"q": {"_id": 3}, "u": []}])
    assert (r["n"], r["nModified"]) == (1, 0)


def test_pipeline_multi_upsert_and_now(db):
    seed(db)
    r = db.c.update_many({}, [{"$set": {"doubled": {"$multiply": [{"$ifNull": ["$x", 0]}, 2]}, "at": "$$NOW"}}])
    assert (r.matched_count, r.modified_count) == (3, 3)
    docs = list(db.c.find())
    assert [d["doubled"] for d in docs] == [2, 4, 6]
    # $$NOW is one value for the whole command.
    assert len({d["at"] for d in docs}) == 1 and isinstance(docs[0]["at"], datetime.datetime)
    r = db.c.update_one({"_id": 9, "k": "v"}, [{"$set": {"made": True, "copy": "$k"}}], upsert=True)
    assert r.upserted_id == 9
    assert db.c.find_one({"_id": 9}) == {"_id": 9, "k": "v", "made": True, "copy": "v"}
    r = db.c.update_one({"q": 5}, [{"$set": {"r": {"$add": ["$q", 1]}}}], upsert=True)
    d = db.c.find_one({"_id": r.upserted_id})
    assert (d["q"], d["r"]) == (5, 6)


def test_pipeline_in_find_and_modify_and_bulk(db):
    seed(db)
    d = db.c.find_one_and_update({"_id": 1}, [{"$set": {"x": {"$add": ["$x", 100]}}}],
                                 return_document=ReturnDocument.AFTER)
    assert d["x"] == 101
    d = db.c.find_one_and_update({"_id": 2}, [{"$unset": "tags"}])
    assert d["tags"] == []
    assert "tags" not in db.c.find_one({"_id": 2})
    r = db.c.bulk_write([
        UpdateOne({"_id": 3}, [{"$set": {"b": 1}}]),
        UpdateMany({"x": {"$lt": 50}}, [{"$set": {"small": True}}]),
    ])
    assert (r.matched_count, r.modified_count) == (3, 3)
    assert db.c.count_documents({"small": True}) == 2


def test_pipeline_errors(db):
    seed(db)
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, [{"$group": {"_id": "$x"}}])
    assert e.value.code == 72 and "$group is not allowed to be used within an update" in str(e.value)
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, [{"$set": {"_id": 5}}])
    assert e.value.code == 66
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, [{"$set": {"a.$[i]": 1}}], array_filters=[{"i": 0}])
    assert e.value.code == 9
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, [{"$bogus": {}}])
    assert e.value.code == 40324
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "x": 1, "tags": ["a"], "s": "one"}


def test_let_in_every_command(db):
    seed(db)
    assert [d["_id"] for d in db.c.find({"$expr": {"$eq": ["$x", "$$v"]}}, let={"v": 2})] == [2]
    out = list(db.c.aggregate([
        {"$match": {"$expr": {"$gte": ["$x", "$$lo"]}}},
        {"$project": {"_id": 1, "lo": "$$lo", "sum": {"$add": ["$x", "$$lo"]}}},
    ], let={"lo": 2}))
    assert out == [{"_id": 2, "lo": 2, "sum": 4}, {"_id": 3, "lo": 2, "sum": 5}]
    # Variables may read earlier ones and $$NOW.
    out = list(db.c.aggregate([{"$limit": 1}, {"$project": {"_id": 0, "b": "$$b"}}],
                              let={"a": 2, "b": {"$multiply": ["$$a", 3]}}))
    assert out == [{"b": 6}]
    r = db.c.update_one({"$expr": {"$eq": ["$_id", "$$id"]}}, [{"$set": {"from_let": "$$val"}}],
                        let={"id": 3, "val": "hello"})
    assert r.modified_count == 1
    assert db.c.find_one({"_id": 3})["from_let"] == "hello"
    r = db.c.update_many({"$expr": {"$lt": ["$x", "$$m"]}}, {"$set": {"low": True}}, let={"m": 3})
    assert r.modified_count == 2
    d = db.c.find_one_and_update({"$expr": {"$eq": ["$x", "$$x"]}}, [{"$set": {"y": "$$x"}}],
                                 let={"x": 1}, return_document=ReturnDocument.AFTER)
    assert d["y"] == 1
    d = db.c.find_one_and_delete({"$expr": {"$eq": ["$x", "$$x"]}}, let={"x": 2})
    assert d["_id"] == 2
    r = db.c.delete_many({"$expr": {"$gt": ["$x", "$$x"]}}, let={"x": 2})
    assert r.deleted_count == 1
    assert [d["_id"] for d in db.c.find()] == [1]
    # $lookup sub-pipelines see the command's variables.
    db.o.insert_many([{"_id": 1, "k": 1}, {"_id": 2, "k": 1}])
    out = list(db.c.aggregate([
        {"$lookup": {"from": "o", "pipeline": [{"$match": {"$expr": {"$eq": ["$k", "$$want"]}}}], "as": "j"}},
        {"$project": {"n": {"$size": "$j"}}},
    ], let={"want": 1}))
    assert out == [{"_id": 1, "n": 2}]


def test_let_errors(db):
    seed(db)
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", let=5)
    assert e.value.code == 14
    with pytest.raises(OperationFailure) as e:
        list(db.c.find({"$expr": {"$eq": ["$x", "$$Bad"]}}, let={"Bad": 1}))
    assert e.value.code == 9
    with pytest.raises(OperationFailure) as e:
        list(db.c.find({"$expr": {"$eq": ["$x", "$$nope"]}}))
    assert e.value.code == 17276
    # Update statement constants (`c`) work like let.
    r = db.command("update", "c", updates=[{"q": {"$expr": {"$eq": ["$_id", "$$i"]}}, "u": [{"$set": {"c": "$$i"}}], "c": {"i": 1}}])
    assert r["nModified"] == 1 and db.c.find_one({"_id": 1})["c"] == 1
