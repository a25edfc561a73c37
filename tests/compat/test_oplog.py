"""The oplog (`local.oplog.rs`) of `siltd --replSet rs0`, through pymongo: entries in MongoDB's
format for every kind of write and DDL, tailing with awaitData from a `ts`, `applyOps` replay
into an empty server with equal `dbHash`, agreement of data and oplog after kill -9, trimming
by `--oplogSize`, and the clock across a restart."""
import random
import threading
import time

import pymongo
import pytest
from bson import Timestamp
from pymongo.cursor import CursorType

from conftest import Siltd, rs_client


def newest(c):
    return next(c.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]


def since(c, ts, **filt):
    q = {"ts": {"$gt": ts}, "op": {"$ne": "n"}}
    q.update(filt)
    return list(c.local.oplog.rs.find(q))


def test_crud_entries_have_mongods_shape(rc):
    db = rc.oplog_crud
    db.c.insert_one({"_id": 0})
    t0 = newest(rc)
    db.c.insert_one({"_id": 1, "a": 1, "arr": [1, 2, 3]})
    db.c.update_one({"_id": 1}, {"$set": {"a": 2}, "$push": {"arr": 4}, "$unset": {"zz": 1}})
    db.c.replace_one({"_id": 1}, {"b": 1})
    db.c.delete_one({"_id": 1})
    e = since(rc, t0)
    assert [x["op"] for x in e] == ["i", "u", "u", "d"]
    uuid = db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"][0]["info"]["uuid"]
    for x in e:
        assert x["ns"] == "oplog_crud.c"
        assert x["ui"] == uuid
        assert x["v"] == 2 and x["t"] == 1
        assert isinstance(x["ts"], Timestamp)
        # pymongo's retryable writes: every write carries its session.
        assert set(x["lsid"]) >= {"id"} and x["stmtId"] == 0
        assert x["prevOpTime"] == {"ts": Timestamp(0, 0), "t": -1}
    assert list(e[0]) == ["lsid", "txnNumber", "op", "ns", "ui", "o", "o2", "stmtId", "ts", "t",
                          "v", "wall", "prevOpTime"]
    assert e[0]["o"] == {"_id": 1, "a": 1, "arr": [1, 2, 3]} and e[0]["o2"] == {"_id": 1}
    assert e[1]["o"] == {"$v": 2, "diff": {"u": {"a": 2}, "sarr": {"a": True, "u3": 4}}}
    assert e[1]["o2"] == {"_id": 1}
    assert e[2]["o"] == {"_id": 1, "b": 1}
    assert e[3]["o"] == {"_id": 1} and "o2" not in e[3]
    # Times are unique and increasing.
    ts = [x["ts"] for x in e]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)


def test_writes_without_a_session_have_no_session_fields(rs):
    c = rs_client(rs, retryWrites=False)
    try:
        t0 = newest(c)
        c.oplog_plain.c.insert_one({"_id": 1})
        (e,) = since(c, t0, ns="oplog_plain.c")
        assert list(e) == ["op", "ns", "ui", "o", "o2", "ts", "t", "v", "wall"]
    finally:
        c.close()


def test_a_retryable_insert_many_chains_its_statements(rc):
    t0 = newest(rc)
    rc.oplog_retry.c.insert_many([{"_id": i} for i in range(3)])
    e = since(rc, t0, ns="oplog_retry.c")
    assert [x["stmtId"] for x in e] == [0, 1, 2]
    assert len({x["txnNumber"] for x in e}) == 1
    assert e[1]["prevOpTime"] == {"ts": e[0]["ts"], "t": 1}
    assert e[2]["prevOpTime"] == {"ts": e[1]["ts"], "t": 1}


def test_a_transaction_is_one_apply_ops_entry(rc):
    rc.oplog_txn.c.insert_one({"_id": 0})
    t0 = newest(rc)
    with rc.start_session() as s:
        lsid = s.session_id["id"]
        with s.start_transaction():
            rc.oplog_txn.c.insert_one({"_id": 1}, session=s)
            rc.oplog_txn.c.update_one({"_id": 0}, {"$set": {"x": 1}}, session=s)
            rc.oplog_txn.c.delete_one({"_id": 0}, session=s)
    (e,) = since(rc, t0)
    assert e["op"] == "c" and e["ns"] == "admin.$cmd"
    assert e["lsid"]["id"] == lsid
    inner = e["o"]["applyOps"]
    assert [(x["op"], x["ns"]) for x in inner] == [("i", "oplog_txn.c"), ("u", "oplog_txn.c"),
                                                  ("d", "oplog_txn.c")]
    # An aborted transaction logs nothing.
    t1 = newest(rc)
    with rc.start_session() as s:
        s.start_transaction()
        rc.oplog_txn.c.insert_one({"_id": 2}, session=s)
        s.abort_transaction()
    assert since(rc, t1) == []


