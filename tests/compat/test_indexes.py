"""Secondary indexes: create/list/drop, uniqueness, multikey, sparse, partial, clustering, the
planner's choices through explain, sort from an index, hints."""
import random

import pytest
from bson import MaxKey, MinKey
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure


def count(coll, filt):
    """The count command (count_documents needs aggregate, which lands separately)."""
    return coll.database.command("count", coll.name, query=filt)["n"]


def winning(db, filt, sort=None, hint=None, **kw):
    cmd = {"find": "c", "filter": filt}
    if sort:
        cmd["sort"] = sort
    if hint:
        cmd["hint"] = hint
    cmd.update(kw)
    r = db.command("explain", cmd, verbosity="executionStats")
    return r["queryPlanner"]["winningPlan"], r["executionStats"]


def ixscan(plan):
    """The IXSCAN stages under a plan."""
    out = []
    if plan.get("stage") == "IXSCAN":
        out.append(plan)
    for k in ("inputStage",):
        if k in plan:
            out += ixscan(plan[k])
    for s in plan.get("inputStages", []):
        out += ixscan(s)
    return out


def test_create_list_drop(db):
    r = db.command("createIndexes", "c", indexes=[
        {"key": {"a": 1}, "name": "a_1"},
        {"key": {"b": 1, "c": -1}, "name": "b_1_c_-1", "unique": True},
    ])
    assert r["numIndexesBefore"] == 1 and r["numIndexesAfter"] == 3
    assert r["createdCollectionAutomatically"] is True
    again = db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1"}])
    assert again["note"] == "all indexes already exist"
    assert db.c.create_index([("d", DESCENDING)]) == "d_-1"
    names = [i["name"] for i in db.c.list_indexes()]
    assert names == ["_id_", "a_1", "b_1_c_-1", "d_-1"]
    info = db.c.index_information()
    assert info["b_1_c_-1"]["unique"] is True and info["b_1_c_-1"]["key"] == [("b", 1), ("c", -1)]
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c", indexes=[{"key": {"x": 1}, "name": "a_1"}])
    assert e.value.code == 86
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1", "unique": True}])
    assert e.value.code == 85
    with pytest.raises(OperationFailure) as e:
        db.c.drop_index("_id_")
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.c.drop_index("nope")
    assert e.value.code == 27
    db.c.drop_index([("d", -1)])
    db.command("dropIndexes", "c", index=["a_1"])
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_", "b_1_c_-1"]
    db.c.drop_indexes()
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_"]


def test_stats_report_index_sizes(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(200)])
    db.c.create_index("a")
    cs = db.command("collStats", "c")
    assert cs["nindexes"] == 2 and set(cs["indexSizes"]) == {"_id_", "a_1"}
    assert cs["totalIndexSize"] == sum(cs["indexSizes"].values())
    ds = db.command("dbStats")
    assert ds["indexes"] >= 2


def test_unique_insert_update_and_atomicity(db):
    db.c.create_index("a", unique=True)
    db.c.create_index("b")
    db.c.insert_one({"_id": 1, "a": 1, "b": 1})
    with pytest.raises(DuplicateKeyError) as e:
        db.c.insert_one({"_id": 2, "a": 1, "b": 2})
    assert "index: a_1 dup key: { a: 1 }" in str(e.value)
    assert e.value.details["keyPattern"] == {"a": 1} and e.value.details["keyValue"] == {"a": 1}
    # Nothing of the failed insert is left: no document, no entry in b_1.
    assert count(db.c, {}) == 1
    assert list(db.c.find({"b": 2}).hint("b_1")) == []
    db.c.insert_one({"_id": 2, "a": 2, "b": 2})
    with pytest.raises(DuplicateKeyError):
        db.c.update_one({"_id": 2}, {"$set": {"a": 1}})
    assert db.c.find_one({"_id": 2})["a"] == 2
    db.c.update_one({"_id": 2}, {"$set": {"a": 3}})
    db.c.insert_one({"_id": 3, "a": 2})  # 2 is free again
    with pytest.raises(DuplicateKeyError):
        db.c.find_one_and_update({"_id": 3}, {"$set": {"a": 3}})
    with pytest.raises(DuplicateKeyError):
        db.c.update_one({"_id": 9}, {"$set": {"a": 3}}, upsert=True)
    db.c.delete_one({"_id": 2})
    db.c.update_one({"_id": 9}, {"$set": {"a": 3}}, upsert=True)
    # Missing fields index as null: only one document may lack `a`.
    db.c.insert_one({"_id": 10})
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 11})
    # A unique build over duplicates fails and leaves no index.
    db.d.insert_many([{"x": 1}, {"x": 1}])
    with pytest.raises(OperationFailure) as e:
        db.d.create_index("x", unique=True)
    assert e.value.code == 11000
    assert [i["name"] for i in db.d.list_indexes()] == ["_id_"]


