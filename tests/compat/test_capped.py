"""Capped collections: insertion order, size and max limits, $natural order, tailable and
awaitData cursors following inserts, and a restart in the middle."""
import threading
import time

import pytest
from pymongo import CursorType
from pymongo.errors import OperationFailure

from conftest import Siltd


def test_capped_keeps_insertion_order_and_limits(db):
    db.create_collection("log", capped=True, size=100000, max=5)
    opts = [c for c in db.list_collections() if c["name"] == "log"][0]["options"]
    assert opts["capped"] is True and opts["max"] == 5 and opts["size"] >= 100000
    assert db.command("collStats", "log")["capped"] is True
    for i in [9, 3, 7, 1, 8, 2, 6]:
        db.log.insert_one({"_id": i, "x": "a" * 10})
    # The two oldest are gone; the rest come back in insertion order.
    assert [d["_id"] for d in db.log.find()] == [7, 1, 8, 2, 6]
    assert [d["_id"] for d in db.log.find().sort("$natural", 1)] == [7, 1, 8, 2, 6]
    assert [d["_id"] for d in db.log.find().sort("$natural", -1)] == [6, 2, 8, 1, 7]
    assert db.log.count_documents({}) == 5
    assert db.log.find_one({"_id": 8})["x"] == "a" * 10
    db.log.update_one({"_id": 8}, {"$set": {"x": "b"}})
    assert [d["_id"] for d in db.log.find()] == [7, 1, 8, 2, 6]
    assert [i["name"] for i in db.log.list_indexes()] == ["_id_"]
    with pytest.raises(OperationFailure) as e:
        db.log.insert_one({"_id": 7})
    assert e.value.code == 11000
    # A size cap.
    db.create_collection("small", capped=True, size=4096)
    for i in range(200):
        db.small.insert_one({"_id": i, "p": "x" * 100})
    ids = [d["_id"] for d in db.small.find()]
    assert ids == list(range(ids[0], 200)) and len(ids) < 60
    # Covered through a secondary index or read by a scan: the same answer.
    db.small.create_index("n")
    db.small.update_many({}, [{"$set": {"n": {"$mod": ["$_id", 7]}}}])
    covered = sorted(d["_id"] for d in db.small.find({"n": 1}, {"_id": 1, "n": 1}).hint("n_1"))
    scanned = sorted(d["_id"] for d in db.small.find({"n": 1}, {"_id": 1, "n": 1}).hint({"$natural": 1}))
    assert covered == scanned == [i for i in ids if i % 7 == 1]
    with pytest.raises(OperationFailure) as e:
        db.create_collection("bad", capped=True)
    assert e.value.code == 72


def test_tailable_await_cursor_follows_inserts(db):
    db.create_collection("log", capped=True, size=100000)
    db.log.insert_many([{"_id": i, "n": i} for i in [5, 3, 9]])
    cur = db.log.find({"n": {"$gte": 0}}, cursor_type=CursorType.TAILABLE_AWAIT, batch_size=2)

    def feed():
        time.sleep(0.4)
        db.log.insert_one({"_id": 1, "n": 1})
        time.sleep(0.2)
        db.log.insert_many([{"_id": 2, "n": -1}, {"_id": 4, "n": 4}])

    t = threading.Thread(target=feed)
    t.start()
    got = []
    deadline = time.time() + 20
    while len(got) < 5 and time.time() < deadline:
        got.append(cur.next()["_id"])
    t.join()
    assert got == [5, 3, 9, 1, 4]
    assert cur.alive
    cur.close()
    # A plain tailable cursor returns what is there and stays open.
    cur = db.log.find(cursor_type=CursorType.TAILABLE)
    assert [d["_id"] for d in cur] == [5, 3, 9, 1, 2, 4]
    assert cur.alive
    db.log.insert_one({"_id": 10, "n": 10})
    assert [d["_id"] for d in cur] == [10]
    cur.close()
    with pytest.raises(OperationFailure) as e:
        list(db.other.find(cursor_type=CursorType.TAILABLE))
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        list(db.log.find(cursor_type=CursorType.TAILABLE).sort("n", 1))
    assert e.value.code == 2


def test_capped_order_survives_a_restart():
    s = Siltd().start()
    try:
        c = s.client()
        c.cr.create_collection("log", capped=True, size=100000, max=4)
        for i in [30, 10, 20]:
            c.cr.log.insert_one({"_id": i})
        c.close()
        s.kill9()
        s.start()
        c = s.client()
        for i in [5, 1]:
            c.cr.log.insert_one({"_id": i})
        assert [d["_id"] for d in c.cr.log.find()] == [10, 20, 5, 1]
        c.close()
    finally:
        s.cleanup()
