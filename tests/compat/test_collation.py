"""Collation (ICU4X): strength, caseLevel, caseFirst, numericOrdering, alternate on find, count,
distinct, aggregate, update, delete and findAndModify; cursors keep their collation across
getMore; indexes give the same answers as scans; bad specs get MongoDB's errors."""
import pytest
from pymongo.collation import Collation
from pymongo.errors import OperationFailure

CI = Collation(locale="en", strength=2)
WORDS = ["apple", "Apple", "APPLE", "äpple", "banana", "Banana", "cherry", "item10", "item9", "item1"]


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def seed(db, index=False):
    if index:
        db.w.create_index("s")
    db.w.insert_many([{"_id": i, "s": s, "n": i % 3} for i, s in enumerate(WORDS)])


@pytest.mark.parametrize("index", [False, True])
def test_find_count_distinct(db, index):
    seed(db, index)
    assert sorted(d["_id"] for d in db.w.find({"s": "apple"}, collation=CI)) == [0, 1, 2]
    assert [d["_id"] for d in db.w.find({"s": "apple"})] == [0]
    # Strength 1 ignores accents too.
    assert db.w.count_documents({"s": "apple"}, collation=Collation(locale="en", strength=1)) == 4
    assert db.w.count_documents({"s": {"$in": ["BANANA", "x"]}}, collation=CI) == 2
    assert db.w.count_documents({"s": {"$gt": "b", "$lt": "c"}}, collation=CI) == 2
    assert db.command("count", "w", query={"s": "APPLE"}, collation=CI.document)["n"] == 3
    got = db.w.distinct("s", {"s": {"$lt": "c"}}, collation=CI)
    assert len(got) == 3 and {g.lower() for g in got} == {"apple", "äpple", "banana"}
    # Sorting by the locale's rules: case differences after letters, digits numerically.
    en = Collation(locale="en")
    assert [d["s"] for d in db.w.find({"s": {"$regex": "^[aA]"}}).sort("s", 1).collation(en)] == ["apple", "Apple", "APPLE"]
    upper = Collation(locale="en", caseFirst="upper")
    assert [d["s"] for d in db.w.find({"s": {"$regex": "^[aA]"}}).sort("s", 1).collation(upper)] == ["APPLE", "Apple", "apple"]
    num = Collation(locale="en", numericOrdering=True)
    assert [d["s"] for d in db.w.find({"s": {"$regex": "^item"}}).sort("s", 1).collation(num)] == ["item1", "item9", "item10"]
    assert [d["s"] for d in db.w.find({"s": {"$regex": "^item"}}).sort("s", 1)] == ["item1", "item10", "item9"]
    # A getMore keeps comparing under the cursor's collation.
    cur = db.w.find({"s": {"$gte": "apple", "$lte": "banana"}}, batch_size=2, collation=CI).sort("_id", 1)
    assert [d["_id"] for d in cur] == [0, 1, 2, 3, 4, 5]


