"""Counts from subtree counts (issue 35) equal the documents read: every kind of count
(count, countDocuments, $count, $group with $sum: 1), over single and compound indexes,
$in, both directions, _id ranges, partitioned collections, in transactions and next to
concurrent writes; and validate finds the counts consistent."""
import random
import threading

from pymongo import ReadPreference
from pymongo.read_concern import ReadConcern


def every_count(coll, f):
    """The counts siltd answers for filter `f`, each kind once."""
    db, name = coll.database, coll.name
    out = {
        "countDocuments": coll.count_documents(f),
        "count": db.command("count", name, query=f)["n"],
    }
    r = list(coll.aggregate([{"$match": f}, {"$count": "n"}]))
    out["$count"] = r[0]["n"] if r else 0
    r = list(coll.aggregate([{"$match": f}, {"$group": {"_id": None, "n": {"$sum": 1}}}]))
    out["$group"] = r[0]["n"] if r else 0
    return out


def check(coll, filters):
    for f in filters:
        real = sum(1 for _ in coll.find(f, {"_id": 1}))
        got = every_count(coll, f)
        assert set(got.values()) == {real}, (f, real, got)


def filters(rng, n):
    out = [{}, {"_id": {"$gte": n // 3}}, {"_id": {"$lt": n // 2, "$gt": 10}}]
    for _ in range(12):
        lo = rng.randrange(400)
        hi = lo + rng.choice([1, 10, 100, 300])
        out.append({"a": {"$gte": lo, "$lt": hi}})
        out.append({"a": {"$gt": lo, "$lte": hi}})
    out += [
        {"a": {"$in": [3, 77, 150, 151, 399, 1000]}},
        {"a": {"$gt": 390}},
        {"a": {"$lt": 5}},
        {"b": "k3"},
        {"b": {"$in": ["k1", "k7"]}},
        {"b": "k2", "a": {"$gte": 100, "$lte": 250}},
        {"b": {"$gte": "k4"}, "a": 9},
    ]
    return out


def test_counts_of_every_kind_equal_the_documents_read(db):
    rng = random.Random(35)
    n = 6000
    c = db.c
    c.create_index("a")
    c.create_index([("b", 1), ("a", -1)])
    c.insert_many([{"_id": i, "a": rng.randrange(400), "b": f"k{i % 9}", "x": 0} for i in range(n)])
    check(c, filters(rng, n))
    # Deletes, moves between index keys, fast updates, upserts and inserts, then count again.
    c.delete_many({"a": {"$lt": 40}})
    c.update_many({"b": "k3"}, {"$set": {"a": 1000}})
    for i in range(0, n, 7):
        c.update_one({"_id": i}, {"$inc": {"x": 1}})
    for i in range(n, n + 300):
        c.update_one({"_id": i}, {"$set": {"a": i % 400, "b": "k1"}}, upsert=True)
    c.insert_many([{"_id": -i, "a": i % 400, "b": "k8"} for i in range(1, 500)])
    check(c, filters(rng, n))
    r = db.command("validate", "c")
    assert r["valid"], r


def test_counts_next_to_concurrent_writes(db):
    c = db.w
    c.create_index("a")
    c.insert_many([{"_id": i, "a": i % 100} for i in range(3000)])
    stop = threading.Event()

    def writer():
        i = 3000
        while not stop.is_set():
            c.insert_one({"_id": i, "a": i % 100})
            c.delete_one({"_id": i - 3000})
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(30):
            # Each insert is paired with a delete: a count is the total give or take the pair
            # in flight.
            assert 2999 <= c.count_documents({}) <= 3001
            assert 0 <= c.count_documents({"a": {"$gte": 10, "$lt": 20}}) <= 302
    finally:
        stop.set()
        t.join()
    check(c, [{}, {"a": {"$gte": 10, "$lt": 20}}, {"a": 5}])


def test_counts_on_a_partitioned_collection(db):
    db.command("create", "p", partitioned=True)
    c = db.p
    c.create_index("a")
    c.insert_many([{"_id": i, "a": i % 50} for i in range(1000)])
    db.command("addPartition", "p")
    c.insert_many([{"_id": i, "a": i % 50} for i in range(1000, 2500)])
    db.command("addPartition", "p")
    c.insert_many([{"_id": i, "a": i % 50} for i in range(2500, 3000)])
    fs = [{}, {"a": 7}, {"a": {"$gte": 10, "$lt": 30}}, {"_id": {"$gte": 900, "$lt": 2600}}]
    check(c, fs)
    db.command("dropPartition", "p", id=0)
    check(c, fs)


def test_counts_in_a_transaction_see_its_snapshot(rc):
    db = rc.t_subtree_counts_txn
    rc.drop_database(db.name)
    c = db.c
    c.create_index("a")
    c.insert_many([{"_id": i, "a": i % 10} for i in range(1000)])
    with rc.start_session() as s:
        s.start_transaction(read_concern=ReadConcern("snapshot"))
        assert c.count_documents({}, session=s) == 1000
        # Another client's writes after the snapshot are not seen inside.
        c.insert_many([{"_id": 5000 + i, "a": 3} for i in range(50)])
        c.delete_many({"_id": {"$lt": 20}})
        # The transaction's own writes are.
        c.insert_many([{"_id": 9000 + i, "a": 3} for i in range(7)], session=s)
        c.delete_one({"_id": 500}, session=s)
        assert c.count_documents({}, session=s) == 1006
        assert c.count_documents({"a": 3}, session=s) == 100 + 7
        assert c.count_documents({"a": 0}, session=s) == 99
        r = list(c.aggregate([{"$match": {"a": {"$gte": 3, "$lte": 3}}}, {"$count": "n"}], session=s))
        assert r == [{"n": 107}]
        # Outside: the other writes, not the transaction's.
        assert c.count_documents({}) == 1000 + 50 - 20
        assert c.count_documents({"a": 3}) == 100 + 50 - 2
        s.commit_transaction()
    assert c.count_documents({}) == 1000 + 50 - 20 + 7 - 1
    check(c.with_options(read_preference=ReadPreference.PRIMARY), [{}, {"a": 3}, {"a": {"$lt": 3}}])
    rc.drop_database(db.name)


def test_explain_of_a_count_shows_a_count_scan(db):
    c = db.e
    c.create_index("a")
    c.insert_many([{"_id": i, "a": i % 100} for i in range(20000)])
    r = db.command("explain", {"count": "e", "query": {"a": {"$gte": 10, "$lt": 90}}},
                   verbosity="executionStats")
    plan = r["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COUNT" and plan["inputStage"]["stage"] == "COUNT_SCAN", plan
    assert plan["inputStage"]["indexName"] == "a_1"
    assert plan["inputStage"]["keyPattern"] == {"a": 1}
    st = r["executionStats"]["executionStages"]
    assert st["nCounted"] == 16000
    assert 0 < st["inputStage"]["nodesRead"] < 40, st
    assert st["inputStage"]["rangesScanned"] == 0, st
    # countDocuments({}) counts the primary tree.
    r = db.command("explain", {"aggregate": "e", "cursor": {}, "pipeline": [
        {"$match": {}}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]})
    plan = r["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["indexName"] == "_id_", plan
    # A filter an index cannot answer alone is no count scan.
    r = db.command("explain", {"count": "e", "query": {"a": {"$gte": 10}, "x": 1}})
    assert r["queryPlanner"]["winningPlan"]["stage"] != "COUNT"
