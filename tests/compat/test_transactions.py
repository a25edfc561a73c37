"""Transactions, sessions and retryable writes against `siltd --replSet rs0`, through pymongo.

The isolation tests (issue 11): no dirty reads; repeatable reads inside a snapshot; lost
updates prevented by WriteConflict; a deadlock detected with one victim aborted;
with_transaction retrying to success; an aborted transaction leaving nothing; a retried write
applied once (also across a kill -9); a snapshot session reading one cluster time; and a
kill -9 in the middle of many concurrent transactions.
"""
import random
import socket
import struct
import threading
import time
import uuid

import bson
import pymongo
import pytest
from bson import Int64
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from conftest import Siltd


def rs_client(server, **kw):
    kw.setdefault("serverSelectionTimeoutMS", 10000)
    return pymongo.MongoClient(f"mongodb://127.0.0.1:{server.port}/?replicaSet=rs0", **kw)


@pytest.fixture(scope="module")
def rs():
    s = Siltd(extra=["--replSet", "rs0"]).start()
    yield s
    s.stop()
    assert s.proc.returncode == 0, "siltd did not shut down cleanly: " + s.read_log()[-2000:]
    s.cleanup()


@pytest.fixture(scope="module")
def rc(rs):
    c = rs_client(rs)
    yield c
    c.close()


@pytest.fixture()
def tdb(rc, request):
    name = "x_" + request.node.name[:50]
    rc.drop_database(name)
    yield rc[name]
    rc.drop_database(name)


def _recv(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def raw_command(port, doc):
    """One OP_MSG with `doc` as its body, on a new connection: the session fields are exactly
    the ones given (a driver would set its own)."""
    body = bson.encode(doc)
    msg = struct.pack("<iiii", 16 + 4 + 1 + len(body), 1, 0, 2013) + struct.pack("<I", 0) + b"\x00" + body
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(msg)
        (length,) = struct.unpack("<i", _recv(s, 4))
        rest = _recv(s, length - 4)
        return bson.decode(rest[12 + 4 + 1:])


def lsid():
    return {"id": bson.Binary(uuid.uuid4().bytes, 4)}


# --- the replica set face ---------------------------------------------------------------

def test_hello_presents_a_one_member_replica_set(rs, rc):
    h = rc.admin.command("hello")
    me = f"127.0.0.1:{rs.port}"
    assert h["setName"] == "rs0" and h["isWritablePrimary"] is True
    assert h["hosts"] == [me] and h["primary"] == me and h["me"] == me
    assert h["setVersion"] == 1 and isinstance(h["electionId"], bson.ObjectId)
    assert "topologyVersion" in h and "$clusterTime" in h and "operationTime" in h
    assert rc.topology_description.topology_type_name == "ReplicaSetWithPrimary"
    st = rc.admin.command("replSetGetStatus")
    assert st["set"] == "rs0" and st["myState"] == 1
    assert [m["stateStr"] for m in st["members"]] == ["PRIMARY"]
    conf = rc.admin.command("replSetGetConfig")["config"]
    assert conf["_id"] == "rs0" and [m["host"] for m in conf["members"]] == [me]
    # The set is initiated from the start; as on mongod, the first `rs.initiate()` of a
    # fresh server is accepted (`test_replset_members.py` checks it), and any later one
    # answers AlreadyInitialized.
    try:
        rc.admin.command("replSetInitiate")
    except OperationFailure as e:
        assert e.code == 23
    with pytest.raises(OperationFailure) as e:
        rc.admin.command("replSetInitiate")
    assert e.value.code == 23


def test_cluster_time_advances_with_writes(rs, tdb):
    r1 = raw_command(rs.port, {"insert": "c", "documents": [{"_id": 1}], "$db": tdb.name})
    r2 = raw_command(rs.port, {"insert": "c", "documents": [{"_id": 2}], "$db": tdb.name})
    assert r1["ok"] == 1 and r2["ok"] == 1
    assert r2["operationTime"] > r1["operationTime"]
    assert r2["$clusterTime"]["clusterTime"] >= r2["operationTime"]


def test_standalone_still_refuses(client):
    with pytest.raises(OperationFailure) as e:
        client.admin.command("replSetGetStatus")
    assert e.value.code == 76


# --- isolation ----------------------------------------------------------------------------

def test_no_dirty_reads(rc, tdb):
    tdb.a.insert_one({"_id": 1, "v": 0})
    with rc.start_session() as s:
        s.start_transaction()
        tdb.a.update_one({"_id": 1}, {"$set": {"v": 1}}, session=s)
        tdb.a.insert_one({"_id": 2}, session=s)
        # Others see none of it until the commit; the transaction sees all of it.
        assert tdb.a.find_one({"_id": 1})["v"] == 0
        assert tdb.a.find_one({"_id": 2}) is None
        assert tdb.a.count_documents({}) == 1
        assert tdb.a.find_one({"_id": 1}, session=s)["v"] == 1
        s.commit_transaction()
    assert tdb.a.find_one({"_id": 1})["v"] == 1 and tdb.a.count_documents({}) == 2


def test_repeatable_reads_inside_a_snapshot(rc, tdb):
    tdb.a.insert_many([{"_id": i, "v": 0} for i in range(10)])
    with rc.start_session() as s:
        s.start_transaction(read_concern=ReadConcern("snapshot"))
        first = list(tdb.a.find({}, session=s))
        tdb.a.update_many({}, {"$set": {"v": 7}})
        tdb.a.insert_one({"_id": 99})
        tdb.a.delete_one({"_id": 0})
        assert list(tdb.a.find({}, session=s)) == first
        assert tdb.a.distinct("v", session=s) == [0]
        agg = list(tdb.a.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}}}], session=s))
        assert agg[0]["n"] == 10
        s.commit_transaction()
    assert tdb.a.count_documents({"v": 7}) == 9


