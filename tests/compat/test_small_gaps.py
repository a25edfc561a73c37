"""Smaller compatibility gaps: reply types, aliases, create options, duplicate-key details,
update sort, sort order of MinKey, explain of every query command, the versioned API."""
import pytest
from bson import Int64, MinKey
from pymongo import MongoClient, ReturnDocument
from pymongo.errors import DuplicateKeyError, OperationFailure
from pymongo.server_api import ServerApi


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def test_reply_types_and_aliases(db):
    db.c.insert_many([{"_id": i} for i in range(3)])
    n = db.command("count", "c")["n"]
    assert n == 3 and type(n) is int and not isinstance(n, Int64)
    r = db.command("count", "c", query={"_id": {"$gt": 0}}, codec_options=db.codec_options)
    assert r["n"] == 2
    raw = db.command("count", "c", codec_options=db.codec_options.with_options(document_class=dict))
    assert raw["n"].__class__ is int
    assert db.command("dbstats")["collections"] >= 1
    assert db.command("collstats", "c")["count"] == 3
    hello = db.command("hello")
    assert type(hello["connectionId"]) is int


def test_create_options(db):
    db.create_collection("a")
    assert db.command("create", "a")["ok"] == 1  # same options: fine
    db.command("create", "p", partitioned=True)
    assert code_of(lambda: db.command("create", "p")) == 48
    assert db.command("create", "cl", clusteredIndex={"key": {"_id": 1}, "unique": True, "name": "cl"})["ok"] == 1
    opts = [c for c in db.list_collections() if c["name"] == "cl"][0]["options"]
    assert opts["clusteredIndex"]["key"] == {"_id": 1}
    assert code_of(lambda: db.command("create", "cl2", clusteredIndex={"key": {"a": 1}, "unique": True})) == 72
    with pytest.raises(OperationFailure) as e:
        db.command("create", "x", timeseries={"timeField": "t"})
    assert e.value.code == 238 and "timeseries" in str(e.value)


def test_duplicate_key_details(db):
    db.c.create_index("u", unique=True)
    db.c.insert_many([{"_id": 1, "u": 1}, {"_id": 2, "u": 2}])
    with pytest.raises(DuplicateKeyError) as e:
        db.c.find_one_and_update({"_id": 2}, {"$set": {"u": 1}})
    assert e.value.details["keyPattern"] == {"u": 1} and e.value.details["keyValue"] == {"u": 1}
    with pytest.raises(DuplicateKeyError) as e:
        db.c.update_one({"_id": 2}, {"$set": {"u": 1}})
    assert e.value.details["keyPattern"] == {"u": 1}


def test_update_with_sort(db):
    db.c.insert_many([{"_id": i, "g": 1, "v": i} for i in range(5)])
    r = db.command("update", "c", updates=[{"q": {"g": 1}, "u": {"$set": {"hit": True}}, "sort": {"v": -1}}])
    assert r["nModified"] == 1 and db.c.find_one({"hit": True})["_id"] == 4
    r = db.command("update", "c", updates=[{"q": {"g": 1}, "u": {"g": 1, "replaced": True}, "sort": {"v": 1}}])
    assert db.c.find_one({"replaced": True})["_id"] == 0
    r = db.command("update", "c", updates=[{"q": {}, "u": {"$set": {"x": 1}}, "multi": True, "sort": {"v": 1}}])
    assert r["writeErrors"][0]["code"] == 9


def test_minkey_sorts_before_empty_array(db):
    db.c.insert_many([{"_id": 1, "a": []}, {"_id": 2, "a": MinKey()}, {"_id": 3, "a": None}, {"_id": 4, "a": 1}])
    assert [d["_id"] for d in db.c.find().sort([("a", 1), ("_id", 1)])] == [2, 1, 3, 4]
    assert [d["_id"] for d in db.c.find().sort([("a", -1), ("_id", 1)])] == [4, 3, 1, 2]


