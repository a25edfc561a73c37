"""Inserts, finds, updates, deletes, findAndModify, count and distinct."""
import pymongo
import pytest
from bson import ObjectId, Int64, Decimal128
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure
from pymongo import ReturnDocument


def test_insert_and_find(db):
    r = db.c.insert_one({"a": 1})
    assert isinstance(r.inserted_id, ObjectId)
    assert db.c.find_one({"_id": r.inserted_id})["a"] == 1
    db.c.insert_many([{"_id": i, "v": i * 2} for i in range(10)])
    assert db.c.find_one({"_id": 3}) == {"_id": 3, "v": 6}
    assert db.c.count_documents({}) == 11
    assert db.c.estimated_document_count() == 11
    assert [d["_id"] for d in db.c.find({"_id": {"$gte": 7}})] == [7, 8, 9]
    assert [d["_id"] for d in db.c.find({"_id": {"$in": [5, 2, 99]}})] == [2, 5]


def test_duplicate_key(db):
    db.c.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError) as e:
        db.c.insert_one({"_id": 1})
    assert e.value.code == 11000
    with pytest.raises(BulkWriteError) as e:
        db.c.insert_many([{"_id": 2}, {"_id": 1}, {"_id": 3}])
    errs = e.value.details["writeErrors"]
    assert len(errs) == 1 and errs[0]["index"] == 1 and errs[0]["code"] == 11000
    assert errs[0]["keyValue"] == {"_id": 1}
    assert e.value.details["nInserted"] == 1
    with pytest.raises(BulkWriteError) as e:
        db.c.insert_many([{"_id": 4}, {"_id": 1}, {"_id": 5}, {"_id": 2}], ordered=False)
    assert [x["index"] for x in e.value.details["writeErrors"]] == [1, 3]
    assert sorted(d["_id"] for d in db.c.find()) == [1, 2, 4, 5]
    # 1 and 1.0 and NumberLong(1) are the same _id.
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 1.0})
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": Int64(1)})


def test_bad_documents(db):
    with pytest.raises(OperationFailure) as e:
        db.c.insert_one({"_id": [1, 2]})
    # mongod 7.0: 53 InvalidIdField.
    assert e.value.code == 53
    assert "The '_id' value cannot be of type array" in str(e.value)
    with pytest.raises(Exception):
        db.c.insert_one({"x": "y" * (17 * 1024 * 1024)})
    assert db.command("ping")["ok"] == 1.0


def test_update_one_many_upsert(db):
    db.c.insert_many([{"_id": i, "g": i % 3, "n": 0} for i in range(9)])
    r = db.c.update_one({"g": 1}, {"$inc": {"n": 5}})
    assert (r.matched_count, r.modified_count) == (1, 1)
    r = db.c.update_many({"g": 2}, {"$set": {"tag": "two"}})
    assert (r.matched_count, r.modified_count) == (3, 3)
    r = db.c.update_many({"g": 2}, {"$set": {"tag": "two"}})
    assert (r.matched_count, r.modified_count) == (3, 0)
    r = db.c.update_one({"_id": 100}, {"$set": {"x": 1}, "$setOnInsert": {"new": True}}, upsert=True)
    assert r.upserted_id == 100
    assert db.c.find_one({"_id": 100}) == {"_id": 100, "x": 1, "new": True}
    r = db.c.update_one({"name": "z"}, {"$set": {"x": 2}}, upsert=True)
    doc = db.c.find_one({"_id": r.upserted_id})
    assert doc["name"] == "z" and doc["x"] == 2
    r = db.c.replace_one({"_id": 0}, {"whole": "new"})
    assert r.modified_count == 1
    assert db.c.find_one({"_id": 0}) == {"_id": 0, "whole": "new"}
    with pytest.raises(OperationFailure) as e:
        db.c.replace_one({"_id": 0}, {"_id": 5, "x": 1})
    assert e.value.code == 66
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"_id": 1}, {"$inc": {"g": "a"}})
    assert e.value.code == 14
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"_id": 1}, {"$frob": {"g": 1}})
    assert e.value.code == 9


def test_delete(db):
    db.c.insert_many([{"_id": i, "g": i % 2} for i in range(10)])
    assert db.c.delete_one({"g": 1}).deleted_count == 1
    assert db.c.delete_many({"g": 1}).deleted_count == 4
    assert db.c.count_documents({}) == 5
    assert db.c.delete_many({}).deleted_count == 5
    assert db.c.count_documents({}) == 0


def test_find_and_modify(db):
    db.c.insert_many([{"_id": i, "n": i} for i in range(5)])
    before = db.c.find_one_and_update({"n": {"$gte": 2}}, {"$inc": {"n": 10}}, sort=[("n", -1)])
    assert before == {"_id": 4, "n": 4}
    after = db.c.find_one_and_update({"_id": 3}, {"$inc": {"n": 1}},
                                     return_document=ReturnDocument.AFTER, projection={"_id": 0})
    assert after == {"n": 4}
    up = db.c.find_one_and_update({"_id": 9}, {"$set": {"n": 9}}, upsert=True,
                                  return_document=ReturnDocument.AFTER)
    assert up == {"_id": 9, "n": 9}
    gone = db.c.find_one_and_delete({"_id": 0})
    assert gone == {"_id": 0, "n": 0}
    assert db.c.find_one_and_delete({"_id": 0}) is None
    rep = db.c.find_one_and_replace({"_id": 1}, {"r": 1}, return_document=ReturnDocument.AFTER)
    assert rep == {"_id": 1, "r": 1}


def test_count_and_distinct(db):
    db.c.insert_many([{"_id": i, "k": i % 4, "arr": [i % 2, 10]} for i in range(20)])
    assert db.c.count_documents({"k": 1}) == 5
    assert db.c.count_documents({"k": {"$gt": 1}}, skip=2, limit=5) == 5
    assert db.command("count", "c", query={"k": 3})["n"] == 5
    assert db.command("count", "missing")["n"] == 0
    assert sorted(db.c.distinct("k")) == [0, 1, 2, 3]
    assert sorted(db.c.distinct("arr")) == [0, 1, 10]
    assert db.c.distinct("k", {"k": {"$lt": 2}}) == [0, 1]


def test_write_concern_j(db):
    c = db.get_collection("c", write_concern=pymongo.WriteConcern(j=True))
    c.insert_one({"_id": "durable"})
    assert db.c.find_one({"_id": "durable"}) is not None


def test_unacknowledged_writes(db, client):
    c = db.get_collection("c", write_concern=pymongo.WriteConcern(w=0))
    for i in range(100):
        c.insert_one({"_id": i})
    # A later acknowledged command on the same connection sees them.
    assert db.c.count_documents({}) == 100


def test_estimated_count_is_maintained_through_updates_and_deletes(db):
    db.e.insert_many([{"_id": i, "v": 0, "pad": "x" * 200} for i in range(2000)])
    db.e.create_index("v")
    for r in range(3):
        db.e.update_many({}, {"$inc": {"v": 1}})
        db.e.replace_one({"_id": r}, {"v": -1})
    db.e.delete_many({"_id": {"$lt": 100}})
    db.e.insert_many([{"_id": -i} for i in range(1, 51)])
    # O(1): the engine's maintained count, not a scan; exact for ordinary writes.
    assert db.e.estimated_document_count() == 1950
    assert db.e.count_documents({}) == 1950
    assert db.command("compact", "e")["ok"] == 1.0
    assert db.e.estimated_document_count() == 1950
    with pytest.raises(OperationFailure) as e:
        db.command("compact", "nope")
    assert e.value.code == 26