def test_ddl_entries(rc):
    db = rc.oplog_ddl
    t0 = newest(rc)
    db.create_collection("c", validator={"a": {"$exists": True}})
    db.c.create_index("a", name="a_1")
    db.command("collMod", "c", validator={})
    db.c.drop_index("a_1")
    rc.admin.command("renameCollection", "oplog_ddl.c", to="oplog_ddl.d")
    db.d.drop()
    db.e.insert_one({"_id": 1, "a": 1})
    rc.drop_database("oplog_ddl")
    e = since(rc, t0)
    cmds = [(x["ns"], next(iter(x["o"]))) for x in e if x["op"] == "c"]
    assert cmds == [
        ("oplog_ddl.$cmd", "create"), ("oplog_ddl.$cmd", "createIndexes"),
        ("oplog_ddl.$cmd", "collMod"), ("oplog_ddl.$cmd", "dropIndexes"),
        ("oplog_ddl.$cmd", "renameCollection"), ("oplog_ddl.$cmd", "drop"),
        ("oplog_ddl.$cmd", "create"), ("oplog_ddl.$cmd", "drop"),
        ("oplog_ddl.$cmd", "dropDatabase"),
    ]
    create = e[0]["o"]
    assert create["create"] == "c" and create["validator"] == {"a": {"$exists": True}}
    assert create["idIndex"] == {"v": 2, "key": {"_id": 1}, "name": "_id_"}
    ci = [x for x in e if "createIndexes" in x["o"]][0]["o"]
    assert ci["key"] == {"a": 1} and ci["name"] == "a_1"
    ren = [x for x in e if "renameCollection" in x["o"]][0]["o"]
    assert ren["renameCollection"] == "oplog_ddl.c" and ren["to"] == "oplog_ddl.d"


def test_the_oplog_is_not_writable_and_a_standalone_has_none(rc, standalone_client):
    with pytest.raises(pymongo.errors.OperationFailure):
        rc.local.oplog.rs.insert_one({"x": 1})
    assert list(standalone_client.local.oplog.rs.find()) == []


def test_tailing_with_await_data_from_a_ts(rs, rc):
    """As Meteor's oplog driver tails it: tailable, awaitData, `ts > last`."""
    rc.oplog_tail.c.insert_one({"_id": "seed"})
    start = newest(rc)
    cur = rc.local.oplog.rs.find({"ts": {"$gt": start}, "ns": "oplog_tail.c"},
                                 cursor_type=CursorType.TAILABLE_AWAIT, oplog_replay=True)
    cur.max_await_time_ms(2000)
    n = 200

    def writer():
        w = rs_client(rs)
        for i in range(n):
            w.oplog_tail.c.insert_one({"_id": i})
        w.close()

    t = threading.Thread(target=writer)
    t.start()
    got = []
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline and cur.alive:
        try:
            got.append(cur.next()["o"]["_id"])
        except StopIteration:
            pass
    t.join()
    assert got == list(range(n)), "each entry once, in order"


def dbhashes(c, db):
    return c[db].command("dbHash")["collections"]


def test_apply_ops_replays_the_oplog_into_an_empty_server(rc, standalone_client):
    db = rc.oplog_replay
    t0 = newest(rc)
    rnd = random.Random(7)
    db.v.insert_one({"x": 1})
    db.c.create_index([("a", 1)])
    for i in range(400):
        k = rnd.randrange(60)
        x = rnd.random()
        if x < 0.35:
            db.c.update_one({"_id": k}, {"$set": {"a": rnd.randrange(5), "n.x": i},
                                         "$push": {"arr": i}}, upsert=True)
        elif x < 0.45:
            db.c.delete_one({"_id": k})
        elif x < 0.55:
            db.c.replace_one({"_id": k}, {"r": i, "s": "x" * rnd.randrange(50)}, upsert=True)
        elif x < 0.65:
            db.c.update_one({"_id": k}, {"$pop": {"arr": 1}, "$unset": {"n": 1}})
        elif x < 0.8:
            with rc.start_session() as s:
                with s.start_transaction():
                    db.d.insert_one({"i": i}, session=s)
                    db.c.update_one({"_id": k}, {"$inc": {"t": 1}}, session=s)
        else:
            db.c.update_one({"_id": k}, [{"$set": {"p": {"$concat": ["x", {"$toString": i}]}}}],
                            upsert=True)
    db.c.rename("c2")
    db.d.drop()
    entries = list(rc.local.oplog.rs.find({"ts": {"$gt": t0}}))
    standalone_client.drop_database("oplog_replay")
    for k in range(0, len(entries), 50):
        standalone_client.admin.command("applyOps", entries[k:k + 50])
    want = dbhashes(rc, "oplog_replay")
    assert set(want) == {"c2", "v"}
    assert dbhashes(standalone_client, "oplog_replay") == want
    # Applying it all again changes nothing.
    standalone_client.admin.command("applyOps", entries)
    assert dbhashes(standalone_client, "oplog_replay") == want