def test_aggregate_update_delete_find_and_modify(db):
    seed(db)
    out = list(db.w.aggregate([{"$match": {"s": {"$lt": "c"}}}, {"$group": {"_id": "$s", "k": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
                              collation=CI))
    assert [(o["_id"].lower(), o["k"]) for o in out] == [("apple", 3), ("äpple", 1), ("banana", 2)]
    out = list(db.w.aggregate([{"$project": {"eq": {"$eq": ["$s", "APPLE"]}}}, {"$match": {"eq": True}}], collation=CI))
    assert sorted(o["_id"] for o in out) == [0, 1, 2]
    r = db.w.update_many({"s": "banana"}, {"$set": {"hit": True}}, collation=CI)
    assert r.matched_count == 2
    r = db.w.update_one({"s": "CHERRY"}, {"$set": {"hit": True}}, collation=CI)
    assert r.modified_count == 1
    d = db.w.find_one_and_update({"s": "ÄPPLE"}, {"$set": {"fam": 1}}, collation=CI, return_document=True)
    assert d["_id"] == 3 and d["fam"] == 1
    # $addToSet compares under the collation too.
    db.w.update_one({"_id": 0}, {"$set": {"tags": ["Red"]}})
    db.w.update_one({"_id": 0}, {"$addToSet": {"tags": "red"}}, collation=CI)
    assert db.w.find_one({"_id": 0})["tags"] == ["Red"]
    assert db.w.delete_many({"s": "apple"}, collation=CI).deleted_count == 3
    assert db.w.count_documents({}) == len(WORDS) - 3


def test_string_ids_and_fast_updates(db):
    db.u.insert_many([{"_id": "abc", "n": 0}, {"_id": "ABC", "n": 0}])
    assert db.u.count_documents({"_id": "abc"}, collation=CI) == 2
    r = db.command("update", "u", updates=[{"q": {"_id": "Abc"}, "u": {"$inc": {"n": 1}}, "multi": True, "collation": CI.document}],
                   fastUpdate=True)
    assert r["n"] == 2 and "fastUpdates" not in r
    assert [d["n"] for d in db.u.find().sort("_id", 1)] == [1, 1]


def test_explain_and_errors(db):
    seed(db, index=True)
    r = db.command("explain", {"find": "w", "filter": {"s": "apple"}, "collation": CI.document}, verbosity="executionStats")
    assert r["executionStats"]["nReturned"] == 3
    # A simple-collation index bounds numbers under any collation, never strings.
    db.w.create_index("n")
    r = db.command("explain", {"find": "w", "filter": {"n": 1}, "collation": CI.document})
    assert "IXSCAN" in str(r["queryPlanner"]["winningPlan"])
    r = db.command("explain", {"find": "w", "filter": {"s": "apple"}, "collation": CI.document})
    assert "IXSCAN" not in str(r["queryPlanner"]["winningPlan"])
    r = db.command("explain", {"find": "w", "filter": {"s": "apple"}})
    assert "IXSCAN" in str(r["queryPlanner"]["winningPlan"])
    assert code_of(lambda: list(db.w.find({}, collation={"locale": "xx"}))) == 2
    assert code_of(lambda: list(db.w.find({}, collation={"locale": "en", "strength": 9}))) == 9
    assert code_of(lambda: list(db.w.find({}, collation={"locale": "en", "bogus": 1}))) == 9
    assert code_of(lambda: list(db.w.find({}, collation={"strength": 2}))) == 40414
    assert code_of(lambda: list(db.w.find({}, collation={"locale": "en", "strength": 1, "caseFirst": "upper"}))) == 2
    assert code_of(lambda: list(db.w.find({}, collation={"locale": "simple", "strength": 1}))) == 9
    # The simple collation is the binary one.
    assert db.w.count_documents({"s": "apple"}, collation={"locale": "simple"}) == 1


def test_collated_index(db):
    """An index with a collation: listed with its resolved collation, used only by queries of
    the same collation (answers equal to a scan's), unique under the collation, sorted by it."""
    db.w.create_index("s", name="s_ci", collation=CI.document)
    db.w.create_index("s", name="s_bin")
    spec = [i for i in db.w.list_indexes() if i["name"] == "s_ci"][0]
    assert spec["collation"]["locale"] == "en" and spec["collation"]["strength"] == 2
    assert spec["collation"]["caseFirst"] == "off" and spec["collation"]["version"] == "57.1"
    seed(db)
    for q in [{"s": "apple"}, {"s": {"$in": ["APPLE", "cherry"]}}, {"s": {"$gte": "b", "$lt": "c"}}, {"s": {"$regex": "^a"}},
              {"n": 1, "s": {"$gt": "apple"}}]:
        hinted = sorted(d["_id"] for d in db.w.find(q, collation=CI).hint("s_ci"))
        scanned = sorted(d["_id"] for d in db.w.find(q, collation=CI).hint({"$natural": 1}))
        assert hinted == scanned, q
        plan = db.w.find(q, collation=CI).explain()["queryPlanner"]["winningPlan"]
        if "$regex" not in str(q):
            assert "s_ci" in str(plan), (q, plan)
        plan = db.w.find(q).explain()["queryPlanner"]["winningPlan"]
        assert "s_ci" not in str(plan), (q, plan)
        # Without a collation, the same predicates answer bytewise.
        binary = sorted(d["_id"] for d in db.w.find(q).hint({"$natural": 1}))
        assert sorted(d["_id"] for d in db.w.find(q)) == binary
    # The index provides the collation's order.
    got = [d["s"] for d in db.w.find({"s": {"$gte": "a", "$lt": "c"}}, {"_id": 0, "s": 1}, collation=CI).sort("s", 1)]
    assert [g.lower() for g in got] == ["apple"] * 3 + ["äpple", "banana", "banana"]
    # A unique index under strength 2: "Bob" and "bob" are the same key.
    db.users.create_index("name", unique=True, collation=CI.document)
    db.users.insert_one({"name": "Bob"})
    with pytest.raises(OperationFailure) as e:
        db.users.insert_one({"name": "bob"})
    assert e.value.code == 11000
    db.users.insert_one({"name": "Bób"})
    # Two indexes on one key differ by collation; the same collation twice is the same index.
    assert code_of(lambda: db.w.create_index("s", name="other", collation=CI.document)) == 85
    assert code_of(lambda: db.w.create_index("s", collation={"locale": "en", "strength": 0})) == 9
    assert code_of(lambda: db.w.create_index("_id", name="idc", collation=CI.document)) == 2


def test_collated_index_survives_restart():
    from conftest import Siltd
    s = Siltd().start()
    try:
        c = s.client()
        db = c.t_coll_restart
        db.c.create_index("s", collation=CI.document, unique=True)
        db.c.insert_many([{"_id": 1, "s": "x"}, {"_id": 2, "s": "Y"}])
        c.close()
        s.kill9()
        s.start()
        c = s.client()
        db = c.t_coll_restart
        assert [i.get("collation", {}).get("strength") for i in db.c.list_indexes()] == [None, 2]
        assert [d["_id"] for d in db.c.find({"s": "y"}, collation=CI).hint("s_1")] == [2]
        with pytest.raises(OperationFailure):
            db.c.insert_one({"s": "X"})
        c.close()
    finally:
        s.stop()


def test_collection_default_collation(db):
    """`create` with a collation: the default of its commands, its indexes and its `_id`."""
    db.create_collection("p", collation=CI.document)
    opts = [c for c in db.list_collections() if c["name"] == "p"][0]["options"]
    assert opts["collation"]["locale"] == "en" and opts["collation"]["strength"] == 2
    db.p.insert_many([{"_id": "Ann", "s": "x"}, {"_id": "bob", "s": "X"}, {"_id": 3, "s": "y"}])
    # `_id`s equal under the collation collide.
    assert code_of(lambda: db.p.insert_one({"_id": "ANN"})) == 11000
    assert db.p.find_one({"_id": "ann"})["_id"] == "Ann"
    assert db.p.find_one({"_id": 3})["s"] == "y"
    # Commands without a collation use the default; an explicit one (simple too) wins.
    assert db.p.count_documents({"s": "x"}) == 2
    assert db.p.count_documents({"s": "x"}, collation={"locale": "simple"}) == 1
    assert db.p.distinct("s") in (["x", "y"], ["X", "y"])
    assert db.p.update_many({"s": "X"}, {"$set": {"t": 1}}).modified_count == 2
    assert db.p.delete_one({"_id": "BOB"}).deleted_count == 1
    assert db.p.count_documents({}) == 2
    # Indexes inherit it, `_id_` included; an explicit simple index stays simple.
    db.p.create_index("s")
    db.p.create_index("t", collation={"locale": "simple"})
    ix = {i["name"]: i for i in db.p.list_indexes()}
    assert list(ix) == ["_id_", "s_1", "t_1"]
    assert ix["_id_"]["collation"]["strength"] == 2 and ix["s_1"]["collation"]["strength"] == 2
    assert "collation" not in ix["t_1"]
    plan = db.p.find({"s": "X"}).explain()["queryPlanner"]["winningPlan"]
    assert "s_1" in str(plan)
    assert [d["_id"] for d in db.p.find({"s": "X"}).hint("s_1")] == ["Ann"]
    # A validator compares under the default collation.
    db.create_collection("v", collation=CI.document, validator={"kind": {"$in": ["a", "b"]}})
    db.v.insert_one({"kind": "A"})
    with pytest.raises(OperationFailure) as e:
        db.v.insert_one({"kind": "c"})
    assert e.value.code == 121
    # A view's collation: its reads run under it, another one is refused, views on it share it.
    db.w.insert_many([{"_id": i, "s": s} for i, s in enumerate(["a", "A", "b"])])
    db.create_collection("wv", viewOn="w", pipeline=[], collation=CI.document)
    assert db.wv.count_documents({"s": "a"}) == 2
    assert sorted(d["_id"] for d in db.wv.find({"s": "A"})) == [0, 1]
    assert db.wv.distinct("s") in (["a", "b"], ["A", "b"])
    opts = [c for c in db.list_collections() if c["name"] == "wv"][0]["options"]
    assert opts["collation"]["strength"] == 2
    assert code_of(lambda: list(db.wv.find({}, collation={"locale": "fr"}))) == 167
    assert code_of(lambda: db.create_collection("wv2", viewOn="wv", pipeline=[])) == 167
    db.create_collection("wv3", viewOn="wv", pipeline=[], collation=CI.document)
    assert db.wv3.count_documents({"s": "B"}) == 1
    # mongorestore recreates the collection with its collation and `_id` index.
    db.command("create", "r", collation=CI.document, idIndex={"v": 2, "key": {"_id": 1}, "name": "_id_", "collation": CI.document})
    assert code_of(lambda: db.command("create", "r2", idIndex={"v": 2, "key": {"_id": 1}, "name": "_id_", "collation": CI.document})) == 2  # BadValue, as mongod


def test_collection_collation_survives_restart():
    from conftest import Siltd
    s = Siltd().start()
    try:
        c = s.client()
        c.t_cdef.create_collection("p", collation=CI.document)
        c.t_cdef.p.insert_one({"_id": "a", "s": "Q"})
        c.close()
        s.kill9()
        s.start()
        c = s.client()
        db = c.t_cdef
        assert db.p.count_documents({"s": "q"}) == 1
        assert code_of(lambda: db.p.insert_one({"_id": "A"})) == 11000
        c.close()
    finally:
        s.stop()
