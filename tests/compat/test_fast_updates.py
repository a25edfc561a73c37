"""Fast updates: $-operator updates by _id applied as engine messages without a read."""
import random

import pytest

from conftest import Siltd


def upd(db, coll, q, u, **kw):
    return db.command("update", coll, updates=[dict({"q": q, "u": u}, **kw)])


def test_off_by_default_and_per_operation(db):
    db.c.insert_one({"_id": 1, "n": 0})
    r = upd(db, "c", {"_id": 1}, {"$inc": {"n": 1}})
    assert "fastUpdates" not in r and r["n"] == 1
    r = db.command("update", "c", updates=[{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}], fastUpdate=True)
    assert r["fastUpdates"] == {"count": 1, "countsAreUnknown": True}
    assert db.c.find_one({"_id": 1})["n"] == 2
    # A document that does not exist: the reply cannot know, the message is a no-op.
    r = upd(db, "c", {"_id": 99}, {"$inc": {"n": 1}}, fastUpdate=True)
    assert r["n"] == 1 and r["fastUpdates"]["countsAreUnknown"]
    assert db.c.find_one({"_id": 99}) is None
    # Not eligible: a filter beyond _id, a replacement, a positional update.
    for q, u in [({"_id": 1, "n": 2}, {"$inc": {"n": 1}}), ({"_id": 1}, {"n": 5}),
                 ({"_id": {"$gte": 1}}, {"$inc": {"n": 1}})]:
        r = upd(db, "c", q, u, fastUpdate=True)
        assert "fastUpdates" not in r


def test_server_wide_switch_and_metrics(client, db):
    was = client.admin.command("setParameter", 1, fastUpdates=True)["was"]
    try:
        assert client.admin.command("getParameter", 1, fastUpdates=1)["fastUpdates"] is True
        db.c.insert_one({"_id": 1, "n": 0, "s": "text"})
        before = client.admin.command("serverStatus")["metrics"]["fastUpdates"]
        r = db.c.update_one({"_id": 1}, {"$inc": {"n": 5}})
        assert r.raw_result["fastUpdates"]["count"] == 1
        assert db.c.find_one({"_id": 1})["n"] == 5
        # A deferred failure leaves the document intact and is counted.
        db.c.update_one({"_id": 1}, {"$inc": {"s": 1}})
        assert db.c.find_one({"_id": 1}) == {"_id": 1, "n": 5, "s": "text"}
        after = client.admin.command("serverStatus")["metrics"]["fastUpdates"]
        assert after["errors"] > before["errors"]
        assert after["performed"]["primaryKey"] >= before["performed"]["primaryKey"] + 2
        # Upsert on the fast path, with $setOnInsert honoured.
        db.c.update_one({"_id": 7}, {"$inc": {"n": 1}, "$setOnInsert": {"new": True}}, upsert=True)
        assert db.c.find_one({"_id": 7}) == {"_id": 7, "n": 1, "new": True}
        db.c.update_one({"_id": 7}, {"$inc": {"n": 1}, "$setOnInsert": {"new": False}}, upsert=True)
        assert db.c.find_one({"_id": 7}) == {"_id": 7, "n": 2, "new": True}
    finally:
        client.admin.command("setParameter", 1, fastUpdates=was)


def test_fast_equals_normal_on_random_sequences(db):
    rng = random.Random(7)
    for name in ("fast", "slow"):
        db[name].insert_many([{"_id": i, "n": 0, "arr": [], "s": "x"} for i in range(20)])
    ops = []
    for _ in range(400):
        i = rng.randrange(25)  # some ids do not exist
        kind = rng.randrange(7)
        if kind == 0:
            u = {"$inc": {"n": rng.randrange(-3, 4)}}
        elif kind == 1:
            u = {"$set": {"s": rng.choice("abc"), "sub.v": rng.randrange(9)}}
        elif kind == 2:
            u = {"$push": {"arr": rng.randrange(5)}}
        elif kind == 3:
            u = {"$pull": {"arr": rng.randrange(5)}}
        elif kind == 4:
            u = {"$unset": {"sub": ""}}
        elif kind == 5:
            u = {"$max": {"n": rng.randrange(-2, 8)}, "$addToSet": {"tags": rng.choice("xyz")}}
        else:
            u = {"$inc": {"s": 1}}  # fails on both paths (string)
        ops.append((i, u))
    for i, u in ops:
        upd(db, "fast", {"_id": i}, u, fastUpdate=True)
        try:
            upd(db, "slow", {"_id": i}, u)
        except Exception:
            pass
    fast = list(db.fast.find().sort("_id", 1))
    slow = list(db.slow.find().sort("_id", 1))
    assert fast == slow


def test_fast_updates_survive_kill9():
    s = Siltd(extra=["--fast-updates"]).start()
    try:
        c = s.client()
        c.t.c.insert_many([{"_id": i, "n": 0} for i in range(10)])
        for k in range(200):
            c.t.command("update", "c", updates=[{"q": {"_id": k % 10}, "u": {"$inc": {"n": 1}}}],
                        writeConcern={"j": True})
        c.close()
        s.kill9()
        s.start()
        c = s.client()
        assert sorted(d["n"] for d in c.t.c.find()) == [20] * 10
        c.close()
    finally:
        s.cleanup()


