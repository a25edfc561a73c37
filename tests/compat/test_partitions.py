"""Partitioned collections (TokuMX's commands): routing, reads across partitions, the
commands' replies and errors, cursors that survive a drop, and crashes in the middle."""
import datetime
import os
import time

import pytest
from bson import Int64, MaxKey
from pymongo.errors import OperationFailure

from conftest import Siltd


def info(db, name):
    return db.command("getPartitionInfo", name)


def make(db, name="p"):
    db.command("create", name, partitioned=True)
    return db[name]


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def test_create_and_partition_info(db):
    make(db)
    opts = {c["name"]: c["options"] for c in db.list_collections()}
    assert opts["p"] == {"partitioned": True}
    r = info(db, "p")
    assert r["numPartitions"] == 1 and isinstance(r["numPartitions"], Int64)
    p = r["partitions"][0]
    assert p["_id"] == 0 and isinstance(p["_id"], Int64)
    assert p["max"] == {"_id": MaxKey()}
    assert isinstance(p["createTime"], datetime.datetime)
    assert p["count"] == 0
    # primaryKey {_id: 1} is the default and may be given.
    db.command("create", "q", partitioned=True, primaryKey={"_id": 1})
    assert info(db, "q")["numPartitions"] == 1


def test_routing_and_reads_across_partitions(db):
    c = make(db)
    c.create_index("a")
    c.insert_many([{"_id": i, "a": (i * 37) % 100, "g": i % 3} for i in range(100)])
    db.command("addPartition", "p")  # caps at the largest _id: 99
    c.insert_many([{"_id": i, "a": (i * 37) % 100, "g": i % 3} for i in range(100, 200)])
    db.command("addPartition", "p", newMax={"_id": 249})
    c.insert_many([{"_id": i, "a": (i * 37) % 100, "g": i % 3} for i in range(200, 300)])
    r = info(db, "p")
    assert r["numPartitions"] == 3
    assert [p["_id"] for p in r["partitions"]] == [0, 1, 2]
    assert [p["max"] for p in r["partitions"]] == [{"_id": 99}, {"_id": 249}, {"_id": MaxKey()}]
    assert [p["count"] for p in r["partitions"]] == [100, 150, 50]
    # Scans in _id order cross the boundaries in order, both ways.
    assert [d["_id"] for d in c.find({}, {"_id": 1})] == list(range(300))
    assert [d["_id"] for d in c.find({}, {"_id": 1}).sort("_id", -1)] == list(range(299, -1, -1))
    assert [d["_id"] for d in c.find({"_id": {"$gte": 95, "$lt": 105}})] == list(range(95, 105))
    # A secondary index merges the partitions: the sort needs no blocking stage.
    docs = list(c.find({"a": {"$gte": 10, "$lt": 20}}).sort([("a", 1), ("_id", 1)]))
    keys = [(d["a"], d["_id"]) for d in docs]
    assert keys == sorted(keys)
    assert len(keys) == len([i for i in range(300) if 10 <= (i * 37) % 100 < 20])
    plan = c.find({"a": {"$gte": 10}}).sort("a", 1).explain()["queryPlanner"]["winningPlan"]
    assert "SORT" not in str(plan)
    desc = [d["a"] for d in c.find({"a": {"$lt": 50}}).sort("a", -1)]
    assert desc == sorted(desc, reverse=True)
    # Without an index on the field: a filter and a sort over every partition.
    got = [d["_id"] for d in c.find({"g": 1}).sort("_id", -1)]
    assert got == [i for i in range(299, -1, -1) if i % 3 == 1]
    # Counts add up.
    assert c.count_documents({}) == 300
    assert c.estimated_document_count() == 300
    assert c.count_documents({"a": {"$lt": 50}}) == len([i for i in range(300) if (i * 37) % 100 < 50])
    assert sorted(c.distinct("g")) == [0, 1, 2]
    agg = list(c.aggregate([{"$group": {"_id": "$g", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]))
    assert [a["n"] for a in agg] == [100, 100, 100]
    # Updates and deletes route by _id.
    c.update_many({"g": 0}, {"$set": {"z": 1}})
    assert c.count_documents({"z": 1}) == 100
    c.delete_many({"_id": {"$gte": 90, "$lt": 110}})
    assert [p["count"] for p in info(db, "p")["partitions"]] == [90, 140, 50]
    assert db.command("validate", "p", full=True)["valid"] is True


def test_indexes_apply_to_every_partition(db):
    c = make(db)
    c.insert_many([{"_id": i, "b": i % 10} for i in range(50)])
    db.command("addPartition", "p")
    c.insert_many([{"_id": i, "b": i % 10} for i in range(50, 100)])
    c.create_index([("b", -1)])
    assert [d["b"] for d in c.find({"b": {"$gte": 8}}).hint("b_-1")] == [9] * 10 + [8] * 10
    stats = db.command("collStats", "p")
    assert stats["partitioned"] is True
    assert len(stats["partitions"]) == 2
    assert stats["count"] == 100
    assert stats["nindexes"] == 2
    assert sum(p["count"] for p in stats["partitions"]) == 100
    c.drop_index("b_-1")
    assert [i["name"] for i in c.list_indexes()] == ["_id_"]
    # Unique secondary indexes would span partitions: refused.
    assert code_of(lambda: c.create_index("u", unique=True)) == 17351
    c.drop()
    assert "p" not in db.list_collection_names()


def test_drop_partition_by_id_and_by_max(db):
    c = make(db)
    for n in range(4):
        c.insert_many([{"_id": n * 10 + i} for i in range(10)])
        db.command("addPartition", "p")
    c.insert_one({"_id": 1000})
    assert info(db, "p")["numPartitions"] == 5
    db.command("dropPartition", "p", id=1)
    assert [p["_id"] for p in info(db, "p")["partitions"]] == [0, 2, 3, 4]
    assert c.count_documents({"_id": {"$gte": 10, "$lt": 20}}) == 0
    # Keys of the dropped range now belong to the partition after it.
    c.insert_one({"_id": 15})
    assert info(db, "p")["partitions"][1]["count"] == 11
    # By max: every partition whose max is at or below it, from the first.
    db.command("dropPartition", "p", max={"_id": 29})
    assert [p["_id"] for p in info(db, "p")["partitions"]] == [3, 4]
    assert c.count_documents({}) == 11
    # Never the last one.
    db.command("dropPartition", "p", max={"_id": MaxKey()})
    assert [p["_id"] for p in info(db, "p")["partitions"]] == [4]
    assert [d["_id"] for d in c.find()] == [1000]
    # Ids are never reused.
    db.command("addPartition", "p")
    assert [p["_id"] for p in info(db, "p")["partitions"]] == [4, 5]
    # Dropping the last partition unbounds the one before.
    db.command("dropPartition", "p", id=5)
    assert info(db, "p")["partitions"][0]["max"] == {"_id": MaxKey()}


def test_partition_errors(db):
    c = make(db)
    db.create_collection("plain")
    assert code_of(lambda: db.command("addPartition", "p")) == 17248  # empty last partition
    assert code_of(lambda: db.command("dropPartition", "p", id=0)) == 17252  # the only one
    c.insert_many([{"_id": i} for i in range(10)])
    assert code_of(lambda: db.command("addPartition", "p", newMax={"_id": 5})) == 17250
    db.command("addPartition", "p", newMax={"_id": 20})
    assert code_of(lambda: db.command("addPartition", "p", newMax={"_id": 20})) == 17249
    assert code_of(lambda: db.command("addPartition", "p", newMax={"x": 30})) == 2
    assert code_of(lambda: db.command("dropPartition", "p")) == 2
    assert code_of(lambda: db.command("dropPartition", "p", id=1, max={"_id": 3})) == 2
    assert code_of(lambda: db.command("dropPartition", "p", id=77)) == 2
    assert code_of(lambda: db.command("addPartition", "plain")) == 20
    assert code_of(lambda: db.command("getPartitionInfo", "nope")) == 26
    assert code_of(lambda: db.command("create", "x", partitioned=True, capped=True)) == 17266
    # primaryKey: TokuMX's rules (an object, ascending, ending in _id).
    assert code_of(lambda: db.command("create", "y", partitioned=True, primaryKey={"_id": 1, "ts": 1})) == 17203
    assert code_of(lambda: db.command("create", "y", partitioned=True, primaryKey={"ts": 1})) == 17203
    assert code_of(lambda: db.command("create", "y", partitioned=True, primaryKey=5)) == 17209
    assert code_of(lambda: db.command("create", "y", partitioned=True, primaryKey={"ts": -1, "_id": 1})) == 2
    assert code_of(lambda: db.command("create", "z", partitioned="yes")) == 14
    assert code_of(lambda: db.command("addPartition", "p", force=True)) == 238


def test_a_cursor_survives_a_partition_drop(db):
    c = make(db)
    c.insert_many([{"_id": i, "pad": "x" * 100} for i in range(200)])
    db.command("addPartition", "p")
    c.insert_many([{"_id": i, "pad": "x" * 100} for i in range(200, 400)])
    cur = c.find({}, {"_id": 1}, batch_size=50)
    first = [next(cur)["_id"] for _ in range(60)]
    assert first == list(range(60))
    db.command("dropPartition", "p", id=0)
    rest = [d["_id"] for d in cur]
    # What the dropped partition had already handed out may come; then the next partition.
    assert rest[-200:] == list(range(200, 400))
    assert all(i < 200 for i in rest[:-200])
    # A cursor on a secondary index too.
    c.create_index("pad")
    c.insert_many([{"_id": i, "pad": "y"} for i in range(1000, 1100)])
    db.command("addPartition", "p")
    c.insert_many([{"_id": i, "pad": "y"} for i in range(2000, 2100)])
    cur = c.find({"pad": "y"}, {"_id": 1}, batch_size=10).hint("pad_1")
    next(cur)
    db.command("dropPartition", "p", max={"_id": 1500})
    rest = [d["_id"] for d in cur]
    assert rest[-100:] == list(range(2000, 2100))


def test_compound_primary_key_orders_and_partitions(db):
    db.command("create", "ev", partitioned=True, primaryKey={"ts": 1, "_id": 1})
    ev = db.ev
    ix = list(ev.list_indexes())
    assert ix[0]["name"] == "primaryKey" and ix[0]["key"] == {"ts": 1, "_id": 1}
    assert ix[0]["unique"] is True and ix[0]["clustering"] is True
    assert ix[1]["name"] == "_id_" and ix[1]["key"] == {"_id": 1}
    # Stored, and read back, in (ts, _id) order, not _id order.
    ev.insert_many([{"_id": i, "ts": 100 - i % 10, "v": i} for i in range(30)])
    docs = list(ev.find())
    assert [(d["ts"], d["_id"]) for d in docs] == sorted((d["ts"], d["_id"]) for d in docs)
    # _id is found through the _id_ index.
    assert ev.find_one({"_id": 7}) == {"_id": 7, "ts": 93, "v": 7}
    plan = ev.find({"_id": 7}).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["indexName"] == "_id_"
    assert ev.find_one({"_id": 7}, hint="_id_")["ts"] == 93
    # _id stays unique (within a partition), and key fields cannot change.
    with pytest.raises(OperationFailure) as e:
        ev.insert_one({"_id": 7, "ts": 93})
    assert e.value.code == 11000
    with pytest.raises(OperationFailure) as e:
        ev.update_one({"_id": 7}, {"$set": {"ts": 1}})
    assert e.value.code == 66 and "ts" in str(e.value)
    assert ev.update_one({"_id": 7}, {"$inc": {"v": 100}}).modified_count == 1
    assert ev.find_one({"_id": 7})["v"] == 107
    assert code_of(lambda: ev.insert_one({"_id": 99, "ts": [1, 2]})) == 17205
    # Partitions are ranges of (ts, _id): newMax names every key field.
    assert code_of(lambda: db.command("addPartition", "ev", newMax={"_id": 5})) == 2
    assert code_of(lambda: db.command("addPartition", "ev", newMax={"ts": 95, "_id": 0})) == 17250
    db.command("addPartition", "ev", newMax={"ts": 100, "_id": 1000})
    ev.insert_many([{"_id": 1000 + i, "ts": 200 + i} for i in range(10)])
    ev.insert_one({"_id": 2000, "ts": 50})  # below the cap: routed to the first partition
    r = info(db, "ev")
    assert [p["max"] for p in r["partitions"]] == [
        {"ts": 100, "_id": 1000}, {"ts": MaxKey(), "_id": MaxKey()}]
    assert [p["count"] for p in r["partitions"]] == [31, 10]
    db.command("addPartition", "ev")  # capped at the largest key
    assert info(db, "ev")["partitions"][1]["max"] == {"ts": 209, "_id": 1009}
    ev.insert_one({"_id": 3000, "ts": 300})
    assert db.command("dropPartition", "ev", max={"ts": 100, "_id": 1000})["ok"] == 1
    assert sorted(d["_id"] for d in ev.find()) == list(range(1000, 1010)) + [3000]
    assert ev.find_one({"_id": 7}) is None and ev.count_documents({}) == 11
    assert ev.delete_one({"_id": 1003}).deleted_count == 1
    assert ev.count_documents({"ts": {"$gte": 205}}) == 6
    assert db.command("validate", "ev", full=True)["valid"] is True
    # dropIndexes "*" keeps the _id_ index, which cannot be dropped by name either.
    db.command("dropIndexes", "ev", index="*")
    assert [i["name"] for i in ev.list_indexes()] == ["primaryKey", "_id_"]
    assert code_of(lambda: db.command("dropIndexes", "ev", index="_id_")) == 72


def test_compound_primary_key_survives_a_crash():
    s = Siltd().start()
    try:
        c = s.client(retryWrites=False)
        db = c.t
        db.command("create", "ev", partitioned=True, primaryKey={"ts": 1, "_id": 1})
        db.ev.create_index("a")
        db.ev.insert_many([{"_id": i, "ts": i // 3, "a": -i} for i in range(300)])
        db.command("addPartition", "ev")
        db.ev.insert_many([{"_id": 300 + i, "ts": 100 + i, "a": i} for i in range(50)], )
        s.kill9()
        s.start()
        c = s.client()
        db = c.t
        assert db.ev.count_documents({}) == 350
        assert db.ev.find_one({"_id": 42}) == {"_id": 42, "ts": 14, "a": -42}
        assert [d["_id"] for d in db.ev.find({"a": {"$lt": -297}}).sort("a", 1)] == [299, 298]
        assert info(db, "ev")["partitions"][0]["max"] == {"ts": 99, "_id": 299}
        assert db.command("validate", "ev", full=True)["valid"] is True
        c.close()
    finally:
        s.cleanup()


def dict_files(s):
    return len([f for f in os.listdir(s.dbpath) if f.startswith("dict-")])


@pytest.mark.parametrize("point,cmd", [
    ("siltPartitionAddCrash", "addPartition"),
    ("siltPartitionDropCrash", "dropPartition"),
])
def test_a_crash_in_the_middle_leaves_before_or_after(point, cmd):
    s = Siltd(extra=["--enable-test-commands"]).start()
    try:
        c = s.client(retryWrites=False)
        db = c.t
        db.command("create", "p", partitioned=True)
        db.p.create_index("a")
        db.p.insert_many([{"_id": i, "a": i} for i in range(100)])
        db.command("addPartition", "p")
        db.p.insert_many([{"_id": i, "a": i} for i in range(100, 200)])
        before = info(db, "p")
        files_before = dict_files(s)
        c.admin.command("configureFailPoint", point, mode="alwaysOn")
        args = {"id": 0} if cmd == "dropPartition" else {}
        with pytest.raises(Exception):
            db.command(cmd, "p", **args)
        s.proc.wait(timeout=30)
        c.close()
        s.start()
        c = s.client()
        db = c.t
        after = info(db, "p")
        ids = [p["_id"] for p in after["partitions"]]
        if cmd == "addPartition":
            assert ids in ([0, 1], [0, 1, 2])
            want = list(range(200))
        else:
            assert ids in ([0, 1], [1])
            want = list(range(200)) if ids == [0, 1] else list(range(100, 200))
        counts = [p["count"] for p in after["partitions"]]
        assert sum(counts) == len(want)
        assert [d["_id"] for d in db.p.find()] == want
        assert [d["_id"] for d in db.p.find({"a": {"$gte": 0}}).hint("a_1")] == want
        assert db.command("validate", "p", full=True)["valid"] is True
        # No dictionary is left behind: a partition has two files (documents, index a_1).
        assert before["numPartitions"] == 2
        assert dict_files(s) == files_before + 2 * (len(ids) - 2)
        # The collection works on.
        db.p.insert_one({"_id": 5000, "a": 1})
        db.command("addPartition", "p")
        assert db.p.count_documents({}) == len(want) + 1
        c.close()
    finally:
        s.cleanup()


def wait_for(pred, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def test_retention_by_documents_rotates_by_itself(db):
    db.command("create", "r", partitioned=True,
               partitionRetention={"every": {"documents": 100}, "keep": 3})
    opts = {c["name"]: c["options"] for c in db.list_collections()}
    assert opts["r"]["partitionRetention"] == {"every": {"documents": 100}, "keep": 3}
    c = db.r
    c.create_index("v")
    n = 0
    for _ in range(6):
        c.insert_many([{"_id": n + i, "v": (n + i) % 7} for i in range(100)])
        n += 100
        # The rotation opens a new partition once the last holds 100 documents.
        wait_for(lambda: info(db, "r")["partitions"][-1]["count"] == 0, "a rotation")
    parts = info(db, "r")["partitions"]
    assert len(parts) == 3
    # Two full partitions and the new, empty one: the oldest documents are gone.
    assert [p["count"] for p in parts] == [100, 100, 0]
    assert [d["_id"] for d in c.find({}, {"_id": 1})] == list(range(400, 600))
    assert c.count_documents({"v": 3}) == len([i for i in range(400, 600) if i % 7 == 3])
    assert db.command("validate", "r")["valid"] is True
    # The manual commands work beside it.
    db.command("dropPartition", "r", id=parts[0]["_id"])
    assert info(db, "r")["numPartitions"] == 2


def test_retention_by_seconds_rotates_by_itself(db):
    db.command("create", "s", partitioned=True,
               partitionRetention={"every": {"seconds": 1}, "keep": 2})
    c = db.s
    c.insert_many([{"_id": i} for i in range(10)])
    wait_for(lambda: info(db, "s")["numPartitions"] == 2, "a partition a second")
    c.insert_many([{"_id": i} for i in range(10, 20)])
    # The next rotation drops the first partition (keep: 2).
    wait_for(lambda: c.count_documents({"_id": {"$lt": 10}}) == 0, "the oldest partition dropped")
    assert info(db, "s")["numPartitions"] <= 2
    # An empty last partition is not rotated: no pile of empty partitions.
    time.sleep(2.5)
    ids = [p["_id"] for p in info(db, "s")["partitions"]]
    assert len(ids) <= 2 and c.count_documents({}) in (0, 10)


def test_retention_option_errors(db):
    for bad in ({"every": {"documents": 0}, "keep": 2}, {"every": {"hours": 1}, "keep": 2},
                {"every": {"documents": 5}}, {"every": {"documents": 5, "seconds": 1}, "keep": 1},
                {"every": {"seconds": 5}, "keep": 2, "field": "ts"}):
        assert code_of(lambda: db.command("create", "x", partitioned=True, partitionRetention=bad)) == 2, bad
    assert code_of(lambda: db.command("create", "x", partitionRetention={"every": {"seconds": 1}, "keep": 1})) == 2
    assert "x" not in db.list_collection_names()
