"""Replicated writes on a three-member set (issue 36): every kind of write reaches every
member, the members end with equal data (`dbHash`) and equal oplogs, write concern `w: N`
waits for N members, and a `kill -9` of the primary under a load of retryable `w: majority`
writes loses no acknowledged write and applies none twice. Faults are real signals on real
processes."""
import os
import shutil
import threading
import time

import pymongo
import pytest
from pymongo.write_concern import WriteConcern

from conftest import Siltd


def wait_for(pred, secs, what):
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            v = pred()
        except pymongo.errors.PyMongoError:
            v = None
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"{what} within {secs} s")


def direct(m, **kw):
    return m.client(directConnection=True, serverSelectionTimeoutMS=2000, **kw)


def is_primary(m):
    try:
        with direct(m) as c:
            return c.admin.command("hello")["isWritablePrimary"]
    except pymongo.errors.PyMongoError:
        return False


def one_primary(members):
    roles = []
    for m in members:
        with direct(m) as c:
            h = c.admin.command("hello")
        roles.append("P" if h["isWritablePrimary"] else "S" if h.get("secondary") else "?")
    return roles.count("P") == 1 and roles.count("S") == len(members) - 1


def code_of(e):
    return getattr(e, "code", None) or (getattr(e, "details", None) or {}).get("code")


def uri_of(members):
    return "mongodb://" + ",".join(f"127.0.0.1:{m.port}" for m in members) + "/?replicaSet=rs0"


def initiate(ms):
    """Make `ms` one set (`replSetInitiate` on the first) and wait for one primary and the
    others secondaries."""
    config = {"_id": "rs0", "members": [
        {"_id": i, "host": f"127.0.0.1:{m.port}"} for i, m in enumerate(ms)]}
    with direct(ms[0]) as c:
        c.admin.command("replSetInitiate", config)
    wait_for(lambda: one_primary(ms), 20, "one primary and the others secondaries")


def add_member(ms, new):
    """Add `new` to the set of `ms` as member 3 (as mongosh's rs.add() does), then write."""
    with pymongo.MongoClient(uri_of(ms), serverSelectionTimeoutMS=10000) as c:
        conf = c.admin.command("replSetGetConfig")["config"]
        conf["version"] += 1
        conf["members"].append({"_id": 3, "host": f"127.0.0.1:{new.port}"})
        c.admin.command("replSetReconfig", conf)
        c.app.c.insert_one({"_id": "after-add"})


@pytest.fixture
def rs():
    """A set of three members (`SILT_RS_MEMBERS` sets another count)."""
    count = int(os.environ.get("SILT_RS_MEMBERS", "3"))
    ms = [Siltd(extra=["--replSet", "rs0", "--bind", "127.0.0.1"]) for _ in range(count)]
    for m in ms:
        m.start()
    initiate(ms)
    yield ms
    for m in ms:
        m.cleanup()


def state_of(m):
    """A member's data and oplog: `dbHash` of every database, and every oplog entry."""
    with direct(m) as c:
        dbs = sorted(d for d in c.list_database_names() if d not in ("local", "config", "admin"))
        hashes = {d: c[d].command("dbHash")["collections"] for d in dbs}
        oplog = list(c.local.oplog.rs.find({}, sort=[("$natural", 1)]))
        return hashes, oplog


def converged(members):
    """The members' states once they are all equal (None until then)."""
    states = [state_of(m) for m in members]
    if all(s == states[0] for s in states[1:]) and states[0][1]:
        return states[0]
    return None