def _txn_error(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value


def test_lost_update_prevented_by_write_conflict(rc, tdb):
    tdb.a.insert_one({"_id": 1, "n": 0})
    # Two transactions change one document: the second writer conflicts at once.
    with rc.start_session() as s1, rc.start_session() as s2:
        s1.start_transaction()
        s2.start_transaction()
        tdb.a.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s1)
        e = _txn_error(lambda: tdb.a.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s2))
        assert e.code == 112 and e.has_error_label("TransientTransactionError")
        s1.commit_transaction()
        # The loser's transaction is gone.
        e = _txn_error(lambda: tdb.a.find_one({}, session=s2))
        assert e.code == 251 and e.has_error_label("TransientTransactionError")
    # First committer wins: a transaction whose snapshot predates another's commit cannot
    # overwrite it.
    with rc.start_session() as s1, rc.start_session() as s2:
        s1.start_transaction()
        s2.start_transaction()
        assert tdb.a.find_one({"_id": 1}, session=s2)["n"] == 1
        tdb.a.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s1)
        s1.commit_transaction()
        e = _txn_error(lambda: tdb.a.update_one({"_id": 1}, {"$set": {"n": 100}}, session=s2))
        assert e.code == 112 and e.has_error_label("TransientTransactionError")
    assert tdb.a.find_one({"_id": 1})["n"] == 2


