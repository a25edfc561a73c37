"""Covered queries: results built from index entries alone equal those read from the documents
(stored numeric types, nulls and missing fields included), and explain shows them MongoDB's way:
PROJECTION_COVERED over IXSCAN, no FETCH, totalDocsExamined 0."""
import datetime
import math
import random

import pytest
from bson import Decimal128, Int64, ObjectId

from conftest import Siltd

MISSING = object()


def canon(v):
    """A comparable form that keeps BSON types apart (int, Int64, float, Decimal128; -0.0)."""
    if isinstance(v, dict):
        return ("doc", tuple(sorted((k, canon(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("arr", tuple(canon(x) for x in v))
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else repr(v))
    return (type(v).__name__, repr(v))


def loose(v):
    """A comparable form where equal numbers of different types are one (as distinct sees them)."""
    if isinstance(v, dict):
        return ("doc", tuple((k, loose(x)) for k, x in v.items()))
    if isinstance(v, Decimal128):
        v = float(v.to_decimal())
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ("num", "nan" if math.isnan(v) else float(v) + 0.0)  # -0.0 is 0
    return canon(v)


def bag(docs):
    return sorted(repr(canon(d)) for d in docs)


def explain(db, filt, projection=None, sort=None, hint=None, coll="c"):
    cmd = {"find": coll, "filter": filt}
    if projection is not None:
        cmd["projection"] = projection
    if sort:
        cmd["sort"] = sort
    if hint:
        cmd["hint"] = hint
    r = db.command("explain", cmd, verbosity="executionStats")
    return r["queryPlanner"]["winningPlan"], r["executionStats"]


def stages(plan):
    out = [plan["stage"]]
    if "inputStage" in plan:
        out += stages(plan["inputStage"])
    for s in plan.get("inputStages", []):
        out += stages(s)
    return out


def random_value(rng):
    return rng.choice([
        lambda: rng.randint(-3, 3),
        lambda: Int64(rng.randint(-3, 3)),
        lambda: Int64(2 ** 40 + rng.randint(0, 2)),
        lambda: float(rng.randint(-3, 3)),
        lambda: rng.randint(-6, 6) / 4,
        lambda: -0.0,
        lambda: float("nan"),
        lambda: Decimal128(f"{rng.randint(-3, 3)}.0"),
        lambda: rng.choice(["", "a", "b", "ab", "\u00e9"]),
        lambda: None,
        lambda: rng.choice([True, False]),
        lambda: datetime.datetime(2020, 1, rng.randint(1, 3)),
        lambda: {"x": rng.randint(0, 2), "y": rng.choice(["a", 1.0, Int64(1)])},
        lambda: MISSING,
        lambda: MISSING,
    ])()


def random_doc(rng, i):
    ids = [i, Int64(i), f"s{i}", float(i) + 0.5, ObjectId()]
    d = {"_id": ids[i % len(ids)]}
    for f in ("a", "b", "c"):
        v = random_value(rng)
        if v is not MISSING:
            d[f] = v
    n = rng.random()
    if n < 0.6:
        x = random_value(rng)
        d["n"] = {} if x is MISSING else {"x": x, "w": 1}
    elif n < 0.8:
        d["n"] = 5
    d["z"] = "not indexed"
    return d


INDEXES = [
    ([("a", 1)], "a_1"),
    ([("a", -1), ("b", 1)], "a_-1_b_1"),
    ([("b", 1), ("c", -1), ("a", 1)], "b_1_c_-1_a_1"),
    ([("n.x", 1), ("a", 1)], "n.x_1_a_1"),
]

# (filter, projection, sort, hint, covered)
QUERIES = [
    ({"a": {"$gte": 0}}, {"a": 1, "_id": 0}, None, None, True),
    ({"a": 1}, {"a": 1, "b": 1}, None, None, True),
    ({"a": {"$lt": 2}, "b": {"$type": "string"}}, {"a": 1, "b": 1, "_id": 0}, None, None, True),
    ({"a": {"$gte": "a"}}, {"a": 1}, [("a", -1)], None, True),
    ({"b": {"$gt": ""}}, {"b": 1, "c": 1, "a": 1, "_id": 0}, [("b", 1), ("c", -1)], None, True),
    ({"b": {"$exists": True}, "c": None}, {"b": 1, "c": 1}, None, "b_1_c_-1_a_1", True),
    ({"a": {"$gt": -10}}, {"a": 1, "b": 1}, [("b", -1)], "a_-1_b_1", True),
    ({}, {"_id": 1}, None, "a_1", True),
    ({"a": {"$ne": None}}, {"a": 1, "_id": 0}, None, "a_1", True),
    ({"n.x": {"$gte": 0}}, {"n.x": 1, "a": 1, "_id": 0}, None, None, True),
    ({}, {"n.x": 1, "_id": 0}, None, "n.x_1_a_1", True),
    ({"a": {"$gte": 0}}, {"a": 1, "z": 1}, None, None, False),
    ({"a": {"$gte": 0}, "z": "not indexed"}, {"a": 1, "_id": 0}, None, None, False),
    ({"a": {"$gte": 0}}, None, None, None, False),
    ({"a": {"$gte": 0}}, {"b": 0}, None, None, False),
]


def run_and_compare(db, filt, proj, sort, hint, covered):
    cur = db.c.find(filt, proj)
    if sort:
        cur = cur.sort(sort)
    if hint:
        cur = cur.hint(hint)
    got = list(cur)
    want = list(db.c.find(filt, proj).hint({"$natural": 1}))
    assert bag(got) == bag(want), (filt, proj, sort, hint)
    plan, st = explain(db, filt, proj, dict(sort) if sort else None, hint)
    assert st["nReturned"] == len(want)
    if covered:
        assert plan["stage"] == "PROJECTION_COVERED", (filt, proj, plan)
        assert "FETCH" not in stages(plan), plan
        assert "IXSCAN" in stages(plan)
    else:
        assert plan["stage"] != "PROJECTION_COVERED" and st["totalDocsExamined"] > 0, plan
    return plan, st


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_covered_results_equal_uncovered(db, seed):
    rng = random.Random(seed)
    docs = [random_doc(rng, i) for i in range(300)]
    db.c.insert_many(docs)
    for keys, name in INDEXES:
        assert db.c.create_index(keys) == name
    for filt, proj, sort, hint, covered in QUERIES:
        plan, st = run_and_compare(db, filt, proj, sort, hint, covered)
        if covered and not any(f.startswith("n.") for f in filt) and not hint == "n.x_1_a_1":
            assert st["totalDocsExamined"] == 0, (filt, st)
    # Documents without n.x (n missing, n: {} or n: 5) project differently, so their entries
    # are not enough: exactly those are fetched.
    plan, st = explain(db, {}, {"n.x": 1, "_id": 0}, hint="n.x_1_a_1")
    lacking = sum(1 for d in docs if not (isinstance(d.get("n"), dict) and "x" in d["n"]))
    assert st["totalDocsExamined"] == lacking and st["totalKeysExamined"] == len(docs)
    # Writes keep the entries exact: a new type under the same key, a removed field.
    db.c.update_many({"a": 1}, {"$set": {"a": Int64(1)}})
    db.c.update_many({"a": 2.5}, {"$unset": {"a": 1}})
    db.c.update_many({"b": "a"}, {"$set": {"b": Decimal128("7")}})
    db.c.delete_many({"c": None})
    for filt, proj, sort, hint, covered in QUERIES:
        run_and_compare(db, filt, proj, sort, hint, covered)
    # Counts and distinct read the same entries.
    for filt in ({"a": {"$gt": 0}, "b": {"$type": "number"}}, {"b": {"$gte": ""}, "a": {"$exists": False}}):
        n = db.command("count", "c", query=filt)["n"]
        assert n == len(list(db.c.find(filt).hint({"$natural": 1})))
    got = db.command("distinct", "c", key="b", query={"a": {"$gte": 0}})["values"]
    want = db.command("distinct", "c", key="b", query={"a": {"$gte": 0}, "z": "not indexed"})["values"]
    # Which of equal values (1, 1.0) represents them depends on the reading order.
    assert sorted(map(repr, map(loose, got))) == sorted(map(repr, map(loose, want)))


def test_explain_shape(db):
    db.c.insert_many([{"_id": i, "a": i % 50, "b": i % 7, "z": i} for i in range(500)])
    db.c.create_index("a")
    db.c.create_index([("b", 1), ("a", -1)])
    # Bounds answer the filter: no filter left, nothing examined but keys.
    plan, st = explain(db, {"a": {"$gte": 45}}, {"a": 1, "_id": 0})
    assert plan["stage"] == "PROJECTION_COVERED"
    assert plan["transformBy"] == {"a": 1, "_id": 0}
    ix = plan["inputStage"]
    assert ix["stage"] == "IXSCAN" and ix["indexName"] == "a_1" and "filter" not in ix
    assert st["nReturned"] == 50 and st["totalKeysExamined"] == 50 and st["totalDocsExamined"] == 0
    assert st["executionStages"]["stage"] == "PROJECTION_COVERED"
    # A predicate the bounds do not answer is checked on the keys (a filter on the IXSCAN).
    plan, st = explain(db, {"b": 3, "a": {"$mod": [2, 0]}}, {"a": 1, "b": 1, "_id": 0})
    ix = plan["inputStage"]
    assert ix["indexName"] == "b_1_a_-1" and ix["filter"] == {"b": 3, "a": {"$mod": [2, 0]}}
    assert st["totalDocsExamined"] == 0 and st["nReturned"] == len(
        list(db.c.find({"b": 3, "a": {"$mod": [2, 0]}})))
    # The sort from the index still works; a sort in memory sits between.
    got = [d["a"] for d in db.c.find({"a": {"$lt": 5}}, {"a": 1, "_id": 0}).sort("a", -1)]
    assert got == sorted(got, reverse=True) and len(got) == 50
    plan, st = explain(db, {"b": {"$gte": 5}}, {"a": 1, "b": 1, "_id": 0}, sort={"a": 1})
    assert stages(plan) == ["PROJECTION_COVERED", "SORT", "IXSCAN"] and st["totalDocsExamined"] == 0
    # _id is in every entry, so including it still covers.
    plan, st = explain(db, {"a": 7}, {"a": 1})
    assert plan["stage"] == "PROJECTION_COVERED" and st["totalDocsExamined"] == 0
    assert sorted(d["_id"] for d in db.c.find({"a": 7}, {"a": 1})) == list(range(7, 500, 50))
    # A field that is not indexed needs the document: FETCH, documents examined.
    plan, st = explain(db, {"a": {"$gte": 45}}, {"a": 1, "z": 1, "_id": 0})
    assert stages(plan) == ["PROJECTION_SIMPLE", "FETCH", "IXSCAN"] and st["totalDocsExamined"] == 50
    plan, st = explain(db, {"a": {"$gte": 45}, "z": {"$gt": 0}}, {"a": 1, "_id": 0})
    assert "FETCH" in stages(plan) and st["totalDocsExamined"] == 50
    plan, _ = explain(db, {"a": {"$gte": 45}}, {"a": 1, "b.c": 1, "_id": 0})
    assert plan["stage"] == "PROJECTION_DEFAULT"
    # A multikey index holds array elements, not the arrays: never covered.
    db.c.insert_one({"_id": 1000, "a": [1, 2], "b": 1})
    plan, st = explain(db, {"a": {"$gte": 45}}, {"a": 1, "_id": 0})
    assert "FETCH" in stages(plan) and ixscan_of(plan)["isMultiKey"] is True


def ixscan_of(plan):
    while plan["stage"] != "IXSCAN":
        plan = plan["inputStage"]
    return plan


def test_types_follow_updates(db):
    db.c.insert_many([{"_id": 1, "a": 1}, {"_id": Int64(2), "a": 2.0}, {"_id": 3}])
    db.c.create_index("a")

    def covered():
        plan, st = explain(db, {}, {"a": 1}, hint="a_1")
        assert plan["stage"] == "PROJECTION_COVERED" and st["totalDocsExamined"] == 0
        return {repr(canon(d["_id"])): canon(d.get("a", MISSING)) for d in db.c.find({}, {"a": 1}).hint("a_1")}

    got = covered()
    assert got[repr(canon(1))] == canon(1)
    assert got[repr(canon(Int64(2)))] == canon(2.0)
    assert got[repr(canon(3))] == canon(MISSING)
    # Same key, other type: the entry follows.
    db.c.update_one({"_id": 1}, {"$set": {"a": Int64(1)}})
    db.c.update_one({"_id": 3}, {"$set": {"a": None}})
    db.c.update_one({"_id": 2}, {"$set": {"a": Decimal128("2.00")}})
    got = covered()
    assert got[repr(canon(1))] == canon(Int64(1))
    assert got[repr(canon(3))] == canon(None)
    assert got[repr(canon(Int64(2)))] == canon(Decimal128("2.00"))


def test_clustering_index_explain(db):
    db.c.create_index("k", clustering=True)
    db.c.insert_many([{"_id": i, "k": i % 10, "v": "x" * i} for i in range(100)])
    plan, st = explain(db, {"k": 3})
    # The entries hold the documents: no FETCH from the primary tree.
    assert plan["stage"] == "CLUSTERED_IXSCAN" and plan["indexName"] == "k_1"
    assert plan["isClustering"] is True and "FETCH" not in stages(plan)
    assert st["nReturned"] == 10 and st["totalDocsExamined"] == 10
    plan, _ = explain(db, {"k": 3}, {"v": 1})
    assert stages(plan) == ["PROJECTION_SIMPLE", "CLUSTERED_IXSCAN"]
    assert sorted(d["_id"] for d in db.c.find({"k": 3}, {"v": 1})) == list(range(3, 100, 10))


def test_covered_after_restart():
    s = Siltd().start()
    try:
        c = s.client()
        c.t.c.insert_many([{"_id": i, "a": Int64(i % 5)} for i in range(50)])
        c.t.c.create_index("a")
        c.close()
        s.stop()
        s.start()
        c = s.client()
        plan, st = explain(c.t, {"a": {"$gte": 3}}, {"a": 1, "_id": 0})
        assert plan["stage"] == "PROJECTION_COVERED" and st["totalDocsExamined"] == 0
        got = list(c.t.c.find({"a": {"$gte": 3}}, {"a": 1, "_id": 0}))
        assert len(got) == 20 and all(type(d["a"]) is Int64 for d in got)
        c.close()
    finally:
        s.cleanup()