def test_unordered_bulk_reports_unique_errors(db):
    db.c.create_index("a", unique=True)
    with pytest.raises(BulkWriteError) as e:
        db.c.insert_many([{"a": 1}, {"a": 1}, {"a": 2}, {"a": 2}], ordered=False)
    errs = e.value.details["writeErrors"]
    assert [x["index"] for x in errs] == [1, 3] and all(x["code"] == 11000 for x in errs)
    assert errs[0]["keyValue"] == {"a": 1}


def test_multikey_dedup_and_parallel_arrays(db):
    db.c.create_index("tags")
    db.c.insert_many([
        {"_id": 1, "tags": ["a", "b", "c"]},
        {"_id": 2, "tags": ["b", "b"]},
        {"_id": 3, "tags": "b"},
        {"_id": 4, "tags": []},
        {"_id": 5},
    ])
    got = sorted(d["_id"] for d in db.c.find({"tags": {"$in": ["a", "b", "c"]}}))
    assert got == [1, 2, 3]
    assert sorted(d["_id"] for d in db.c.find({"tags": {"$gte": "a"}})) == [1, 2, 3]
    plan, st = winning(db, {"tags": {"$in": ["a", "b", "c"]}})
    assert ixscan(plan)[0]["indexName"] == "tags_1" and ixscan(plan)[0]["isMultiKey"] is True
    assert st["nReturned"] == 3 and st["totalDocsExamined"] == 3
    # Ranges on a multikey field must not intersect: [3, 12] matches {$gt: 5, $lt: 10}.
    db.n.create_index("v")
    db.n.insert_many([{"_id": 1, "v": [3, 12]}, {"_id": 2, "v": 7}, {"_id": 3, "v": [1, 2]}])
    assert sorted(d["_id"] for d in db.n.find({"v": {"$gt": 5, "$lt": 10}})) == [1, 2]
    db.p.create_index([("a", 1), ("b", 1)])
    with pytest.raises(OperationFailure) as e:
        db.p.insert_one({"a": [1, 2], "b": [3, 4]})
    assert e.value.code == 171 and "parallel arrays" in str(e.value)
    assert count(db.p, {}) == 0


def test_sparse_and_partial(db):
    db.c.create_index("a", sparse=True, unique=True)
    db.c.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3, "a": 1}])  # missing `a` twice is fine
    assert [d["_id"] for d in db.c.find({"a": 1})] == [3]
    plan, _ = winning(db, {"a": 1})
    assert ixscan(plan)[0]["indexName"] == "a_1"
    # {a: null} must see the documents the sparse index leaves out.
    assert sorted(d["_id"] for d in db.c.find({"a": None})) == [1, 2]
    plan, _ = winning(db, {"a": None})
    assert plan["stage"] == "COLLSCAN"
    # A hinted sparse index returns only what it holds, as in MongoDB.
    assert [d["_id"] for d in db.c.find({}).hint("a_1")] == [3]

    db.p.create_index("x", partialFilterExpression={"y": {"$gt": 5}})
    db.p.insert_many([{"_id": i, "x": i % 3, "y": i} for i in range(12)])
    q = {"x": 1, "y": {"$gt": 5}}
    assert sorted(d["_id"] for d in db.p.find(q)) == [7, 10]
    plan, _ = db_plan(db, "p", q)
    assert ixscan(plan) and ixscan(plan)[0]["indexName"] == "x_1"
    plan, _ = db_plan(db, "p", {"x": 1})
    assert plan["stage"] == "COLLSCAN"
    assert sorted(d["_id"] for d in db.p.find({"x": 1})) == [1, 4, 7, 10]
    spec = [i for i in db.p.list_indexes() if i["name"] == "x_1"][0]
    assert spec["partialFilterExpression"] == {"y": {"$gt": 5}}