def test_deadlock_is_detected_and_one_victim_aborted(rc, tdb):
    tdb.a.insert_many([{"_id": 1, "n": 0}, {"_id": 2, "n": 0}])
    before = rc.admin.command("serverStatus")["silt"]["transactions"]["deadlocks"]
    rc.admin.command("setParameter", 1, maxTransactionLockRequestTimeoutMillis=20000)
    try:
        with rc.start_session() as a, rc.start_session() as b:
            a.start_transaction()
            b.start_transaction()
            tdb.a.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=a)
            tdb.a.update_one({"_id": 2}, {"$inc": {"n": 1}}, session=b)
            result = {}

            def a_waits():
                try:
                    tdb.a.update_one({"_id": 2}, {"$inc": {"n": 1}}, session=a)
                    result["a"] = "ok"
                except PyMongoError as e:
                    result["a"] = e
            t = threading.Thread(target=a_waits)
            t.start()
            time.sleep(0.5)
            # b closes the cycle: b is the victim; a's wait then succeeds.
            e = _txn_error(lambda: tdb.a.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=b))
            assert e.code == 112 and e.has_error_label("TransientTransactionError")
            t.join(30)
            assert result.get("a") == "ok", result
            a.commit_transaction()
    finally:
        rc.admin.command("setParameter", 1, maxTransactionLockRequestTimeoutMillis=5)
    after = rc.admin.command("serverStatus")["silt"]["transactions"]["deadlocks"]
    assert after == before + 1
    # b (the victim) left nothing; a incremented both.
    assert {d["_id"]: d["n"] for d in tdb.a.find()} == {1: 1, 2: 1}


def test_with_transaction_retries_to_success(rs, tdb):
    tdb.a.insert_one({"_id": "counter", "n": 0})
    tdb.a.insert_many([{"_id": i, "v": 0} for i in range(4)])
    threads, per = 4, 25
    errors = []

    def worker(k):
        c = rs_client(rs)
        coll = c[tdb.name].a
        try:
            for _ in range(per):
                def body(s):
                    # A read-modify-write of the counter: without isolation some increments
                    # would be lost.
                    n = coll.find_one({"_id": "counter"}, session=s)["n"]
                    coll.update_one({"_id": "counter"}, {"$set": {"n": n + 1}}, session=s)
                    coll.update_one({"_id": k}, {"$inc": {"v": 1}}, session=s)
                with c.start_session() as s:
                    s.with_transaction(body)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            c.close()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert tdb.a.find_one({"_id": "counter"})["n"] == threads * per
    assert sum(d["v"] for d in tdb.a.find({"_id": {"$ne": "counter"}})) == threads * per


def test_an_aborted_transaction_leaves_nothing(rc, tdb):
    tdb.a.insert_many([{"_id": 1, "v": 1}, {"_id": 2, "v": 2}])
    tdb.a.create_index("u", unique=True, sparse=True)
    before = list(tdb.a.find())
    with rc.start_session() as s:
        s.start_transaction()
        tdb.a.insert_one({"_id": 3, "u": 1}, session=s)
        tdb.a.update_one({"_id": 1}, {"$set": {"v": 10}}, session=s)
        tdb.a.delete_one({"_id": 2}, session=s)
        tdb.b.insert_one({"_id": 1}, session=s)
        s.abort_transaction()
    assert list(tdb.a.find()) == before
    assert tdb.a.find_one({"u": 1}) is None and tdb.b.count_documents({}) == 0
    # An error aborts the whole transaction: a duplicate key after other writes.
    with rc.start_session() as s:
        s.start_transaction()
        tdb.a.update_one({"_id": 1}, {"$set": {"v": 20}}, session=s)
        with pytest.raises(OperationFailure) as e:
            tdb.a.insert_one({"_id": 2}, session=s)
        assert e.value.code == 11000
        e = _txn_error(s.commit_transaction)
        assert e.code == 251
    assert list(tdb.a.find()) == before
    # Commit may be retried; abort after a commit may not.
    with rc.start_session() as s:
        s.start_transaction()
        tdb.a.insert_one({"_id": 5}, session=s)
        s.commit_transaction()
        s.commit_transaction()
    assert tdb.a.find_one({"_id": 5}) == {"_id": 5}


def test_transaction_refusals(rc, tdb):
    tdb.a.insert_one({"_id": 1})
    with rc.start_session() as s:
        s.start_transaction()
        e = _txn_error(lambda: tdb.command("count", "a", session=s))
        assert e.code == 263
    with rc.start_session() as s:
        s.start_transaction()
        e = _txn_error(lambda: tdb.command("listCollections", session=s))
        assert e.code == 263