def test_every_kind_of_write_reaches_every_member(rs):
    with pymongo.MongoClient(uri_of(rs), serverSelectionTimeoutMS=10000) as c:
        db = c.app
        db.c.insert_one({"_id": 1, "a": 1, "tags": ["x"]})
        db.c.insert_many([{"_id": i, "a": i % 7, "pad": "p" * (i % 50)} for i in range(2, 300)])
        db.c.update_one({"_id": 1}, {"$set": {"b": {"c": 1}}, "$push": {"tags": "y"}})
        db.c.update_many({"a": 3}, {"$inc": {"n": 2}})
        db.c.update_one({"_id": 5}, {"$inc": {"a": 1}})
        db.c.replace_one({"_id": 6}, {"whole": True})
        db.c.delete_one({"_id": 7})
        db.c.delete_many({"a": 4})
        db.c.find_one_and_update({"_id": 8}, {"$set": {"fam": 1}}, upsert=True)
        db.c.update_one({"_id": "up"}, {"$set": {"v": 1}}, upsert=True)
        db.c.create_index([("a", 1), ("n", -1)], name="a_n")
        db.c.create_index("pad", unique=False)
        db.c.drop_index("pad_1")
        with c.start_session() as s:
            with s.start_transaction():
                db.c.insert_one({"_id": "tx"}, session=s)
                db.other.insert_one({"_id": "tx-other"}, session=s)
                db.c.update_one({"_id": 9}, {"$set": {"in_tx": True}}, session=s)
        db.create_collection("capped", capped=True, size=4096, max=5)
        for i in range(12):
            db.capped.insert_one({"i": i})
        db.create_collection("valid", validator={"x": {"$type": "int"}})
        db.valid.insert_one({"x": 1})
        db.tmp.insert_one({"_id": 1})
        db.tmp.rename("renamed")
        db.gone.insert_one({"_id": 1})
        db.gone.drop()
        # w: 3 waits for every member; w: 4 cannot be met by three.
        db.get_collection("c", write_concern=WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": "w3"})
        with pytest.raises(pymongo.errors.WriteConcernError) as e:
            db.get_collection("c", write_concern=WriteConcern(w=4)).insert_one({"_id": "w4"})
        assert e.value.code == 100
        expected = db.c.count_documents({})
        assert db.capped.count_documents({}) == 5

    hashes, oplog = wait_for(lambda: converged(rs), 15, "equal data and oplogs on every member")
    assert set(hashes) == {"app"} and {"c", "other", "capped", "valid", "renamed"} <= set(hashes["app"])
    assert "gone" not in hashes["app"] and "tmp" not in hashes["app"]
    ops = {(e["op"], e.get("ns")) for e in oplog}
    assert ("i", "app.c") in ops and ("u", "app.c") in ops and ("d", "app.c") in ops
    assert ("c", "admin.$cmd") in ops  # the transaction's applyOps
    # As on mongod, the set's log starts with the initiate (at a real time: no entry of the
    # first election before it, which would have no time to take).
    assert oplog[0]["o"] == {"msg": "initiating set"} and oplog[0]["ts"].time > 0
    for m in rs:
        with direct(m) as c:
            assert c.app.c.count_documents({}) == expected
            assert {ix["name"] for ix in c.app.c.list_indexes()} == {"_id_", "a_n"}
            assert c.app.c.find_one({"_id": 1})["tags"] == ["x", "y"]
            assert c.app.c.find_one({"_id": 9})["in_tx"] is True
            assert c.app.capped.count_documents({}) == 5

    # A fourth member added now catches up from the log and ends equal.
    fourth = Siltd(extra=["--replSet", "rs0", "--bind", "127.0.0.1"]).start()
    try:
        add_member(rs, fourth)
        wait_for(lambda: converged(rs + [fourth]), 20, "the fourth member equal to the others")
    finally:
        fourth.cleanup()


def test_kill_primary_under_retryable_majority_writes(rs):
    uri = uri_of(rs) + "&w=majority&retryWrites=true"
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=20000)
    coll = client.load.c
    threads_n = 4
    for t in range(threads_n):
        coll.insert_one({"_id": f"counter-{t}", "n": 0})
    acked = [0] * threads_n
    failed = [0] * threads_n
    inserted = [[] for _ in range(threads_n)]
    last_ack = [0.0]
    stop = threading.Event()

    def writer(t):
        i = 0
        while not stop.is_set():
            try:
                coll.update_one({"_id": f"counter-{t}"}, {"$inc": {"n": 1}})
                acked[t] += 1
                coll.insert_one({"_id": f"{t}-{i}"})
                inserted[t].append(f"{t}-{i}")
                last_ack[0] = time.time()
            except pymongo.errors.PyMongoError:
                failed[t] += 1
                time.sleep(0.05)
            i += 1

    ts = [threading.Thread(target=writer, args=(t,)) for t in range(threads_n)]
    for th in ts:
        th.start()
    try:
        time.sleep(1.5)
        old = next(m for m in rs if is_primary(m))
        old.kill9()
        killed = time.time()
        wait_for(lambda: last_ack[0] > killed, 15, "an acknowledged write on a new primary")
        print(f"first acknowledged write {last_ack[0] - killed:.1f} s after kill -9")
        assert last_ack[0] - killed < 10
        time.sleep(1.0)
    finally:
        stop.set()
        for th in ts:
            th.join()
    assert sum(acked) > 0
    old.start(port=old.port)
    _, oplog = wait_for(lambda: converged(rs), 30, "equal data and oplogs after the restart")
    # The new primary's term begins with mongod's "new primary" no-op.
    assert any(e["op"] == "n" and e["o"].get("msg") == "new primary" for e in oplog)
    for m in rs:
        with direct(m) as c:
            for t in range(threads_n):
                n = c.load.c.find_one({"_id": f"counter-{t}"})["n"]
                # Every acknowledged increment once; one that failed at most once.
                assert acked[t] <= n <= acked[t] + failed[t], (t, n, acked[t], failed[t])
                ids = inserted[t]
                if ids:
                    assert c.load.c.count_documents({"_id": {"$in": ids}}) == len(ids)
    client.close()


