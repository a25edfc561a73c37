"""TTL indexes and their monitor, hidden indexes, collMod on indexes."""
import datetime
import time

import pytest
from pymongo.errors import OperationFailure

from conftest import Siltd


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def wait_for(pred, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_ttl_monitor_deletes_expired_documents():
    s = Siltd(extra=["--setParameter", "ttlMonitorSleepSecs=1"]).start()
    try:
        c = s.client()
        db = c.ttl
        assert c.admin.command("getParameter", ttlMonitorSleepSecs=1)["ttlMonitorSleepSecs"] == 1
        now = datetime.datetime.now(datetime.timezone.utc)
        ago = lambda sec: now - datetime.timedelta(seconds=sec)
        assert db.s.create_index("at", expireAfterSeconds=30) == "at_1"
        spec = [i for i in db.s.list_indexes() if i["name"] == "at_1"][0]
        assert spec["expireAfterSeconds"] == 30
        db.s.insert_many([
            {"_id": "old", "at": ago(3600)},
            {"_id": "fresh", "at": ago(1)},
            {"_id": "future", "at": now + datetime.timedelta(days=1)},
            {"_id": "string", "at": "2000-01-01"},
            {"_id": "missing"},
            {"_id": "array", "at": [now + datetime.timedelta(days=1), ago(7200)]},
        ])
        # A partial TTL index only expires what its filter selects.
        db.p.create_index("at", expireAfterSeconds=0, partialFilterExpression={"kind": "tmp"})
        db.p.insert_many([{"_id": 1, "at": ago(10), "kind": "tmp"}, {"_id": 2, "at": ago(10), "kind": "keep"}])
        assert wait_for(lambda: db.s.count_documents({}) == 4 and db.p.count_documents({}) == 1)
        assert sorted(d["_id"] for d in db.s.find()) == ["fresh", "future", "missing", "string"]
        assert [d["_id"] for d in db.p.find()] == [2]
        ttl = db.command("serverStatus")["metrics"]["ttl"]
        assert ttl["deletedDocuments"] >= 3 and ttl["passes"] >= 1
        # collMod shortens the expiry: the fresh document goes too.
        r = db.command("collMod", "s", index={"keyPattern": {"at": 1}, "expireAfterSeconds": 0})
        assert r["expireAfterSeconds_old"] == 30 and r["expireAfterSeconds_new"] == 0
        assert wait_for(lambda: db.s.find_one({"_id": "fresh"}) is None)
        # The monitor can be switched off.
        c.admin.command("setParameter", 1, ttlMonitorEnabled=False)
        db.s.insert_one({"_id": "late", "at": ago(100)})
        time.sleep(2.5)
        assert db.s.find_one({"_id": "late"}) is not None
        c.close()
    finally:
        s.cleanup()


def test_ttl_index_errors(db):
    assert code_of(lambda: db.c.create_index([("a", 1), ("b", 1)], expireAfterSeconds=5)) == 67
    assert code_of(lambda: db.c.create_index("a", expireAfterSeconds="x")) == 67
    assert code_of(lambda: db.c.create_index("a", expireAfterSeconds=-1)) == 67
    db.c.create_index("a")
    assert code_of(lambda: db.command("collMod", "nope", index={"name": "a_1", "hidden": True})) == 26
    assert code_of(lambda: db.command("collMod", "c", index={"name": "zz", "hidden": True})) == 27
    assert code_of(lambda: db.command("collMod", "c", index={"name": "_id_", "hidden": True})) == 72


def test_hidden_indexes(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(50)])
    db.c.create_index("a")
    plan = lambda: str(db.c.find({"a": 7}).explain()["queryPlanner"]["winningPlan"])
    assert "IXSCAN" in plan()
    r = db.command("collMod", "c", index={"name": "a_1", "hidden": True})
    assert (r["hidden_old"], r["hidden_new"]) == (False, True)
    assert "IXSCAN" not in plan()
    assert [i.get("hidden") for i in db.c.list_indexes() if i["name"] == "a_1"] == [True]
    # Still maintained while hidden.
    db.c.insert_one({"_id": 100, "a": 7})
    db.command("collMod", "c", index={"keyPattern": {"a": 1}, "hidden": False})
    assert "IXSCAN" in plan()
    assert sorted(d["_id"] for d in db.c.find({"a": 7})) == [7, 100]
    # Created hidden.
    db.c.create_index("b", hidden=True)
    assert "IXSCAN" not in str(db.c.find({"b": 1}).explain()["queryPlanner"]["winningPlan"])
    with pytest.raises(OperationFailure):
        list(db.c.find({"b": 1}).hint("b_1"))
