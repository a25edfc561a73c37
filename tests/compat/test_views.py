"""Views: create with viewOn/pipeline, reads through every read command, refused writes,
listCollections, collMod, drop, and views surviving a restart."""
import pytest
from pymongo.errors import OperationFailure

from conftest import Siltd


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def seed(db):
    db.src.insert_many([{"_id": i, "g": i % 3, "v": i, "tags": ["a", "b"] if i % 2 else ["c"]} for i in range(10)])
    db.create_collection("big", viewOn="src", pipeline=[{"$match": {"v": {"$gte": 3}}}, {"$project": {"tags": 0}}])
    db.command("create", "big_g1", viewOn="big", pipeline=[{"$match": {"g": 1}}])


def test_reads_through_a_view(db):
    seed(db)
    assert list(db.big.find({"g": 0}, {"v": 1}).sort("v", -1).limit(2)) == [{"_id": 9, "v": 9}, {"_id": 6, "v": 6}]
    assert list(db.big.find().sort("v", 1).skip(5)) == [{"_id": 8, "g": 2, "v": 8}, {"_id": 9, "g": 0, "v": 9}]
    # A view on a view.
    assert list(db.big_g1.find()) == [{"_id": 4, "g": 1, "v": 4}, {"_id": 7, "g": 1, "v": 7}]
    assert db.big.count_documents({}) == 7
    assert db.big.count_documents({"g": 2}) == 2
    assert db.big.estimated_document_count() == 7
    assert db.command("count", "big", query={"g": 0})["n"] == 3
    assert db.big.distinct("g") == [0, 1, 2]
    assert db.big.distinct("v", {"g": 1}) == [4, 7]
    out = list(db.big.aggregate([{"$group": {"_id": "$g", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]))
    assert out == [{"_id": 0, "n": 3}, {"_id": 1, "n": 2}, {"_id": 2, "n": 2}]
    # Cursors over a view page with getMore.
    cur = db.big.find(batch_size=2)
    assert len(list(cur)) == 7
    # singleBatch: one batch and no cursor left open.
    r = db.command("find", "big", batchSize=2, singleBatch=True)
    assert len(r["cursor"]["firstBatch"]) == 2 and r["cursor"]["id"] == 0
    # The view follows its source.
    db.src.insert_one({"_id": 50, "g": 1, "v": 50})
    assert db.big_g1.count_documents({}) == 3


def test_views_are_read_only(db):
    seed(db)
    attempts = [
        lambda: db.big.insert_one({"x": 1}),
        lambda: db.big.update_one({}, {"$set": {"a": 1}}),
        lambda: db.big.delete_many({}),
        lambda: db.big.find_one_and_update({}, {"$set": {"a": 1}}),
        lambda: db.big.create_index("a"),
        lambda: list(db.src.aggregate([{"$out": "big"}])),
        lambda: list(db.src.aggregate([{"$merge": "big"}])),
    ]
    for a in attempts:
        assert code_of(a) == 166
    assert db.src.count_documents({}) == 10


def test_list_collmod_drop(db):
    seed(db)
    views = {c["name"]: c for c in db.list_collections() if c["type"] == "view"}
    assert set(views) == {"big", "big_g1"}
    assert views["big"]["options"] == {"viewOn": "src", "pipeline": [{"$match": {"v": {"$gte": 3}}}, {"$project": {"tags": 0}}]}
    assert views["big"]["info"] == {"readOnly": True}
    assert {c["name"] for c in db.list_collections(filter={"type": "view"})} == {"big", "big_g1"}
    db.command("collMod", "big", viewOn="src", pipeline=[{"$match": {"v": {"$lt": 2}}}])
    assert [d["_id"] for d in db.big.find()] == [0, 1]
    assert [d["_id"] for d in db.big_g1.find()] == [1]
    assert code_of(lambda: db.command("collMod", "big", pipeline=[])) == 72
    db.big_g1.drop()
    assert "big_g1" not in db.list_collection_names()
    # Errors of create.
    assert code_of(lambda: db.command("create", "big", viewOn="src", pipeline=[{"$match": {"x": 1}}])) == 48
    assert code_of(lambda: db.command("create", "src", viewOn="big")) == 48
    assert code_of(lambda: db.command("create", "w", viewOn="src", pipeline=[{"$out": "x"}])) == 167
    assert code_of(lambda: db.command("create", "w", viewOn="src", capped=True)) == 72
    assert code_of(lambda: db.command("create", "w", viewOn="src", pipeline=[{"$bogus": 1}])) == 40324
    # A cycle.
    db.command("create", "c1", viewOn="c2")
    assert code_of(lambda: db.command("create", "c2", viewOn="c1")) == 5


def test_views_survive_a_restart():
    s = Siltd().start()
    try:
        c = s.client()
        db = c.vr
        db.src.insert_many([{"_id": i, "v": i} for i in range(5)])
        db.create_collection("odd", viewOn="src", pipeline=[{"$match": {"v": {"$mod": [2, 1]}}}])
        c.close()
        s.kill9()
        s.start()
        c = s.client()
        assert [d["_id"] for d in c.vr.odd.find()] == [1, 3]
        assert code_of(lambda: c.vr.odd.insert_one({})) == 166
        c.vr.odd.drop()
        c.close()
        s.stop()
        s.start()
        c = s.client()
        assert "odd" not in c.vr.list_collection_names()
        c.close()
    finally:
        s.cleanup()
