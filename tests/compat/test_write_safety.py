"""One filter evaluator, panic safety and the poisoned environment, seen through pymongo."""
import random
import re
import threading
import time

import pytest
from bson import Regex
from pymongo.errors import OperationFailure, PyMongoError

from conftest import Siltd


def upd(db, coll, q, u, **kw):
    return db.command("update", coll, updates=[dict({"q": q, "u": u}, **kw)])


def random_pull(rng):
    """Every filtering form a $pull condition can take."""
    forms = [
        lambda: rng.randrange(6),
        lambda: rng.choice("abcde"),
        lambda: Regex("^" + rng.choice("abc")),
        lambda: {"$in": [Regex("^" + rng.choice("ab")), rng.randrange(6)]},
        lambda: {"$nin": [rng.randrange(6), "a1"]},
        lambda: {"$gte": rng.randrange(6)},
        lambda: {"$lt": rng.randrange(6)},
        lambda: {"$ne": rng.randrange(6)},
        lambda: {"$type": rng.choice(["string", "int", "object", "array"])},
        lambda: {"$not": {"$regex": "^" + rng.choice("abc")}},
        lambda: {"$regex": rng.choice("abc"), "$options": "i"},
        lambda: {"$exists": True},
        lambda: {"$mod": [rng.randrange(2, 4), 0]},
        lambda: {"$size": rng.randrange(3)},
        lambda: {"$all": [rng.randrange(3)]},
        lambda: {"$elemMatch": {"$gt": rng.randrange(4)}},
        lambda: {"k": rng.choice("abc")},
        lambda: {"k": Regex("^" + rng.choice("ab"))},
        lambda: {"n": {"$gt": rng.randrange(4)}, "k": {"$in": ["a", "b"]}},
        lambda: {"$or": [{"k": "a"}, {"n": {"$lt": 1}}]},
        lambda: {"n": {"$exists": False}},
    ]
    field = rng.choice(["arr", "objs", "nested"])
    return {"$pull": {field: rng.choice(forms)()}}


def random_array_filter(rng):
    """Updates through $[identifier] with each kind of array filter."""
    forms = [
        ({"$set": {"arr.$[e]": "hit"}}, [{"e": {"$gt": rng.randrange(5)}}]),
        ({"$set": {"arr.$[e]": "re"}}, [{"e": Regex("^" + rng.choice("abc"))}]),
        ({"$set": {"arr.$[e]": 0}}, [{"e": {"$in": [Regex("^a"), 3]}}]),
        ({"$inc": {"objs.$[o].n": 1}}, [{"o.k": {"$regex": "^" + rng.choice("ab")}}]),
        ({"$inc": {"objs.$[o].n": 2}}, [{"o.n": {"$gte": rng.randrange(4)}}]),
        ({"$set": {"objs.$[o].t": True}}, [{"$or": [{"o.k": "c"}, {"o.n": {"$lt": 1}}]}]),
        ({"$unset": {"objs.$[o].k": ""}}, [{"o.k": {"$exists": True}, "o.n": {"$mod": [2, 1]}}]),
        ({"$set": {"nested.$[x]": []}}, [{"x": {"$size": rng.randrange(3)}}]),
        ({"$inc": {"objs.$[o].n": 1}}, [{"o.k": {"$not": {"$type": "string"}}}]),
    ]
    return rng.choice(forms)


def random_doc(rng, i):
    return {
        "_id": i,
        "n": rng.randrange(5),
        "arr": [rng.choice([rng.randrange(6), rng.choice(["a1", "b2", "c3", "A4"])]) for _ in range(rng.randrange(7))],
        "objs": [{"k": rng.choice(["a", "ab", "b", "c", 5]), "n": rng.randrange(5)} for _ in range(rng.randrange(5))],
        "nested": [[rng.randrange(4) for _ in range(rng.randrange(3))] for _ in range(rng.randrange(3))],
    }


def fast_errors(client):
    return client.admin.command("serverStatus")["metrics"]["fastUpdates"]["errors"]


def test_fast_and_normal_updates_agree_on_filtering_operators(client, db):
    rng = random.Random(1010)
    docs = [random_doc(rng, i) for i in range(30)]
    db.fast.insert_many(docs)
    db.slow.insert_many(docs)
    before = fast_errors(client)
    normal_failures = 0
    fast_taken = 0
    for step in range(600):
        i = rng.randrange(32)
        if rng.random() < 0.5:
            u, af = random_pull(rng), None
        else:
            u, af = random_array_filter(rng)
        kw = {"arrayFilters": af} if af else {}
        r = upd(db, "fast", {"_id": i}, u, fastUpdate=True, **kw)
        fast_taken += "fastUpdates" in r
        r = upd(db, "slow", {"_id": i}, u, fastUpdate=False, **kw)
        if r.get("writeErrors"):
            normal_failures += 1
    assert fast_taken == 600
    fast = list(db.fast.find().sort("_id", 1))
    slow = list(db.slow.find().sort("_id", 1))
    assert fast == slow
    # A fast message fails when applied only where the normal path failed too.
    assert fast_errors(client) - before <= normal_failures