def test_transaction_lifetime_limit(rc, tdb):
    tdb.a.insert_one({"_id": 1})
    rc.admin.command("setParameter", 1, transactionLifetimeLimitSeconds=1)
    try:
        with rc.start_session() as s:
            s.start_transaction()
            tdb.a.insert_one({"_id": 2}, session=s)
            time.sleep(3)
            e = _txn_error(lambda: tdb.a.insert_one({"_id": 3}, session=s))
            assert e.code == 251 and e.has_error_label("TransientTransactionError")
            assert "transactionLifetimeLimitSeconds" in str(e)
    finally:
        rc.admin.command("setParameter", 1, transactionLifetimeLimitSeconds=60)
    assert [d["_id"] for d in tdb.a.find()] == [1]


# --- retryable writes -------------------------------------------------------------------

def test_retried_write_is_applied_once(rs, tdb):
    tdb.a.insert_one({"_id": 1, "n": 0})
    sid = lsid()
    cmd = {"update": "a", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}],
           "lsid": sid, "txnNumber": Int64(1), "$db": tdb.name}
    r1 = raw_command(rs.port, cmd)
    r2 = raw_command(rs.port, cmd)
    assert r1["ok"] == 1 and r1["n"] == 1 and r1["nModified"] == 1
    assert r2["n"] == 1 and r2["nModified"] == 1
    assert tdb.a.find_one({"_id": 1})["n"] == 1
    ins = {"insert": "a", "documents": [{"_id": 2}, {"_id": 3}], "lsid": sid,
           "txnNumber": Int64(2), "$db": tdb.name}
    assert raw_command(rs.port, ins)["n"] == 2
    assert raw_command(rs.port, ins)["n"] == 2
    assert tdb.a.count_documents({}) == 3
    # An older number is refused.
    old = raw_command(rs.port, dict(cmd, txnNumber=Int64(0)))
    assert old["ok"] == 0 and old["code"] == 225
    # The driver's own retryable writes go through the same path.
    tdb.a.insert_one({"_id": 4})
    tdb.a.find_one_and_update({"_id": 4}, {"$set": {"x": 1}})
    assert tdb.a.find_one({"_id": 4}) == {"_id": 4, "x": 1}


def test_retried_write_is_applied_once_across_kill9():
    s = Siltd(extra=["--replSet", "rs0"]).start()
    try:
        sid = lsid()
        cmd = {"update": "a", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}, "upsert": True}],
               "lsid": sid, "txnNumber": Int64(7), "writeConcern": {"w": "majority"}, "$db": "r"}
        r1 = raw_command(s.port, cmd)
        assert r1["ok"] == 1 and r1["n"] == 1
        s.kill9()
        s.start()
        r2 = raw_command(s.port, cmd)
        assert r2["ok"] == 1 and r2["n"] == 1 and r2["upserted"] == r1["upserted"]
        c = rs_client(s)
        assert c.r.a.find_one({"_id": 1})["n"] == 1
        c.close()
    finally:
        s.cleanup()


# --- snapshot reads -----------------------------------------------------------------------

def test_snapshot_session_reads_one_cluster_time(rc, tdb):
    tdb.a.insert_many([{"_id": i} for i in range(5)])
    with rc.start_session(snapshot=True) as s:
        first = list(tdb.a.find({}, session=s))
        tdb.a.insert_one({"_id": 100})
        tdb.a.delete_one({"_id": 0})
        # Later reads of the session send atClusterTime and see the same data.
        assert list(tdb.a.find({}, session=s)) == first
        assert sorted(tdb.a.distinct("_id", session=s)) == list(range(5))
    # A cluster time siltd did not hand out to a snapshot read is not available.
    with pytest.raises(OperationFailure) as e:
        tdb.command("find", "a", readConcern={"level": "snapshot",
                                              "atClusterTime": bson.Timestamp(1, 1)})
    assert e.value.code == 239


# --- crash --------------------------------------------------------------------------------