def db_plan(db, coll, filt, **kw):
    cmd = {"find": coll, "filter": filt}
    cmd.update(kw)
    r = db.command("explain", cmd, verbosity="executionStats")
    return r["queryPlanner"]["winningPlan"], r["executionStats"]


def test_clustering_index(db):
    db.c.create_index("k", clustering=True)
    db.c.insert_many([{"_id": i, "k": i % 10, "v": "x" * i} for i in range(100)])
    db.c.update_many({"k": 3}, {"$set": {"v": "changed"}})
    got = list(db.c.find({"k": 3}))
    assert len(got) == 10 and all(d["v"] == "changed" for d in got)
    assert [i for i in db.c.list_indexes() if i["name"] == "k_1"][0]["clustering"] is True
    db.c.delete_many({"k": {"$gte": 5}})
    assert count(db.c, {"k": {"$gte": 0}}) == 50


def test_explain_choices(db):
    db.c.insert_many([{"_id": i, "a": i % 10, "b": i % 7, "c": i, "s": str(i)} for i in range(500)])
    db.c.create_index("a")
    db.c.create_index([("a", 1), ("b", 1)])
    db.c.create_index("c", unique=True)
    db.c.create_index("s")
    cases = [
        ({"_id": 5}, "IDHACK", None, 1),
        ({"a": 3}, "IXSCAN", "a_1", 50),
        ({"a": 3, "b": 2}, "IXSCAN", "a_1_b_1", 7),
        ({"a": {"$in": [1, 2]}, "b": 2}, "IXSCAN", "a_1_b_1", 15),
        ({"c": {"$gte": 100, "$lt": 110}}, "IXSCAN", "c_1", 10),
        ({"c": {"$gt": 495}}, "IXSCAN", "c_1", 4),
        ({"s": {"$gt": "99"}}, "IXSCAN", "s_1", None),
        ({"b": 2}, "COLLSCAN", None, 500),
    ]
    for filt, stage, name, docs in cases:
        plan, st = winning(db, filt)
        found = ixscan(plan)
        if stage == "IXSCAN":
            assert found and found[0]["indexName"] == name, (filt, plan)
            assert plan["stage"] == "FETCH"
        else:
            assert plan["stage"] == stage, (filt, plan)
        n = count(db.c, filt)
        assert st["nReturned"] == n
        if docs is not None:
            assert st["totalDocsExamined"] == docs, (filt, st)
    # $gt 5 on numbers stays within numbers: strings are not examined.
    db.c.insert_one({"_id": 1000, "c": "zzz"})
    plan, st = winning(db, {"c": {"$gt": 495}})
    assert st["totalDocsExamined"] == 4 and st["totalKeysExamined"] == 4
    # $or of indexed branches: a union, de-duplicated.
    plan, st = winning(db, {"$or": [{"a": 1}, {"c": {"$lt": 20}}]})
    assert plan["inputStage"]["stage"] == "OR"
    assert st["nReturned"] == count(db.c, {"$or": [{"a": 1}, {"c": {"$lt": 20}}]})
    assert st["totalDocsExamined"] == st["nReturned"]
    # Hints by name and key pattern.
    plan, _ = winning(db, {"a": 3}, hint="a_1_b_1")
    assert ixscan(plan)[0]["indexName"] == "a_1_b_1"
    plan, _ = winning(db, {"a": 3}, hint={"c": 1})
    assert ixscan(plan)[0]["indexName"] == "c_1"
    with pytest.raises(OperationFailure):
        list(db.c.find({"a": 3}).hint("nope_1"))