def test_read_concerns_and_a_paused_primary(rs):
    with pymongo.MongoClient(uri_of(rs), serverSelectionTimeoutMS=10000) as c:
        # Causal consistency: a secondary read after a primary write sees it.
        with c.start_session(causal_consistency=True) as s:
            c.app.get_collection("c", write_concern=WriteConcern(w=1)).insert_one({"_id": "causal"}, session=s)
            sec = c.app.get_collection("c", read_preference=pymongo.ReadPreference.SECONDARY)
            assert sec.find_one({"_id": "causal"}, session=s) is not None
        lin = c.app.get_collection("c", read_concern=pymongo.read_concern.ReadConcern("linearizable"))
        assert lin.find_one({"_id": "causal"}) is not None

    primary = next(m for m in rs if is_primary(m))
    secondary = next(m for m in rs if m is not primary)
    with direct(secondary) as c:
        with pytest.raises(pymongo.errors.PyMongoError) as e:
            c.app.command("find", "c", readConcern={"level": "linearizable"})
        assert code_of(e.value) == 10107

    # Pause the primary: the others elect a new one and take a write; once resumed, the old
    # primary acknowledges nothing and reads nothing stale as a linearizable read.
    old = direct(primary, socketTimeoutMS=20000)
    old.app.c.find_one({})
    primary.proc.send_signal(19)  # SIGSTOP
    try:
        rest = [m for m in rs if m is not primary]
        wait_for(lambda: any(is_primary(m) for m in rest), 15, "a new primary while the old is paused")
        with pymongo.MongoClient(uri_of(rest), serverSelectionTimeoutMS=10000) as c:
            c.app.c.insert_one({"_id": "while-paused"})
    finally:
        primary.proc.send_signal(18)  # SIGCONT
    try:
        old.app.get_collection("c", write_concern=WriteConcern(w="majority", wtimeout=5000)).insert_one({"_id": "deposed"})
        acknowledged = True
    except pymongo.errors.PyMongoError:
        acknowledged = False
    assert not acknowledged, "a deposed primary acknowledged a majority write"
    try:
        got = old.app.command("find", "c", filter={"_id": "while-paused"},
                              readConcern={"level": "linearizable"})["cursor"]["firstBatch"]
        assert got, "a deposed primary answered a linearizable read with stale data"
    except pymongo.errors.ServerSelectionTimeoutError as e:
        # The driver saw "not primary" and found no primary behind a direct connection.
        assert "not primary" in str(e) or "NotWritablePrimary" in str(e), e
    except pymongo.errors.PyMongoError as e:
        assert code_of(e) in (10107, 11602, 189, 91), e
    old.close()
    wait_for(lambda: converged(rs), 20, "equal data and oplogs after the pause")
    for m in rs:
        with direct(m) as c:
            assert c.app.c.count_documents({"_id": "deposed"}) == 0