def test_data_and_oplog_agree_after_kill9(standalone_client):
    s = Siltd(extra=["--replSet", "rs0"]).start()
    try:
        c = rs_client(s)
        c.crash.c.insert_one({"_id": "seed"})
        stop = threading.Event()

        def writer(seed):
            rnd = random.Random(seed)
            w = rs_client(s, retryWrites=False)
            try:
                while not stop.is_set():
                    k = rnd.randrange(200)
                    if rnd.random() < 0.7:
                        w.crash.c.update_one({"_id": k}, {"$inc": {"n": 1}, "$push": {"l": seed}},
                                             upsert=True)
                    else:
                        w.crash.c.delete_one({"_id": k})
            except pymongo.errors.PyMongoError:
                pass

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        s.kill9()
        stop.set()
        for t in threads:
            t.join()
        s.start()
        c = rs_client(s)
        entries = list(c.local.oplog.rs.find())
        assert any(e.get("ns") == "crash.c" and e["op"] == "u" for e in entries)
        standalone_client.drop_database("crash")
        standalone_client.admin.command("applyOps", entries)
        assert dbhashes(standalone_client, "crash") == dbhashes(c, "crash")
        c.close()
    finally:
        s.cleanup()


def test_trimmed_by_size_and_the_clock_survives_a_restart():
    s = Siltd(extra=["--replSet", "rs0", "--oplogSize", "1"]).start()
    try:
        c = rs_client(s)
        first = next(c.local.oplog.rs.find().limit(1))["ts"]
        pad = "x" * 2000
        for i in range(40):
            c.trim.c.insert_many([{"pad": pad} for _ in range(50)])
            time.sleep(0.05)
        deadline = time.time() + 20
        while time.time() < deadline:
            oldest = next(c.local.oplog.rs.find().limit(1))["ts"]
            if oldest > first:
                break
            time.sleep(0.2)
        assert oldest > first, "the oldest partition was dropped"
        size = sum(len(str(e)) for e in c.local.oplog.rs.find())
        assert size < 3 * (1 << 20)
        last = newest(c)
        c.close()
        s.stop()
        s.start()
        c = rs_client(s)
        assert newest(c) == last
        c.trim.c.insert_one({"after": 1})
        assert newest(c) > last
        assert c.admin.command("ping")["operationTime"] >= last
        c.close()
    finally:
        s.cleanup()


def test_operation_time_is_the_writes_own_time(rc):
    r = rc.oplog_optime.command("insert", "c", documents=[{"_id": 1}])
    (e,) = since(rc, Timestamp(r["operationTime"].time, 0), ns="oplog_optime.c")
    assert e["ts"] == r["operationTime"]
    # So a change stream started at it sees the write.
    with rc.oplog_optime.c.watch(start_at_operation_time=r["operationTime"]) as st:
        ev = st.try_next()
        while ev is None:
            ev = st.try_next()
        assert ev["documentKey"] == {"_id": 1}


def test_repl_set_resize_oplog(rc, standalone_client):
    assert rc.admin.command("replSetResizeOplog", 1, size=2000.0, minRetentionHours=1.5)["ok"] == 1
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        rc.admin.command("replSetResizeOplog", 1, size=900)
    assert e.value.code == 51024
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        rc.admin.command("replSetResizeOplog", 1)
    assert e.value.code == 72
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        standalone_client.admin.command("replSetResizeOplog", 1, size=1000)
    assert e.value.code == 76
    rc.admin.command("replSetResizeOplog", 1, size=990, minRetentionHours=0)