def test_sort_from_index(db):
    db.c.insert_many([{"_id": i, "a": (i * 37) % 100, "b": i % 5} for i in range(100)])
    db.c.create_index("a")
    db.c.create_index([("b", 1), ("a", -1)])
    plan, _ = winning(db, {}, sort={"a": 1})
    assert plan["stage"] != "SORT" and ixscan(plan)[0]["indexName"] == "a_1"
    assert [d["a"] for d in db.c.find().sort("a", 1)] == sorted(range(100))
    plan, _ = winning(db, {"a": {"$gt": 10}}, sort={"a": -1})
    assert plan["stage"] != "SORT" and ixscan(plan)[0]["direction"] == "backward"
    assert [d["a"] for d in db.c.find({"a": {"$gt": 10}}).sort("a", -1)] == list(range(99, 10, -1))
    plan, _ = winning(db, {"b": 2}, sort={"a": -1})
    assert plan["stage"] != "SORT" and ixscan(plan)[0]["indexName"] == "b_1_a_-1"
    got = [d["a"] for d in db.c.find({"b": 2}).sort("a", -1)]
    assert got == sorted(got, reverse=True) and len(got) == 20
    got = [d["_id"] for d in db.c.find({"a": {"$gte": 50}}).sort("a", 1).skip(3).limit(5)]
    want = [d["_id"] for d in sorted(db.c.find({"a": {"$gte": 50}}).hint({"$natural": 1}), key=lambda d: d["a"])][3:8]
    assert got == want


def test_results_equal_with_and_without_hint(db):
    rnd = random.Random(7)
    docs = []
    for i in range(400):
        d = {"_id": i, "a": rnd.randint(0, 20), "b": rnd.choice(["x", "y", "z", 1, 2.5, None])}
        if rnd.random() < 0.2:
            d["t"] = [rnd.randint(0, 5) for _ in range(rnd.randint(0, 3))]
        if rnd.random() < 0.1:
            del d["a"]
        docs.append(d)
    db.c.insert_many(docs)
    db.c.create_index([("a", 1), ("b", -1)])
    db.c.create_index("t")
    db.c.create_index("b")
    db.c.create_index([("a", -1)])
    db.c.create_index("t.0")
    filters = [
        {"a": 5, "b": {"$gt": 1}}, {"a": 5, "b": {"$lte": "y"}}, {"a": {"$lt": 4}},
        {"a": {"$gte": 4, "$lt": 7}}, {"b": {"$gt": 1, "$lt": 3}}, {"a": {"$in": [3, 4]}, "b": "x"},
        {"a": 5}, {"a": {"$gt": 15}}, {"a": {"$lte": 3}, "b": "x"}, {"a": {"$in": [1, 2, 3]}},
        {"b": {"$gte": 1}}, {"b": {"$lt": "y"}}, {"t": 3}, {"t": {"$in": [0, 5]}},
        {"$or": [{"a": 1}, {"t": 2}]}, {"a": {"$gt": 5, "$lt": 9}, "b": {"$in": ["x", 1]}},
        {"t": {"$gt": 1, "$lt": 3}}, {"a": None}, {"b": None},
        {"a": {"$gt": MinKey()}}, {"b": {"$lt": MaxKey()}}, {"t.0": 2}, {"t.0": {"$gte": 3}},
    ]
    for f in filters:
        want = sorted(d["_id"] for d in db.c.find(f).hint({"$natural": 1}))
        got = sorted(d["_id"] for d in db.c.find(f))
        assert got == want, f
        for h in ("a_1_b_-1", "t_1", "b_1", "a_-1"):
            hinted = [d["_id"] for d in db.c.find(f).hint(h)]
            assert len(hinted) == len(set(hinted)), (f, h)
        for srt in ([("a", -1)], [("a", 1), ("b", -1)], [("a", -1), ("b", 1)]):
            fs = [k for k, _ in srt]  # ties may come in any order: compare the sort keys
            want = [tuple(d.get(k) for k in fs) for d in db.c.find(f).sort(srt).hint({"$natural": 1})]
            got = [tuple(d.get(k) for k in fs) for d in db.c.find(f).sort(srt)]
            assert got == want, (f, srt)
    # Index maintenance across updates and deletes keeps index reads equal to full scans.
    for i in range(200):
        db.c.update_one({"_id": rnd.randrange(400)}, {"$set": {"a": rnd.randint(0, 20)}})
        if rnd.random() < 0.3:
            db.c.delete_one({"_id": rnd.randrange(400)})
        if rnd.random() < 0.3:
            db.c.update_one({"_id": rnd.randrange(400)}, {"$push": {"t": rnd.randint(0, 5)}})
    for f in filters:
        want = sorted(d["_id"] for d in db.c.find(f).hint({"$natural": 1}))
        assert sorted(d["_id"] for d in db.c.find(f)) == want, f