def test_a_change_stream_resumes_across_a_failover(rs):
    """Every acknowledged insert reaches the stream once, in order, across a kill -9 of the
    primary (the driver resumes on the new primary from its resume token: the members'
    oplogs are equal, so the token names the same place on every member)."""
    client = pymongo.MongoClient(uri_of(rs) + "&w=majority", serverSelectionTimeoutMS=20000)
    coll = client.app.stream
    acked = []
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            try:
                coll.insert_one({"_id": i})
                acked.append(i)
                i += 1
            except pymongo.errors.PyMongoError:
                time.sleep(0.05)
                # The same _id again: a retried insert that did apply is a duplicate key.
                try:
                    if coll.find_one({"_id": i}) is not None:
                        acked.append(i)
                        i += 1
                except pymongo.errors.PyMongoError:
                    pass

    seen = []
    with coll.watch(max_await_time_ms=200) as stream:
        th = threading.Thread(target=writer)
        th.start()
        try:
            deadline = time.time() + 1.5
            while time.time() < deadline:
                ev = stream.try_next()
                if ev is not None:
                    seen.append(ev["documentKey"]["_id"])
            old = next(m for m in rs if is_primary(m))
            old.kill9()
            killed = time.time()
            wait_for(lambda: acked and time.time() - killed > 1 and len(acked) > len(seen) + 5
                     or time.time() - killed > 8, 30, "writes on the new primary")
            time.sleep(1.0)
        finally:
            stop.set()
            th.join()
        deadline = time.time() + 20
        while len(seen) < len(acked) and time.time() < deadline:
            ev = stream.try_next()
            if ev is not None:
                seen.append(ev["documentKey"]["_id"])
    client.close()
    assert len(acked) > 0
    # In order, each once, and every acknowledged insert there.
    assert seen == sorted(set(seen)), "events out of order or repeated"
    assert set(acked) <= set(seen), sorted(set(acked) - set(seen))[:10]