def test_explain_of_every_query_command(db):
    db.c.create_index("a")
    db.c.insert_many([{"_id": i, "a": i % 4} for i in range(20)])
    cmds = [
        {"count": "c", "query": {"a": 1}},
        {"distinct": "c", "key": "a", "query": {"a": 1}},
        {"update": "c", "updates": [{"q": {"a": 1}, "u": {"$set": {"b": 1}}, "multi": True}]},
        {"delete": "c", "deletes": [{"q": {"a": 1}, "limit": 0}]},
        {"findAndModify": "c", "query": {"a": 1}, "update": {"$set": {"b": 2}}},
    ]
    for cmd in cmds:
        r = db.command("explain", cmd, verbosity="executionStats")
        plan = r["queryPlanner"]["winningPlan"]
        if "count" in cmd:
            # As mongod: a COUNT over a COUNT_SCAN, which returns no document.
            assert plan["inputStage"]["stage"] == "COUNT_SCAN", (cmd, plan)
            assert r["executionStats"]["executionStages"]["nCounted"] == 5
            continue
        assert "IXSCAN" in str(plan), (cmd, plan)
        assert r["executionStats"]["nReturned"] >= 1
    # Nothing was written by explaining writes.
    assert db.c.count_documents({"b": {"$exists": True}}) == 0 and db.c.count_documents({}) == 20
    r = db.command("explain", {"aggregate": "c", "pipeline": [{"$match": {"a": 2}}, {"$group": {"_id": "$a"}}], "cursor": {}})
    assert "IXSCAN" in str(r["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"])
    r = db.command("explain", {"aggregate": "c", "pipeline": [{"$match": {"a": 2}}], "cursor": {}}, verbosity="queryPlanner")
    assert "executionStats" not in r["stages"][0]["$cursor"]
    r = db.command("explain", {"aggregate": "c", "pipeline": [{"$match": {"a": 2}}, {"$group": {"_id": "$a"}}], "cursor": {}},
                   verbosity="executionStats")
    stats = r["stages"][0]["$cursor"]["executionStats"]
    assert stats["nReturned"] == 5 and stats["totalKeysExamined"] >= 5
    r = db.command("aggregate", "c", pipeline=[{"$match": {"a": 2}}], explain=True)
    assert "stages" in r
    assert code_of(lambda: db.command("explain", {"count": "c"}, verbosity="loud")) == 2


def test_versioned_api(server):
    strict = server.client(server_api=ServerApi("1", strict=True))
    try:
        db = strict.t_api
        db.c.insert_one({"_id": 1})
        assert db.c.count_documents({}) == 1 and db.c.find_one() == {"_id": 1}
        assert code_of(lambda: db.command("dbStats")) == 323
        assert code_of(lambda: db.c.distinct("x")) == 323
        assert code_of(lambda: list(db.c.aggregate([{"$collStats": {}}]))) == 323
        db.c.drop()
    finally:
        strict.close()
    loose = server.client(server_api=ServerApi("1"))
    try:
        assert loose.t_api.command("dbStats")["ok"] == 1
    finally:
        loose.close()
    plain = server.client()
    try:
        assert code_of(lambda: plain.admin.command("ping", apiVersion="2")) == 322
        assert code_of(lambda: plain.admin.command("ping", apiStrict=True)) == 322
    finally:
        plain.close()


def test_natural_order_sort_and_hint(db):
    db.c.insert_many([{"_id": i, "a": i % 2} for i in [3, 1, 2]])
    assert [d["_id"] for d in db.c.find().sort("$natural", 1)] == [1, 2, 3]
    assert [d["_id"] for d in db.c.find().sort("$natural", -1)] == [3, 2, 1]
    assert [d["_id"] for d in db.c.find().hint([("$natural", -1)])] == [3, 2, 1]
    assert [d["_id"] for d in db.c.find({"a": 1}).hint([("$natural", -1)])] == [3, 1]
    with pytest.raises(OperationFailure) as e:
        list(db.c.find().sort([("$natural", 1), ("a", 1)]))
    assert e.value.code == 2
