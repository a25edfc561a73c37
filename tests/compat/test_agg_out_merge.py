"""$out, $merge, $documents and $listLocalSessions (MongoDB 7.0 behaviour)."""
import pytest
from pymongo.errors import OperationFailure


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def seed(db):
    db.src.insert_many([{"_id": i, "g": i % 3, "v": i} for i in range(9)])


def test_out_replaces_target_and_keeps_its_indexes(db):
    seed(db)
    db.dst.insert_one({"_id": "old"})
    db.dst.create_index("n")
    assert list(db.src.aggregate([{"$group": {"_id": "$g", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}, {"$out": "dst"}])) == []
    assert list(db.dst.find().sort("_id", 1)) == [{"_id": 0, "n": 3}, {"_id": 1, "n": 3}, {"_id": 2, "n": 3}]
    assert sorted(ix["name"] for ix in db.dst.list_indexes()) == ["_id_", "n_1"]
    # Into another database, with the object form.
    other = db.client[db.name + "_other"]
    db.src.aggregate([{"$match": {"g": 0}}, {"$out": {"db": other.name, "coll": "copy"}}])
    assert [d["_id"] for d in other.copy.find().sort("_id", 1)] == [0, 3, 6]
    db.client.drop_database(other.name)
    # $out to the collection being read.
    db.src.aggregate([{"$match": {"v": {"$lt": 2}}}, {"$out": "src"}])
    assert [d["_id"] for d in db.src.find()] == [0, 1]
    assert not any(n.startswith("tmp.agg_out") for n in db.list_collection_names())


def test_out_failure_leaves_old_target_intact(db):
    seed(db)
    db.dst.insert_many([{"_id": "keep1"}, {"_id": "keep2"}])
    # The pipeline fails halfway through its input ($toInt of a non-number).
    db.src.insert_one({"_id": 100, "g": "x", "v": "not a number"})
    assert code_of(lambda: list(db.src.aggregate([{"$project": {"n": {"$toInt": "$v"}}}, {"$out": "dst"}]))) == 241
    # Writing the output fails halfway (a duplicate _id).
    assert code_of(lambda: list(db.src.aggregate([{"$project": {"_id": "$g"}}, {"$out": "dst"}]))) == 11000
    assert [d["_id"] for d in db.dst.find().sort("_id", 1)] == ["keep1", "keep2"]
    assert not any(n.startswith("tmp.agg_out") for n in db.list_collection_names())


def test_out_errors(db):
    seed(db)
    assert code_of(lambda: list(db.src.aggregate([{"$out": "x"}, {"$match": {}}]))) == 40601
    assert code_of(lambda: list(db.src.aggregate([{"$facet": {"a": [{"$out": "x"}]}}]))) in (40600, 238, 40601)
    assert code_of(lambda: list(db.src.aggregate([{"$out": "system.x"}]))) == 73
    assert code_of(lambda: list(db.src.aggregate([{"$out": 5}]))) == 16990


def test_merge_modes(db):
    seed(db)
    db.dst.insert_many([{"_id": 0, "old": True, "v": -1}, {"_id": 1, "old": True}])
    # Defaults: on _id, merge, insert.
    db.src.aggregate([{"$match": {"_id": {"$lt": 3}}}, {"$merge": "dst"}])
    assert list(db.dst.find().sort("_id", 1)) == [
        {"_id": 0, "old": True, "v": 0, "g": 0},
        {"_id": 1, "old": True, "g": 1, "v": 1},
        {"_id": 2, "g": 2, "v": 2},
    ]
    db.src.aggregate([{"$match": {"_id": 0}}, {"$project": {"v": 1}},
                      {"$merge": {"into": "dst", "whenMatched": "replace"}}])
    assert db.dst.find_one({"_id": 0}) == {"_id": 0, "v": 0}
    db.src.aggregate([{"$set": {"v": 99}}, {"$merge": {"into": "dst", "whenMatched": "keepExisting", "whenNotMatched": "discard"}}])
    assert db.dst.count_documents({}) == 3 and db.dst.count_documents({"v": 99}) == 0
    db.src.aggregate([{"$merge": {"into": "dst", "whenMatched": [{"$set": {"total": {"$add": ["$v", "$$new.v", "$$k"]}}}],
                                  "let": {"k": 1000, "new": "$$ROOT"}, "whenNotMatched": "discard"}}])
    assert [d.get("total") for d in db.dst.find().sort("_id", 1)] == [1000, 1002, 1004]
    # whenNotMatched: fail, whenMatched: fail.
    assert code_of(lambda: db.src.aggregate([{"$merge": {"into": "dst", "whenNotMatched": "fail"}}])) == 13113
    assert code_of(lambda: db.src.aggregate([{"$match": {"_id": 1}}, {"$merge": {"into": "dst", "whenMatched": "fail"}}])) == 11000


def test_merge_on_fields_need_a_unique_index(db):
    db.src.insert_many([{"_id": 1, "k": "a", "n": 1}, {"_id": 2, "k": "b", "n": 2}])
    db.dst.insert_one({"_id": 50, "k": "a", "n": 0})
    assert code_of(lambda: db.src.aggregate([{"$merge": {"into": "dst", "on": "k"}}])) == 51183
    db.dst.create_index("k", unique=True)
    db.src.aggregate([{"$project": {"_id": 0}}, {"$merge": {"into": "dst", "on": "k"}}])
    assert sorted((d["k"], d["n"]) for d in db.dst.find()) == [("a", 1), ("b", 2)]
    assert db.dst.find_one({"k": "a"})["_id"] == 50
    # A document without the on field.
    db.src.insert_one({"_id": 3})
    assert code_of(lambda: db.src.aggregate([{"$project": {"_id": 0}}, {"$merge": {"into": "dst", "on": "k"}}])) == 51132


def test_documents_and_collectionless(db, client):
    out = list(db.aggregate([{"$documents": [{"a": 1}, {"a": 2}, {"a": 3}]}, {"$match": {"a": {"$gte": 2}}},
                             {"$project": {"_id": 0, "b": {"$multiply": ["$a", 10]}}}]))
    assert out == [{"b": 20}, {"b": 30}]
    seed(db)
    out = list(db.src.aggregate([{"$match": {"_id": 0}}, {"$project": {"_id": 1}},
                                 {"$unionWith": {"pipeline": [{"$documents": [{"_id": "x"}]}]}}]))
    assert out == [{"_id": 0}, {"_id": "x"}]
    out = list(db.src.aggregate([{"$match": {"_id": 1}}, {"$project": {"_id": 1}},
                                 {"$lookup": {"pipeline": [{"$documents": [{"k": 1}, {"k": 2}]}], "as": "j"}}]))
    assert out == [{"_id": 1, "j": [{"k": 1}, {"k": 2}]}]
    assert code_of(lambda: list(db.aggregate([{"$match": {}}]))) == 73
    assert code_of(lambda: list(db.src.aggregate([{"$documents": []}]))) == 73
    assert code_of(lambda: list(db.aggregate([{"$documents": 5}]))) == 5858203
    # $documents then $out.
    db.aggregate([{"$documents": [{"_id": 1, "z": 1}]}, {"$out": "fromdocs"}])
    assert list(db.fromdocs.find()) == [{"_id": 1, "z": 1}]
    sessions = list(client.admin.aggregate([{"$listLocalSessions": {}}, {"$limit": 1},
                                            {"$addFields": {"dummy": "dummy field"}}, {"$project": {"_id": 0, "dummy": 1}}]))
    assert sessions == [{"dummy": "dummy field"}]
    s = list(client.admin.aggregate([{"$listLocalSessions": {"allUsers": True}}]))[0]
    assert set(s) == {"_id", "lastUse"} and set(s["_id"]) == {"id", "uid"}