def test_members_with_a_key_file_under_auth(tmp_path):
    key = tmp_path / "key"
    key.write_text("c2lsdGRiIHRlc3Qga2V5IGZpbGUgZm9yIG1lbWJlcnM=\n")
    key.chmod(0o600)
    ms = [Siltd(extra=["--replSet", "rs0", "--bind", "127.0.0.1", "--keyFile", str(key)]) for _ in range(3)]
    for m in ms:
        m.start()
    try:
        # The localhost exception: initiate, then the first user on the primary.
        initiate(ms)
        primary = next(m for m in ms if is_primary(m))
        with direct(primary) as c:
            c.admin.command("createUser", "root", pwd="pw", roles=["root"])
        with pymongo.MongoClient(uri_of(ms), username="root", password="pw",
                                 serverSelectionTimeoutMS=10000) as c:
            c.app.c.insert_one({"_id": 1})
            c.app.get_collection("c", write_concern=WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": 2})
        for m in ms:
            with direct(m, username="root", password="pw") as c:
                assert c.app.c.count_documents({}) == 2
            with direct(m) as c:
                with pytest.raises(pymongo.errors.OperationFailure):
                    c.app.c.count_documents({})
    finally:
        for m in ms:
            m.cleanup()

    # A key file others can read is refused at start, as mongod refuses it.
    key.chmod(0o644)
    bad = Siltd(extra=["--replSet", "rs0", "--keyFile", str(key)])
    with pytest.raises(RuntimeError) as e:
        bad.start()
    assert "too open" in str(e.value)
    bad.cleanup()


def test_an_isolated_primary_times_out_majority_writes_and_steps_down(rs):
    primary = next(m for m in rs if is_primary(m))
    others = [m for m in rs if m is not primary]
    with direct(primary) as c:
        c.app.c.insert_one({"_id": "before"})
        for m in others:
            m.proc.send_signal(19)  # SIGSTOP: the primary hears from no one
        try:
            coll = c.app.get_collection("c", write_concern=WriteConcern(w="majority", wtimeout=1000))
            with pytest.raises(pymongo.errors.PyMongoError) as e:
                coll.insert_one({"_id": "isolated"})
            assert code_of(e.value) == 64 or "64" in str(e.value), e.value
            stepped = time.time()
            wait_for(lambda: not c.admin.command("hello")["isWritablePrimary"], 10,
                     "the isolated primary stepping down")
            print(f"stepped down {time.time() - stepped:.1f} s after the timed-out write")
        finally:
            for m in others:
                m.proc.send_signal(18)  # SIGCONT
    wait_for(lambda: one_primary(rs), 20, "one primary again")
    wait_for(lambda: converged(rs), 20, "equal data and oplogs after the isolation")


def test_random_kills_and_pauses_under_a_mixed_load(rs):
    """Members killed with SIGKILL or paused with SIGSTOP at random (seeded) under a load of
    increments, inserts, deletes and transactions: every acknowledged increment is applied
    once, and the members end equal. `SILT_FAULT_SECONDS` sets the length (20 s here)."""
    import os
    import random
    seconds = float(os.environ.get("SILT_FAULT_SECONDS", "20"))
    seed = int(os.environ.get("SILT_FAULT_SEED", "7"))
    client = pymongo.MongoClient(uri_of(rs) + "&w=majority", serverSelectionTimeoutMS=30000)
    db = client.faults
    n = 4
    for t in range(n):
        db.c.insert_one({"_id": f"k{t}", "n": 0})
    db.d.create_index("v")
    acked, failed = [0] * n, [0] * n
    stop = threading.Event()

    def writer(t):
        rng = random.Random(seed * 100 + t)
        while not stop.is_set():
            op = rng.random()
            try:
                if op < 0.5:
                    db.c.update_one({"_id": f"k{t}"}, {"$inc": {"n": 1}})
                    acked[t] += 1
                elif op < 0.8:
                    db.d.insert_one({"t": t, "v": rng.randint(0, 1000)})
                elif op < 0.9:
                    db.d.delete_one({"t": t})
                else:
                    with client.start_session() as s:
                        with s.start_transaction():
                            db.e.insert_one({"t": t}, session=s)
                            db.e.update_many({"t": t}, {"$inc": {"x": 1}}, session=s)
            except pymongo.errors.PyMongoError:
                if op < 0.5:
                    failed[t] += 1
                time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    rng = random.Random(seed)
    faults = []
    try:
        end = time.time() + seconds
        while time.time() < end:
            time.sleep(rng.uniform(1.5, 4))
            m = rng.choice(rs)
            if rng.random() < 0.6:
                m.kill9()
                time.sleep(rng.uniform(0.5, 2))
                m.start(port=m.port)
                faults.append("kill")
            else:
                m.proc.send_signal(19)
                time.sleep(rng.uniform(1, 5))
                m.proc.send_signal(18)
                faults.append("stop")
    finally:
        stop.set()
        for th in threads:
            th.join()
    print(f"faults {faults}, acknowledged increments {sum(acked)}, failed {sum(failed)}")
    assert sum(acked) > 0

    def settled():
        newest = []
        for m in rs:
            with direct(m) as c:
                newest.append(c.local.oplog.rs.find_one(sort=[("$natural", -1)])["ts"])
        upto = min(newest)
        states = []
        for m in rs:
            with direct(m) as c:
                states.append((c.faults.command("dbHash")["collections"],
                               list(c.local.oplog.rs.find({"ts": {"$lte": upto}}, sort=[("$natural", 1)]))))
        return all(s == states[0] for s in states[1:])

    wait_for(settled, 60, "equal data and oplogs after the faults")
    for m in rs:
        with direct(m) as c:
            for t in range(n):
                got = c.faults.c.find_one({"_id": f"k{t}"})["n"]
                assert acked[t] <= got <= acked[t] + failed[t], (m.port, t, got, acked[t], failed[t])
    client.close()


def retrying(write, secs=30):
    """Run `write` until it succeeds (a loaded machine may see an election meanwhile)."""
    deadline = time.time() + secs
    while True:
        try:
            return write()
        except (pymongo.errors.NotPrimaryError, pymongo.errors.ServerSelectionTimeoutError,
                pymongo.errors.AutoReconnect):
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def raft_of(m):
    with direct(m) as c:
        return c.admin.command("replSetGetStatus")["raft"]


def test_members_behind_the_purged_log_catch_up_by_snapshot():
    """With a snapshot every 40 entries the log is purged: a member added later, and a member
    whose data directory was wiped, catch up by another member's snapshot (an image of its
    store, oplog and indexes included), then follow the log; all end equal."""
    extra = ["--replSet", "rs0", "--bind", "127.0.0.1", "--raftSnapshotEntries", "40"]
    ms = [Siltd(extra=extra) for _ in range(3)]
    fourth = Siltd(extra=extra)
    for m in ms:
        m.start()
    try:
        initiate(ms)
        with pymongo.MongoClient(uri_of(ms), serverSelectionTimeoutMS=10000) as c:
            db = c.app
            db.c.create_index("a")
            for i in range(300):
                db.c.insert_one({"_id": i, "a": i % 11, "pad": "p" * 200})
            db.c.update_many({"a": 3}, {"$inc": {"n": 1}})
            with c.start_session() as s:
                with s.start_transaction():
                    db.c.insert_one({"_id": "tx"}, session=s)
                    db.other.insert_one({"_id": "tx-other"}, session=s)
            db.create_collection("capped", capped=True, size=4096, max=5)
            for i in range(12):
                db.capped.insert_one({"i": i})
            db.gone.insert_one({"_id": 1})
            db.gone.drop()
        # Every member wrote a snapshot and purged the log before it.
        wait_for(lambda: all((raft_of(m).get("purgedIndex") or 0) > 40 for m in ms), 20,
                 "a purged log on every member")

        fourth.start()
        add_member(ms, fourth)
        wait_for(lambda: converged(ms + [fourth]), 30, "the fourth member equal to the others")
        assert raft_of(fourth)["snapshotIndex"] is not None, "the fourth member replayed the log"
        assert "installed a snapshot" in fourth.read_log()
        with direct(fourth) as c:
            assert {ix["name"] for ix in c.app.c.list_indexes()} == {"_id_", "a_1"}
            assert c.app.c.find_one({"a": 3, "_id": 3})["n"] == 1
            assert c.app.capped.count_documents({}) == 5

        # A secondary loses its data directory; restarted empty, it catches up the same way.
        with pymongo.MongoClient(uri_of(ms), serverSelectionTimeoutMS=10000) as c:
            primary = c.primary
        wiped = next(m for m in ms if ("127.0.0.1", m.port) != primary)
        wiped.kill9()
        for name in os.listdir(wiped.dbpath):
            if name != "siltd.log":
                p = os.path.join(wiped.dbpath, name)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        with pymongo.MongoClient(uri_of(ms), serverSelectionTimeoutMS=10000,
                                 w="majority") as c:
            for i in range(60):
                retrying(lambda: c.app.c.update_one(
                    {"_id": f"while-wiped-{i}"}, {"$set": {"i": i}}, upsert=True))
        wiped.start(port=wiped.port)
        with pymongo.MongoClient(uri_of(ms), serverSelectionTimeoutMS=10000) as c:
            retrying(lambda: c.app.c.update_one({"_id": "after-wipe"}, {"$set": {"x": 1}}, upsert=True))
        wait_for(lambda: converged(ms + [fourth]), 30, "the wiped member equal to the others")
        with direct(wiped) as c:
            assert c.app.c.count_documents({"_id": {"$regex": "^while-wiped"}}) == 60
    finally:
        for m in ms + [fourth]:
            m.cleanup()


def test_initiate_brings_the_initiators_data_to_every_member():
    """A server with data becomes a replica set (`rs.initiate()` on it, with two new members):
    its data reaches the others by the set's first snapshot, and what another member held
    before it joined is replaced, as mongod's initial sync does."""
    ms = [Siltd(extra=["--replSet", "rs0", "--bind", "127.0.0.1"]) for _ in range(3)]
    for m in ms:
        m.start()
    try:
        with direct(ms[0]) as c:
            c.app.old.insert_many([{"_id": i, "a": i % 9} for i in range(500)])
            c.app.old.create_index("a")
        with direct(ms[1]) as c:
            c.junk.j.insert_one({"_id": "mine"})
        initiate(ms)
        with pymongo.MongoClient(uri_of(ms), serverSelectionTimeoutMS=10000) as c:
            c.app.new.insert_one({"_id": 1})
            conf = c.admin.command("replSetGetConfig")["config"]
            assert [m["votes"] for m in conf["members"]] == [1, 1, 1]
        hashes, _ = wait_for(lambda: converged(ms), 20, "equal data and oplogs")
        assert set(hashes) == {"app"} and set(hashes["app"]) == {"old", "new"}
        for m in ms:
            with direct(m) as c:
                assert c.app.old.count_documents({}) == 500
                assert c.app.old.count_documents({"a": 4}) == 56
                assert {ix["name"] for ix in c.app.old.list_indexes()} == {"_id_", "a_1"}
    finally:
        for m in ms:
            m.cleanup()
