"""Cursors across batches, sort across types, skip/limit, projection, kill, timeouts."""
import datetime

import pytest
from bson import ObjectId, Int64, MinKey, MaxKey, Regex, Binary
from pymongo.errors import OperationFailure


def test_batches_and_get_more(db):
    db.c.insert_many([{"_id": i, "pad": "x" * 200} for i in range(1000)])
    cur = db.c.find({}, batch_size=7)
    ids = [d["_id"] for d in cur]
    assert ids == list(range(1000))
    r = db.command("find", "c", batchSize=3)
    assert len(r["cursor"]["firstBatch"]) == 3 and r["cursor"]["id"] != 0
    cid = r["cursor"]["id"]
    m = db.command("getMore", cid, collection="c", batchSize=5)
    assert [d["_id"] for d in m["cursor"]["nextBatch"]] == [3, 4, 5, 6, 7]
    k = db.command("killCursors", "c", cursors=[cid])
    assert k["cursorsKilled"] == [cid]
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cid, collection="c")
    assert e.value.code == 43
    one = db.command("find", "c", batchSize=2, singleBatch=True)
    assert one["cursor"]["id"] == 0 and len(one["cursor"]["firstBatch"]) == 2
    small = db.command("find", "c", filter={"_id": {"$lt": 3}})
    assert small["cursor"]["id"] == 0


def test_skip_limit_sort_projection(db):
    db.c.insert_many([{"_id": i, "a": i % 5, "b": -i, "s": {"t": i}} for i in range(50)])
    got = list(db.c.find({}, {"a": 1, "_id": 0}).sort([("a", -1), ("b", 1)]).skip(3).limit(4))
    assert got == [{"a": 4}] * 4
    full = list(db.c.find({}, {"b": 1}).sort("a", 1).limit(3))
    assert [d["b"] for d in full] == [0, -5, -10]  # ties keep _id order
    nested = list(db.c.find({"_id": 7}, {"s.t": 1, "_id": 0}))
    assert nested == [{"s": {"t": 7}}]
    excl = db.c.find_one({"_id": 8}, {"s": 0, "b": 0})
    assert excl == {"_id": 8, "a": 3}
    assert db.c.find({}).limit(-5).__class__  # negative limits are the driver's business
    assert len(list(db.c.find({}).limit(0))) == 50


def test_sort_across_types(db):
    vals = [
        MaxKey(), None, 3, 2.5, Int64(1), "b", "a", {"x": 1}, [0, 9], Binary(b"\x01"),
        ObjectId("000000000000000000000001"), False, True,
        datetime.datetime(2020, 1, 1), Regex("^a"), MinKey(),
    ]
    db.c.insert_many([{"_id": i, "v": v} for i, v in enumerate(vals)])
    db.c.insert_one({"_id": 100})  # missing sorts like null
    order = [d["_id"] for d in db.c.find().sort([("v", 1), ("_id", 1)])]
    # MinKey, null/missing, numbers (0 from the array's min, 1, 2.5, 3), strings, object,
    # array (by its min 0 it sorts among numbers), binary, ObjectId, bools, date, regex, MaxKey.
    assert order[0] == 15
    assert set(order[1:3]) == {1, 100}
    assert order[3:7] == [8, 4, 3, 2]
    assert order[7:9] == [6, 5]
    assert order[9] == 7
    assert order[10:] == [9, 10, 11, 12, 13, 14, 0]
    desc = [d["_id"] for d in db.c.find().sort([("v", -1), ("_id", 1)])]
    assert desc[0] == 0 and desc[-1] == 15


def test_slice_and_elem_match_projection(db):
    db.c.insert_one({"_id": 1, "arr": [1, 2, 3, 4, 5], "objs": [{"k": 1}, {"k": 2}, {"k": 3}]})
    assert db.c.find_one({}, {"arr": {"$slice": 2}})["arr"] == [1, 2]
    assert db.c.find_one({}, {"arr": {"$slice": -2}})["arr"] == [4, 5]
    assert db.c.find_one({}, {"arr": {"$slice": [1, 2]}})["arr"] == [2, 3]
    assert db.c.find_one({}, {"objs": {"$elemMatch": {"k": {"$gt": 1}}}})["objs"] == [{"k": 2}]
    assert db.c.find_one({"objs.k": 3}, {"objs.$": 1})["objs"] == [{"k": 3}]


def test_max_time_ms_and_comment(db):
    db.c.insert_many([{"_id": i} for i in range(10)])
    assert len(list(db.c.find({}).max_time_ms(10000).comment("hello"))) == 10
    assert len(list(db.c.find({}).hint("_id_"))) == 10
    with pytest.raises(OperationFailure) as e:
        list(db.c.find({}).hint("nope_1"))
    assert e.value.code == 2


def test_idle_cursor_times_out():
    from conftest import Siltd
    s = Siltd(extra=["--cursor-timeout-s", "1"]).start()
    try:
        c = s.client()
        c.t.c.insert_many([{"_id": i} for i in range(10)])
        r = c.t.command("find", "c", batchSize=2)
        cid = r["cursor"]["id"]
        assert cid != 0
        import time
        time.sleep(3)
        with pytest.raises(OperationFailure) as e:
            c.t.command("getMore", cid, collection="c")
        assert e.value.code == 43
        c.close()
    finally:
        s.cleanup()


def test_a_cursor_reads_one_snapshot_while_others_write(db, client):
    """Cursors read the snapshot of their first batch to their last (as TokuMX's MVCC
    cursors): updates, deletes and inserts by other clients between getMores are not seen,
    whether the cursor reads the primary tree or an index."""
    db.c.insert_many([{"_id": i, "v": 0, "k": i} for i in range(40)])
    db.c.create_index("k")
    for query in ({}, {"k": {"$gte": 0}}):
        cur = db.c.find(query, batch_size=5)
        first = [next(cur) for _ in range(5)]
        other = client[db.name]
        other.c.update_many({}, {"$inc": {"v": 1}})
        other.c.delete_many({"_id": {"$gte": 30}})
        other.c.insert_many([{"_id": 100 + i, "v": 9, "k": 100 + i} for i in range(5)])
        rest = list(cur)
        got = first + rest
        assert [d["_id"] for d in got] == list(range(40)), query
        assert {d["v"] for d in got} == {0}
        # Put the collection back for the next round.
        other.c.delete_many({"_id": {"$gte": 100}})
        other.c.update_many({}, {"$set": {"v": 0}})
        other.c.insert_many([{"_id": i, "v": 0, "k": i} for i in range(30, 40)])
    # A new query sees the writes.
    db.c.update_one({"_id": 0}, {"$set": {"v": 5}})
    assert db.c.find_one({"_id": 0})["v"] == 5