def test_drop_and_rename_keep_indexes(db, client):
    db.c.insert_many([{"_id": i, "a": i} for i in range(20)])
    db.c.create_index("a", unique=True)
    client.admin.command("renameCollection", f"{db.name}.c", to=f"{db.name}.r")
    assert [i["name"] for i in db.r.list_indexes()] == ["_id_", "a_1"]
    with pytest.raises(DuplicateKeyError):
        db.r.insert_one({"a": 3})
    plan, _ = db_plan(db, "r", {"a": 3})
    assert ixscan(plan)[0]["indexName"] == "a_1"
    db.r.drop()
    db.r.insert_one({"a": 3})
    assert [i["name"] for i in db.r.list_indexes()] == ["_id_"]


def test_indexes_survive_restart():
    from conftest import Siltd
    s = Siltd().start()
    try:
        c = s.client()
        coll = c.t.c
        coll.insert_many([{"_id": i, "a": i % 5, "tags": [i, i + 1]} for i in range(50)])
        coll.create_index("a")
        coll.create_index("tags", unique=False)
        c.close()
        s.stop()
        s.start()
        c = s.client()
        coll = c.t.c
        assert [i["name"] for i in coll.list_indexes()] == ["_id_", "a_1", "tags_1"]
        assert sorted(d["_id"] for d in coll.find({"a": 2})) == [2, 7, 12, 17, 22, 27, 32, 37, 42, 47]
        assert sorted(d["_id"] for d in coll.find({"tags": 10})) == [9, 10]
        r = c.t.command("explain", {"find": "c", "filter": {"tags": 10}})
        assert r["queryPlanner"]["winningPlan"]["inputStage"]["isMultiKey"] is True
        c.close()
    finally:
        s.cleanup()


def test_hints_on_writes_and_count(db):
    db.c.insert_many([{"_id": i, "a": i % 4} for i in range(40)])
    db.c.create_index("a")
    assert db.c.update_many({"a": 1}, {"$set": {"x": 1}}, hint="a_1").modified_count == 10
    assert db.command("count", "c", query={"a": 2}, hint="a_1")["n"] == 10
    with pytest.raises(OperationFailure):
        db.c.update_one({"a": 1}, {"$set": {"x": 2}}, hint="nope_1")
    with pytest.raises(OperationFailure):
        db.command("count", "c", query={"a": 2}, hint="nope_1")
    assert db.c.delete_many({"a": 3}, hint={"a": 1}).deleted_count == 10
    assert db.command("count", "c", query={"a": 3})["n"] == 0
    assert db.c.find_one_and_update({"a": 0}, {"$set": {"y": 1}}, hint="a_1", sort=[("_id", -1)])["_id"] == 36


def test_cursor_explain_and_id_index(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(10)])
    db.c.create_index("a")
    assert db.c.create_index("_id") == "_id_1"  # the _id index exists already
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_", "a_1"]
    e = db.c.find({"a": {"$gte": 7}}).explain()
    assert e["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "a_1"
    assert e["executionStats"]["nReturned"] == 3
    assert e["executionStats"]["totalKeysExamined"] == 3


def test_fast_updates_respect_indexes(db):
    def upd(q, u, **kw):
        return db.command("update", "c", updates=[dict({"q": q, "u": u}, **kw)], fastUpdate=True)

    db.c.insert_many([{"_id": i, "a": i, "n": 0, "p": 1} for i in range(5)])
    db.c.create_index("a")
    db.c.create_index("q", partialFilterExpression={"p": {"$gt": 0}})
    assert "fastUpdates" in upd({"_id": 1}, {"$inc": {"n": 1}})  # touches no indexed field
    assert "fastUpdates" not in upd({"_id": 1}, {"$set": {"a": 50}})  # indexed field
    assert "fastUpdates" not in upd({"_id": 1}, {"$set": {"p": 0}})  # read by a partial filter
    assert [d["_id"] for d in db.c.find({"a": 50})] == [1]
    # An upsert would create a document the non-sparse index must hold: normal path.
    r = upd({"_id": 77}, {"$set": {"n": 1}}, upsert=True)
    assert "fastUpdates" not in r
    assert [d["_id"] for d in db.c.find({"a": None}).hint("a_1")] == [77]
    # A clustering index carries whole documents: never the fast path.
    db.c.create_index("k", clustering=True)
    assert "fastUpdates" not in upd({"_id": 2}, {"$inc": {"n": 1}})
    assert db.c.find_one({"k": None, "_id": 2}, hint="k_1")["n"] == 1