def test_regex_pull_by_id_with_fast_updates(db):
    """The case that used to be acknowledged and then dropped."""
    db.c.insert_one({"_id": 1, "tags": ["apple", "avocado", "pear"]})
    r = upd(db, "c", {"_id": 1}, {"$pull": {"tags": {"$regex": "^a"}}}, fastUpdate=True)
    assert r["fastUpdates"]["count"] == 1
    assert db.c.find_one({"_id": 1})["tags"] == ["pear"]
    upd(db, "c", {"_id": 1}, {"$pull": {"tags": {"$in": [Regex("^p")]}}}, fastUpdate=True)
    assert db.c.find_one({"_id": 1})["tags"] == []


def test_bad_pull_conditions_fail_before_anything_is_written(db):
    db.c.insert_one({"_id": 1, "a": [1, 2]})
    for fast in (True, False):
        for cond in ({"$foo": 1}, {"$regex": "("}, {"$expr": {"$eq": [1, 1]}}):
            r = upd(db, "c", {"_id": 1}, {"$pull": {"a": cond}}, fastUpdate=fast)
            assert r["writeErrors"] and "fastUpdates" not in r
    assert db.c.find_one() == {"_id": 1, "a": [1, 2]}


@pytest.fixture()
def test_server():
    s = Siltd(extra=["--enable-test-commands"]).start()
    yield s
    s.cleanup()


def test_panicking_update_function_leaves_the_document_intact(test_server):
    c = test_server.client()
    try:
        db = c.t
        db.c.insert_many([{"_id": i, "n": i} for i in range(50)])
        before = fast_errors(c)
        c.admin.command("configureFailPoint", "siltFastUpdatePanic", mode="alwaysOn")
        for i in range(50):
            r = upd(db, "c", {"_id": i}, {"$inc": {"n": 100}}, fastUpdate=True)
            assert r["fastUpdates"]["count"] == 1
        db.command("compact", "c")  # flush every message into the leaves
        assert [d["n"] for d in db.c.find().sort("_id", 1)] == list(range(50))
        assert fast_errors(c) - before >= 50
        c.admin.command("configureFailPoint", "siltFastUpdatePanic", mode="off")
        # The server serves, and the tree is intact: fast updates apply again, writes work.
        upd(db, "c", {"_id": 3}, {"$inc": {"n": 1}}, fastUpdate=True)
        db.c.insert_one({"_id": 99})
        assert db.c.find_one({"_id": 3})["n"] == 4
        assert c.admin.command("serverStatus")["silt"]["writable"] is True
        assert db.command("validate", "c", full=True)["valid"] is True
    finally:
        c.close()
    test_server.stop()
    test_server.start()
    c = test_server.client()
    try:
        assert c.t.c.count_documents({}) == 51
        assert c.t.c.find_one({"_id": 3})["n"] == 4
    finally:
        c.close()


def test_dead_engine_worker_poisons_then_restart_recovers(test_server):
    c = test_server.client()
    try:
        db = c.t
        db.c.insert_many([{"_id": i, "v": "x" * 100} for i in range(1000)], )
        db.command("insert", "c", documents=[{"_id": "last"}], writeConcern={"j": True})
        c.admin.command("configureFailPoint", "siltEngineWorkerPanic", mode="alwaysOn")
        deadline = time.time() + 20
        status = None
        while time.time() < deadline:
            status = c.admin.command("serverStatus")["silt"]
            if not status["writable"]:
                break
            time.sleep(0.05)
        assert status["writable"] is False
        assert "panicked" in status["poisoned"] and "workerPanic" in status["poisoned"]
        with pytest.raises(PyMongoError) as e:
            db.c.insert_one({"_id": "after"})
        assert "panicked" in str(e.value)
        # Reads of intact data go on.
        assert db.c.count_documents({}) == 1001
        assert db.c.find_one({"_id": 7})["v"] == "x" * 100
    finally:
        c.close()
    test_server.kill9()
    test_server.start()
    c = test_server.client()
    try:
        assert c.admin.command("serverStatus")["silt"]["writable"] is True
        assert c.t.c.count_documents({}) == 1001
        assert c.t.c.find_one({"_id": "after"}) is None
        c.t.c.insert_one({"_id": "after"})
        assert c.t.c.count_documents({}) == 1002
    finally:
        c.close()


def test_index_created_while_fast_updates_change_its_field(client, db):
    """Fast updates by index change `v` while an index on `v` is being built: every document
    either took its fast message before the build or went the normal way after it."""
    db.c.insert_many([{"_id": i, "k": i % 20, "v": 0} for i in range(20000)])
    db.c.create_index("k")
    stop = threading.Event()
    errors = []

    def writer():
        rng = random.Random(3)
        try:
            while not stop.is_set():
                k = rng.randrange(20)
                db.command("update", "c", updates=[{"q": {"k": k}, "u": {"$inc": {"v": 1}}, "multi": True}],
                           fastUpdate=True)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    db.c.create_index("v")
    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    db.command("compact", "c")
    r = db.command("validate", "c", full=True)
    assert r["valid"] is True, r
    assert r["keysPerIndex"]["v_1"] == 20000 and r["nrecords"] == 20000
    # The index answers exactly what a scan answers.
    for v in range(0, 40, 3):
        by_index = sorted(d["_id"] for d in db.c.find({"v": v}).hint("v_1"))
        by_scan = sorted(d["_id"] for d in db.c.find({"v": v}).hint({"$natural": 1}))
        assert by_index == by_scan
