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


def test_max_time_ms_is_spent_only_while_working(db):
    """A find's maxTimeMS is the cursor's working budget: time the client spends between
    getMores does not count (mongod's rule), so a getMore after the budget's wall-clock end
    still answers."""
    import time

    db.c.insert_many([{"_id": i} for i in range(4)])
    r = db.command("find", "c", batchSize=1, maxTimeMS=200)
    cid = r["cursor"]["id"]
    for i in range(1, 4):
        time.sleep(0.15)
        m = db.command("getMore", cid, collection="c", batchSize=1)
        assert [d["_id"] for d in m["cursor"]["nextBatch"]] == [i]
    last = db.command("getMore", cid, collection="c", batchSize=1)
    assert last["cursor"]["nextBatch"] == [] and last["cursor"]["id"] == 0


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


def test_a_cursor_belongs_to_its_session(client, db):
    """mongod's rule: only the session that opened a cursor may continue or kill it (13)."""
    db.c.insert_many([{"_id": i} for i in range(20)])
    with client.start_session() as mine, client.start_session() as other:
        r = db.command("find", "c", batchSize=2, session=mine)
        cid = r["cursor"]["id"]
        assert cid != 0
        with pytest.raises(OperationFailure) as e:
            db.command("getMore", cid, collection="c", batchSize=2, session=other)
        # Without --auth, mongod's 50738 names both sessions.
        assert e.value.code == 50738
        assert f"Cannot run getMore on cursor {cid}, which was created in session" in str(e.value)
        # A getMore's own maxTimeMS is for awaitData cursors only (2), and refusals leave the
        # cursor as it was for its owner.
        with pytest.raises(OperationFailure) as e:
            db.command("getMore", cid, collection="c", maxTimeMS=100, session=mine)
        assert e.value.code == 2
        m = db.command("getMore", cid, collection="c", batchSize=2, session=mine)
        assert [d["_id"] for d in m["cursor"]["nextBatch"]] == [2, 3]
        # killCursors does not look at the session (the same user may kill it).
        k = db.command("killCursors", "c", cursors=[cid], session=other)
        assert k["cursorsKilled"] == [cid]


@pytest.mark.parametrize("how", ["drop", "rename", "dropDatabase"])
def test_a_cursor_dies_with_its_collection(client, how):
    """A getMore after its collection is dropped or renamed, or its database dropped, gets
    175 QueryPlanKilled; the cursor is gone afterwards (43)."""
    db = client["cursor_kill_" + how]
    db.c.insert_many([{"_id": i} for i in range(20)])
    with client.start_session() as sess:
        cid = db.command("find", "c", batchSize=2, session=sess)["cursor"]["id"]
        if how == "drop":
            db.c.drop()
        elif how == "rename":
            db.c.rename("d")
        else:
            client.drop_database(db.name)
        with pytest.raises(OperationFailure) as e:
            db.command("getMore", cid, collection="c", session=sess)
        assert e.value.code == 175 and e.value.details["codeName"] == "QueryPlanKilled"
        if how == "rename":
            assert f"collection renamed from '{db.name}.c' to '{db.name}.d'. UUID " in str(e.value)
        else:
            assert "collection dropped. UUID " in str(e.value)
        with pytest.raises(OperationFailure) as e:
            db.command("getMore", cid, collection="c", session=sess)
        assert e.value.code == 43
    client.drop_database(db.name)


def test_a_cursor_belongs_to_its_user():
    from conftest import Siltd
    s = Siltd(extra=["--auth"]).start()
    try:
        anon = s.client()
        anon.admin.command("createUser", "root", pwd="r", roles=["root"])
        root = s.client(username="root", password="r")
        root.admin.command("createUser", "a", pwd="a", roles=["readAnyDatabase"])
        root.admin.command("createUser", "b", pwd="b", roles=["readAnyDatabase"])
        root.t.c.insert_many([{"_id": i} for i in range(10)])
        a = s.client(username="a", password="a")
        b = s.client(username="b", password="b")
        cid = a.t.command("find", "c", batchSize=2)["cursor"]["id"]
        with pytest.raises(OperationFailure) as e:
            b.t.command("getMore", cid, collection="c")
        assert e.value.code == 13
        assert "Cursor session id (" in str(e.value)
        with pytest.raises(OperationFailure) as e:
            b.t.command("killCursors", "c", cursors=[cid])
        assert e.value.code == 13
        assert "not authorized to kill cursor on t.c" in str(e.value)
        assert a.t.command("killCursors", "c", cursors=[cid])["cursorsKilled"] == [cid]
    finally:
        s.cleanup()


def test_a_full_batch_leaves_the_cursor_open(client, db):
    """mongod does not read ahead: a batch that ends at the last document keeps the cursor,
    and the next getMore returns an empty batch with id 0; a limit reached closes it at once;
    an aggregate's full batch always stays open."""
    db.c.insert_many([{"_id": i} for i in range(101)])
    with client.start_session() as sess:
        r = db.command("find", "c", batchSize=5, filter={"_id": {"$lt": 5}}, session=sess)
        assert len(r["cursor"]["firstBatch"]) == 5 and r["cursor"]["id"] != 0
        m = db.command("getMore", r["cursor"]["id"], collection="c", session=sess)
        assert m["cursor"]["nextBatch"] == [] and m["cursor"]["id"] == 0
        whole = db.command("find", "c", session=sess)
        assert len(whole["cursor"]["firstBatch"]) == 101 and whole["cursor"]["id"] != 0
        db.command("killCursors", "c", cursors=[whole["cursor"]["id"]], session=sess)
        lim = db.command("find", "c", batchSize=5, limit=5, session=sess)
        assert len(lim["cursor"]["firstBatch"]) == 5 and lim["cursor"]["id"] == 0
        fewer = db.command("find", "c", batchSize=5, filter={"_id": {"$lt": 4}}, session=sess)
        assert fewer["cursor"]["id"] == 0
        agg = db.command("aggregate", "c", pipeline=[{"$limit": 3}], cursor={"batchSize": 3},
                         session=sess)
        assert len(agg["cursor"]["firstBatch"]) == 3 and agg["cursor"]["id"] != 0
        m = db.command("getMore", agg["cursor"]["id"], collection="c", session=sess)
        assert m["cursor"]["nextBatch"] == [] and m["cursor"]["id"] == 0
    # Drivers see the same documents either way.
    assert len(list(db.c.find({}, batch_size=101))) == 101


def test_a_full_get_more_batch_fits_a_reply(db):
    # 250,000 documents of 84 bytes: a getMore without batchSize fills 16 MiB, and the
    # reply's array adds a type byte and an index string per document on top of that.
    pad = "p" * 60
    for i in range(0, 250_000, 10_000):
        db.c.insert_many([{"_id": j, "pad": pad} for j in range(i, i + 10_000)])
    assert sum(1 for _ in db.c.find({})) == 250_000