def test_kill9_in_the_middle_of_concurrent_transactions():
    """Four clients move money between ten accounts in transactions, each also recording the
    transfer; siltd is killed mid-stream. After restart: every acknowledged transfer is there,
    nothing else is, and each balance is exactly what the recorded transfers make it."""
    s = Siltd(extra=["--replSet", "rs0"]).start()
    try:
        c = rs_client(s)
        c.bank.acct.insert_many([{"_id": i, "bal": 1000} for i in range(10)])
        acked, stop = [], threading.Event()
        lock = threading.Lock()

        def worker(k):
            cl = rs_client(s, retryWrites=False, serverSelectionTimeoutMS=1000)
            rnd = random.Random(k)
            accts, logs = cl.bank.acct, cl.bank.log
            try:
                while not stop.is_set():
                    a, b = rnd.sample(range(10), 2)
                    amt = rnd.randint(1, 50)
                    tid = f"{k}-{uuid.uuid4().hex}"
                    with cl.start_session() as ss:
                        ss.start_transaction(write_concern=WriteConcern("majority"))
                        try:
                            accts.update_one({"_id": a}, {"$inc": {"bal": -amt}}, session=ss)
                            accts.update_one({"_id": b}, {"$inc": {"bal": amt}}, session=ss)
                            logs.insert_one({"_id": tid, "from": a, "to": b, "amt": amt}, session=ss)
                        except OperationFailure as e:
                            # A conflict: the transaction is aborted; the next one goes on.
                            assert e.has_error_label("TransientTransactionError"), e
                            continue
                        ss.commit_transaction()
                    with lock:
                        acked.append(tid)
            except PyMongoError:
                pass  # the server was killed
            finally:
                cl.close()
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        deadline = time.time() + 30
        while len(acked) < 200 and time.time() < deadline:
            time.sleep(0.05)
        s.kill9()
        stop.set()
        for t in ts:
            t.join(60)
        c.close()
        n_acked = len(acked)
        assert n_acked > 0
        s.start()
        c = rs_client(s)
        log = {d["_id"]: d for d in c.bank.log.find()}
        missing = [t for t in acked if t not in log]
        assert not missing, f"{len(missing)} acknowledged transfers lost"
        want = {i: 1000 for i in range(10)}
        for d in log.values():
            want[d["from"]] -= d["amt"]
            want[d["to"]] += d["amt"]
        got = {d["_id"]: d["bal"] for d in c.bank.acct.find()}
        assert got == want
        assert sum(got.values()) == 10_000
        c.close()
    finally:
        s.cleanup()


# --- no coarse locks ----------------------------------------------------------------------

def test_implicit_collection_creation_under_load(rs, tdb):
    """Eight clients insert into the same new collection at once: all succeed, one creates it."""
    n, per = 8, 50
    barrier = threading.Barrier(n)
    errors = []

    def worker(k):
        c = rs_client(rs)
        try:
            barrier.wait()
            for i in range(per):
                c[tdb.name].fresh.insert_one({"_id": k * 1000 + i})
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            c.close()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert tdb.list_collection_names() == ["fresh"]
    assert tdb.fresh.count_documents({}) == n * per


def test_after_cluster_time_past_the_current_one_is_refused(rs, tdb):
    r = raw_command(rs.port, {"insert": "c", "documents": [{"_id": 1}], "$db": tdb.name})
    now = r["operationTime"]
    ok = raw_command(rs.port, {"find": "c", "readConcern": {"afterClusterTime": now}, "$db": tdb.name})
    assert ok["ok"] == 1 and ok["cursor"]["firstBatch"] == [{"_id": 1}]
    future = bson.Timestamp(now.time + 3600, 1)
    bad = raw_command(rs.port, {"find": "c", "readConcern": {"afterClusterTime": future}, "$db": tdb.name})
    assert bad["ok"] == 0 and bad["code"] == 72


