"""Operational commands: shutdown, fsync (with lock), dataSize, dbHash, profile and
system.profile, top, reIndex."""
import threading
import time

import pytest
from pymongo.errors import AutoReconnect, ConnectionFailure, OperationFailure

from conftest import Siltd


def test_data_size_db_hash_reindex(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(10)])
    db.c.create_index("a")
    r = db.command("dataSize", f"{db.name}.c")
    assert r["numObjects"] == 10 and r["size"] > 0
    r = db.command("dataSize", f"{db.name}.c", keyPattern={"_id": 1}, min={"_id": 2}, max={"_id": 5})
    assert r["numObjects"] == 3
    h1 = db.command("dbHash")
    assert set(h1["collections"]) == {"c"} and len(h1["md5"]) == 32
    assert db.command("dbHash")["md5"] == h1["md5"]
    db.c.insert_one({"_id": 99})
    h2 = db.command("dbHash", collections=["c"])
    assert h2["collections"]["c"] != h1["collections"]["c"]
    r = db.command("reIndex", "c")
    assert r["nIndexesWas"] == 2 and [i["name"] for i in r["indexes"]] == ["_id_", "a_1"]
    assert "IXSCAN" in str(db.c.find({"a": 3}).explain()["queryPlanner"]["winningPlan"])
    assert [d["_id"] for d in db.c.find({"a": 3})] == [3]


def test_profiler_and_top(db, client):
    db.c.insert_one({"_id": 1, "a": 1})
    assert db.command("profile", -1)["was"] == 0
    db.command("profile", 2)
    assert db.command("profile", -1)["was"] == 2
    db.c.find_one({"a": 1})
    db.c.update_one({"_id": 1}, {"$set": {"b": 1}})
    db.command("profile", 0)
    assert db.command("collStats", "system.profile")["capped"] is True
    ops = [(p["op"], p["ns"]) for p in db.system.profile.find()]
    assert ("query", f"{db.name}.c") in ops and ("update", f"{db.name}.c") in ops
    n = db.system.profile.count_documents({})
    db.c.find_one({"a": 1})
    assert db.system.profile.count_documents({}) == n
    # A filter over the profile entry replaces slowms at level 1; sampleRate 0 records nothing.
    db.system.profile.drop()
    db.command("profile", 1, filter={"op": "update"})
    db.c.find_one({"a": 1})
    db.c.update_one({"_id": 1}, {"$set": {"b": 2}})
    r = db.command("profile", 1, sampleRate=0.0, filter="unset")
    assert r["filter"] == {"op": "update"} and r["sampleRate"] == 1.0
    db.c.update_one({"_id": 1}, {"$set": {"b": 3}})
    db.command("profile", 0, sampleRate=1.0)
    assert [p["op"] for p in db.system.profile.find()] == ["update"]
    assert "filter" not in db.command("profile", -1)
    with pytest.raises(OperationFailure) as e:
        db.command("profile", 1, sampleRate=1.5)
    assert e.value.code == 2
    totals = client.admin.command("top")["totals"]
    entry = totals[f"{db.name}.c"]
    assert entry["queries"]["count"] >= 2 and entry["update"]["count"] >= 1
    assert entry["total"]["count"] >= entry["queries"]["count"]


def test_fsync_lock_holds_writes(client, db):
    db.c.insert_one({"_id": 0})
    r = client.admin.command("fsync", lock=True)
    assert r["lockCount"] == 1
    done = []
    t = threading.Thread(target=lambda: (db.c.insert_one({"_id": 1}), done.append(True)))
    t.start()
    time.sleep(0.5)
    assert not done  # the write waits
    assert db.c.find_one({"_id": 0}) == {"_id": 0}  # reads go on
    assert client.admin.command("fsyncUnlock")["lockCount"] == 0
    t.join(10)
    assert done and db.c.count_documents({}) == 2
    with pytest.raises(OperationFailure):
        client.admin.command("fsyncUnlock")
    assert client.admin.command("fsync")["numFiles"] == 1
    # forBackup is not honoured, so it is refused rather than ignored.
    with pytest.raises(OperationFailure) as e:
        client.admin.command("fsync", lock=True, forBackup=True)
    assert "forBackup" in str(e.value)
    with pytest.raises(OperationFailure):
        client.admin.command("fsyncUnlock")  # and no lock was taken


def test_shutdown_command():
    s = Siltd().start()
    try:
        c = s.client()
        c.t.c.insert_one({"_id": 1})
        try:
            c.admin.command("shutdown")
        except (AutoReconnect, ConnectionFailure):
            pass
        assert s.proc.wait(timeout=60) == 0
        c.close()
        s.start()
        c = s.client()
        assert c.t.c.find_one() == {"_id": 1}
        c.close()
    finally:
        s.cleanup()
