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


def test_counts_with_a_matcher_read_only_the_filters_fields(db):
    # A count through an index decodes only the top-level fields its filter reads; every kind
    # of path must still match as on the whole document.
    rng = random.Random(5)
    docs = []
    for i in range(2000):
        d = {"_id": i, "a": rng.randrange(100), "pad": "p" * rng.randrange(200),
             "n": {"x": rng.randrange(5), "y": [rng.randrange(3) for _ in range(rng.randrange(4))]},
             "arr": [{"k": rng.randrange(4), "v": rng.randrange(4)} for _ in range(rng.randrange(3))]}
        if i % 9 == 0:
            del d["n"]
        if i % 13 == 0:
            d["z"] = None
        docs.append(d)
    db.c.insert_many(docs)
    db.c.create_index("a")
    rng_a = {"a": {"$gte": 10, "$lt": 80}}
    filters = [
        {"n.x": 2},
        {"n.y": 1},
        {"n.y.0": 2},
        {"n": {"$exists": False}},
        {"n.x": {"$exists": False}},
        {"arr": {"$elemMatch": {"k": 1, "v": {"$gte": 2}}}},
        {"arr.k": 3},
        {"arr": {"$size": 2}},
        {"z": None},
        {"z": {"$exists": True}},
        {"$or": [{"n.x": 1}, {"arr.v": 0}]},
        {"$nor": [{"n.x": {"$lt": 3}}]},
        {"_id": {"$mod": [3, 1]}},
        {"pad": {"$regex": "^p{150}"}},
        {"$expr": {"$gt": ["$n.x", 2]}},
    ]
    for f in filters:
        q = {"$and": [rng_a, f]}
        real = sum(1 for _ in db.c.find(q))
        assert db.c.count_documents(q) == real, f
        assert db.command("count", "c", query=q)["n"] == real, f
        assert db.command("count", "c", query=q, hint="a_1")["n"] == real, f
