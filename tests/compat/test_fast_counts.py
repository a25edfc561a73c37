"""Counts answered in the storage layer equal the real counts."""
import random

from bson import Int64


def test_counts_equal_real_counts(db):
    rng = random.Random(3)
    docs = []
    for i in range(3000):
        d = {"_id": i, "a": rng.randrange(200), "b": rng.choice(["x", "y", "z"]), "x": rng.randrange(10)}
        if i % 7 == 0:
            d["a"] = str(d["a"])  # another type bracket
        if i % 11 == 0:
            del d["a"]
        docs.append(d)
    db.c.insert_many(docs)
    db.c.create_index("a")
    db.c.create_index([("b", 1), ("a", -1)])
    db.m.insert_many([{"_id": i, "t": [i % 5, i % 7]} for i in range(500)])
    db.m.create_index("t")  # multikey: never counted by keys
    filters = [
        {},
        {"a": 5},
        {"a": {"$gte": 50, "$lt": 120}},
        {"a": {"$gt": 150}},
        {"a": {"$lte": "3"}},
        {"a": {"$in": [1, 2, 3, "4", 199]}},
        {"b": "y"},
        {"b": "y", "a": {"$gte": 10, "$lte": 20}},
        {"b": {"$in": ["x", "z"]}, "a": 7},
        {"a": {"$gte": 10}, "x": 3},          # needs a matcher
        {"a": None},
        {"a": {"$exists": False}},
        {"a": {"$gte": 10, "$lt": "5"}},      # mixed brackets
        {"a": Int64(5)},
        {"a": 5.0},
    ]
    for f in filters:
        real = sum(1 for _ in db.c.find(f, {"_id": 1}))
        assert db.c.count_documents(f) == real, f
        assert db.command("count", "c", query=f)["n"] == real, f
    assert db.c.estimated_document_count() == 3000
    for f in [{"t": 3}, {"t": {"$gte": 2, "$lt": 4}}, {}]:
        real = sum(1 for _ in db.m.find(f, {"_id": 1}))
        assert db.m.count_documents(f) == real, f
    # Deletes and updates keep counts right.
    db.c.delete_many({"a": {"$lt": 20}})
    db.c.update_many({"b": "x"}, {"$set": {"a": 1000}})
    for f in [{}, {"a": 1000}, {"a": {"$gte": 0}}, {"b": "x", "a": 1000}]:
        real = sum(1 for _ in db.c.find(f, {"_id": 1}))
        assert db.c.count_documents(f) == real, f


def test_count_documents_answers_an_int32(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(5)])
    db.c.create_index("a")
    for f in ({}, {"a": {"$gte": 2}}):
        r = db.command("aggregate", "c", pipeline=[{"$match": f}, {"$group": {"_id": 1, "n": {"$sum": 1}}}],
                       cursor={})
        n = r["cursor"]["firstBatch"][0]["n"]
        assert type(n) is int and n == (5 if not f else 3)