def test_fast_and_normal_updates_agree_inside_transactions(rc, tdb):
    """The same transactions, one collection with fast updates and one without: the same
    documents, inside the transaction (its own writes) and after commits and aborts."""
    rnd = random.Random(11)
    for name in ("fast", "normal"):
        tdb[name].insert_many([{"_id": i, "n": 0, "tags": []} for i in range(20)])
    ops = [
        {"$inc": {"n": 1}}, {"$set": {"s": "x"}}, {"$push": {"tags": "t"}},
        {"$inc": {"n": -2, "m": 3}}, {"$unset": {"s": ""}}, {"$max": {"n": 5}},
    ]
    fast_taken = 0
    for round_ in range(12):
        plan = [(rnd.randrange(25), rnd.choice(ops)) for _ in range(6)]
        commit = round_ % 3 != 2
        seen = {}
        for name, fast in (("fast", True), ("normal", False)):
            with rc.start_session() as s:
                s.start_transaction()
                for _id, u in plan:
                    r = tdb.command("update", name, updates=[{"q": {"_id": _id}, "u": u, "upsert": _id >= 20}],
                                    fastUpdate=fast, session=s)
                    fast_taken += "fastUpdates" in r
                seen[name] = list(tdb[name].find({}, session=s).sort("_id", 1))
                if commit:
                    s.commit_transaction()
                else:
                    s.abort_transaction()
        assert seen["fast"] == seen["normal"], round_
        assert list(tdb.fast.find().sort("_id", 1)) == list(tdb.normal.find().sort("_id", 1)), round_
    assert fast_taken > 0, "no statement took the fast path"


def test_retried_fast_update_through_an_index_is_applied_once(rs, tdb):
    tdb.a.create_index("k")
    tdb.a.insert_many([{"_id": i, "k": i % 3, "c": 0} for i in range(9)])
    cmd = {"update": "a", "updates": [{"q": {"k": 1}, "u": {"$inc": {"c": 1}}, "multi": True}],
           "fastUpdate": True, "lsid": lsid(), "txnNumber": Int64(1), "$db": tdb.name}
    r1 = raw_command(rs.port, cmd)
    r2 = raw_command(rs.port, cmd)
    assert r1["ok"] == 1 and "fastUpdates" in r1 and r1["n"] == 3
    assert r2 == {**r2, "n": 3}
    assert sorted(d["c"] for d in tdb.a.find({"k": 1})) == [1, 1, 1]
    assert tdb.a.count_documents({"c": {"$ne": 0}}) == 3


def test_collections_created_in_a_transaction_are_isolated(rc):
    """MongoDB 4.4+: a transaction may create collections (by inserting, or with create and
    createIndexes); nobody else sees them until it commits, and they are gone if it aborts."""
    db = rc.txn_create
    db.drop_collection("seen")
    with rc.start_session() as s:
        s.start_transaction()
        db.implicit.insert_one({"_id": 1}, session=s)
        db.create_collection("explicit", session=s)
        db.explicit.create_index("a", session=s)
        db.indexed.create_index("b", session=s)
        assert not {"implicit", "explicit", "indexed"} & set(db.list_collection_names())
        assert db.implicit.find_one({"_id": 1}) is None
        s.commit_transaction()
    assert {"implicit", "explicit", "indexed"} <= set(db.list_collection_names())
    assert "a_1" in db.explicit.index_information()
    assert db.implicit.find_one({"_id": 1}) == {"_id": 1}
    # Aborted: the collection goes away.
    with rc.start_session() as s:
        s.start_transaction()
        db.gone.insert_one({"_id": 1}, session=s)
        s.abort_transaction()
    assert "gone" not in db.list_collection_names()
    deadline = time.time() + 10
    while time.time() < deadline and "txn_create.gone" in [
            c["name"] for c in rc.admin.command("listDatabases")["databases"]]:
        time.sleep(0.2)
    # Indexes on a collection that existed before the transaction are refused (263).
    db.seen.insert_one({"_id": 1})
    with rc.start_session() as s:
        s.start_transaction()
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            db.seen.create_index("x", session=s)
        assert e.value.code == 263
        s.abort_transaction()