def test_fast_update_through_secondary_index(db):
    for name in ("f", "s"):
        db[name].insert_many([{"_id": i, "k": i % 10, "c": 0} for i in range(200)])
        db[name].create_index("k")
    rng = random.Random(5)
    for _ in range(100):
        k = rng.randrange(12)
        rf = db.command("update", "f", updates=[{"q": {"k": k}, "u": {"$inc": {"c": 1}}, "multi": True}],
                        fastUpdate=True)
        rs = db.command("update", "s", updates=[{"q": {"k": k}, "u": {"$inc": {"c": 1}}, "multi": True}])
        assert rf["n"] == rs["n"]
        assert "fastUpdates" in rf
    assert list(db.f.find().sort("_id", 1)) == list(db.s.find().sort("_id", 1))
    # An update of the indexed field never takes the fast path.
    r = db.command("update", "f", updates=[{"q": {"k": 1}, "u": {"$inc": {"k": 1}}, "multi": True}],
                   fastUpdate=True)
    assert "fastUpdates" not in r and r["n"] == 20
    # A filter that needs a matcher beyond the index bounds takes the normal path.
    r = db.command("update", "f", updates=[{"q": {"k": 3, "c": {"$gt": 0}}, "u": {"$inc": {"c": 1}}}],
                   fastUpdate=True)
    assert "fastUpdates" not in r


def test_counts_see_fast_updates(db):
    db.c.insert_many([{"_id": i} for i in range(10)])
    for i in range(5, 15):
        db.command("update", "c", updates=[{"q": {"_id": i}, "u": {"$set": {"x": 1}}, "upsert": True}],
                   fastUpdate=True)
    for i in range(20, 25):
        db.command("update", "c", updates=[{"q": {"_id": i}, "u": {"$set": {"x": 1}}}], fastUpdate=True)
    assert db.c.count_documents({}) == 15
    assert sum(1 for _ in db.c.find()) == 15
    # The maintained count (count without a query, estimatedDocumentCount) learns of a
    # document created by a fast upsert when its message reaches a leaf: here, at once or
    # after the flush that compact forces.
    assert db.command("count", "c")["n"] in range(10, 16)
    db.command("compact", "c")
    assert db.command("count", "c")["n"] == 15


def test_insert_ignoring_duplicates(db, topology):
    db.g.insert_many([{"_id": i, "v": "old"} for i in range(0, 100, 2)])
    docs = [{"_id": i, "v": "new"} for i in range(100)]
    # No secondary index: one insert-if-absent message per document, nothing read. On a
    # replica set each document is checked instead: its oplog entry must say whether it went
    # in, which a blind message cannot know.
    r = db.command("insert", "g", documents=docs, ordered=False, ignoreDuplicates=True)
    assert r["ok"] == 1.0 and "writeErrors" not in r
    if topology == "standalone":
        assert r["fastInserts"] == {"count": 100, "countsAreUnknown": True}
    else:
        assert r["n"] == 50 and "fastInserts" not in r
    got = {d["_id"]: d["v"] for d in db.g.find()}
    assert got == {i: ("old" if i % 2 == 0 else "new") for i in range(100)}
    assert db.g.count_documents({}) == 100
    db.command("compact", "g")
    assert db.g.estimated_document_count() == 100
    # With a secondary index the documents are checked one by one; duplicates of `_id` or of
    # a unique key are still skipped without an error, and the index stays right.
    db.h.create_index("u", unique=True)
    db.h.insert_many([{"_id": 1, "u": 1}, {"_id": 2, "u": 2}])
    r = db.command("insert", "h", ordered=False, ignoreDuplicates=True,
                   documents=[{"_id": 1, "u": 10}, {"_id": 3, "u": 2}, {"_id": 4, "u": 4}])
    assert r["n"] == 1 and "writeErrors" not in r and "fastInserts" not in r
    assert sorted(d["u"] for d in db.h.find({"u": {"$gte": 0}}).hint("u_1")) == [1, 2, 4]
    # Documents that are invalid still fail.
    r = db.command("insert", "g", documents=[{"_id": {"$bad": 1}}], ignoreDuplicates=True)
    assert r["n"] == 0 and r["writeErrors"][0]["code"] == 52


def test_count_stays_exact_with_pending_fast_messages(db, topology):
    # Enough data that the tree has internal nodes, so messages wait in buffers.
    pad = "p" * 400
    for b in range(6):
        db.big.insert_many([{"_id": b * 5000 + i, "pad": pad} for i in range(5000)])
    assert db.command("count", "big")["n"] == 30000
    # Fast upserts that create documents, and insert-if-absent with duplicates: the maintained
    # count cannot know their effect yet, so count without a query counts the tree.
    for i in range(30000, 30050):
        db.command("update", "big", updates=[{"q": {"_id": i}, "u": {"$set": {"x": 1}}, "upsert": True}],
                   fastUpdate=True)
    r = db.command("insert", "big", documents=[{"_id": i} for i in range(29000, 31000)],
                   ordered=False, ignoreDuplicates=True)
    # (On a replica set insert-if-absent checks each document: see above.)
    assert ("fastInserts" in r) == (topology == "standalone")
    assert db.command("count", "big")["n"] == 31000
    assert db.big.estimated_document_count() == 31000
    db.command("compact", "big")
    assert db.big.estimated_document_count() == 31000