def test_mongodump_oplog_and_mongorestore_replay_sequence(rc, standalone_client):
    """What `mongodump --oplog` reads (the newest entry before and after the dump, the oldest
    to check it is still there, then `ts` in [start, end]) and what `mongorestore
    --oplogReplay` sends (each entry in its own applyOps on admin, `ui` removed)."""
    db = rc.oplog_dump
    db.c.insert_many([{"_id": i, "v": 0} for i in range(100)])
    start = next(rc.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]
    copy = list(db.c.find())  # the "dump" of the collection, taken while writes go on
    for i in range(0, 100, 3):
        db.c.update_one({"_id": i}, {"$inc": {"v": 1}})
    db.c.delete_many({"_id": {"$gte": 90}})
    end = next(rc.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]
    oldest = next(rc.local.oplog.rs.find().sort("$natural", 1).limit(1))["ts"]
    assert oldest <= start
    entries = list(rc.local.oplog.rs.find({"$and": [{"ts": {"$gte": start}},
                                                   {"ts": {"$lte": end}}]}))
    assert entries[0]["ts"] == start and entries[-1]["ts"] == end
    standalone_client.drop_database("oplog_dump")
    standalone_client.oplog_dump.c.insert_many(copy)
    for e in entries:
        e.pop("ui", None)
        standalone_client.admin.command("applyOps", [e])
    assert dbhashes(standalone_client, "oplog_dump") == dbhashes(rc, "oplog_dump")


def test_the_oplog_in_listings_count_and_aggregate(rc):
    rc.oplog_list.c.insert_many([{"_id": i} for i in range(5)])
    assert "local" in rc.list_database_names()
    (info,) = rc.local.command("listCollections", filter={"name": "oplog.rs"})["cursor"]["firstBatch"]
    assert info["options"]["capped"] is True and info["options"]["size"] > 0
    assert "idIndex" not in info
    n = rc.local.oplog.rs.count_documents({"ns": "oplog_list.c", "op": "i"})
    assert n == 5
    assert rc.local.command("count", "oplog.rs", query={"ns": "oplog_list.c"})["n"] == 5
    got = list(rc.local.oplog.rs.aggregate([{"$match": {"ns": "oplog_list.c", "op": "i"}},
                                           {"$group": {"_id": None, "ids": {"$push": "$o._id"}}}]))
    assert got[0]["ids"] == list(range(5))


def test_coll_stats_of_the_oplog(rc):
    """What mongosh's `db.getReplicationInfo()` reads."""
    st = rc.local.command("collStats", "oplog.rs")
    assert st["capped"] is True and st["maxSize"] >= 990 * 1024 * 1024
    assert st["size"] > 0 and st["count"] > 0 and st["nindexes"] == 0


def test_delete_many_is_logged_in_batches(rc):
    """mongod 7's batched deletes: a multi-document delete commits (and logs) its documents in
    batches of 10, each one `applyOps` entry without a session."""
    db = rc.oplog_batched
    db.c.insert_many([{"_id": i} for i in range(25)])
    t0 = newest(rc)
    assert db.c.delete_many({"_id": {"$gte": 2}}).deleted_count == 23
    e = since(rc, t0)
    assert [len(x["o"]["applyOps"]) for x in e] == [10, 10, 3]
    for x in e:
        assert x["op"] == "c" and x["ns"] == "admin.$cmd" and "lsid" not in x
    ids = [op["o"]["_id"] for x in e for op in x["o"]["applyOps"]]
    assert sorted(ids) == list(range(2, 25))
    assert all(op["op"] == "d" and op["ns"] == "oplog_batched.c" for x in e
               for op in x["o"]["applyOps"])
    assert db.c.count_documents({}) == 2


def test_fast_update_entries_replay_to_the_primarys_documents(rc, standalone_client):
    """Differential: fast updates logged as their messages and applied on replay give the
    documents the primary has (the same update function, the same `now`)."""
    db = rc.oplog_fast
    db.c.insert_many([{"_id": i, "n": 0, "l": []} for i in range(30)])
    t0 = newest(rc)
    rnd = random.Random(3)
    for i in range(300):
        k = rnd.randrange(30)
        u = rnd.choice([
            {"$inc": {"n": 1}},
            {"$push": {"l": i}, "$currentDate": {"at": True}},
            {"$mul": {"n": 2}, "$set": {"s": str(i)}},
            {"$pop": {"l": -1}, "$max": {"m": i % 7}},
        ])
        r = db.command("update", "c", updates=[{"q": {"_id": k}, "u": u, "upsert": i % 11 == 0}],
                       fastUpdate=True)
        assert "fastUpdates" in r
    entries = list(rc.local.oplog.rs.find({"ts": {"$gt": t0}, "ns": "oplog_fast.c"}))
    assert entries and all("$silt" in e["o"] for e in entries if e["op"] == "u")
    standalone_client.drop_database("oplog_fast")
    standalone_client.oplog_fast.c.insert_many([{"_id": i, "n": 0, "l": []} for i in range(30)])
    standalone_client.admin.command("applyOps", entries)
    assert dbhashes(standalone_client, "oplog_fast") == dbhashes(rc, "oplog_fast")
