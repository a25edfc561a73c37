"""Aggregation stages and expressions through pymongo."""
import pytest
from pymongo.errors import OperationFailure

SALES = [
    {"_id": 1, "item": "abc", "price": 10, "qty": 2, "tags": ["a", "b"], "cust": "x"},
    {"_id": 2, "item": "jkl", "price": 20, "qty": 1, "tags": ["b"], "cust": "y"},
    {"_id": 3, "item": "xyz", "price": 5, "qty": 10, "tags": [], "cust": "x"},
    {"_id": 4, "item": "xyz", "price": 5, "qty": 20, "cust": "z"},
    {"_id": 5, "item": "abc", "price": 10, "qty": 10, "tags": ["c"], "cust": "y"},
]


@pytest.fixture()
def sales(db):
    db.sales.insert_many(SALES)
    db.custs.insert_many([{"_id": "x", "name": "Xena"}, {"_id": "y", "name": "Yuri"}])
    return db.sales


def test_match_project_sort_limit_skip(sales):
    out = list(sales.aggregate([
        {"$match": {"price": {"$lt": 15}}},
        {"$project": {"_id": 0, "item": 1, "total": {"$multiply": ["$price", "$qty"]}}},
        {"$sort": {"total": -1, "item": 1}},
        {"$skip": 1},
        {"$limit": 2},
    ]))
    assert out == [{"item": "xyz", "total": 100}, {"item": "xyz", "total": 50}]


def test_group_accumulators(sales):
    out = list(sales.aggregate([
        {"$group": {
            "_id": "$item",
            "n": {"$sum": 1},
            "qty": {"$sum": "$qty"},
            "avg": {"$avg": "$price"},
            "lo": {"$min": "$qty"},
            "hi": {"$max": "$qty"},
            "first": {"$first": "$_id"},
            "last": {"$last": "$_id"},
            "all": {"$push": "$qty"},
            "custs": {"$addToSet": "$cust"},
        }},
        {"$sort": {"_id": 1}},
    ]))
    assert [g["_id"] for g in out] == ["abc", "jkl", "xyz"]
    abc = out[0]
    assert abc["n"] == 2 and abc["qty"] == 12 and abc["avg"] == 10
    assert (abc["lo"], abc["hi"], abc["first"], abc["last"]) == (2, 10, 1, 5)
    assert abc["all"] == [2, 10] and sorted(abc["custs"]) == ["x", "y"]
    total = list(sales.aggregate([{"$group": {"_id": None, "q": {"$sum": "$qty"}, "c": {"$count": {}}}}]))
    assert total == [{"_id": None, "q": 43, "c": 5}]


def test_unwind_count_sort_by_count(sales):
    tags = list(sales.aggregate([{"$unwind": "$tags"}, {"$sortByCount": "$tags"}]))
    assert tags[0] == {"_id": "b", "count": 2}
    assert list(sales.aggregate([{"$unwind": "$tags"}, {"$count": "n"}])) == [{"n": 4}]
    keep = list(sales.aggregate([
        {"$unwind": {"path": "$tags", "preserveNullAndEmptyArrays": True, "includeArrayIndex": "i"}},
        {"$count": "n"}]))
    assert keep == [{"n": 6}]


def test_add_fields_set_unset_replace_root(sales):
    out = sales.aggregate([
        {"$match": {"_id": 2}},
        {"$addFields": {"total": {"$multiply": ["$price", "$qty"]}}},
        {"$set": {"label": {"$concat": ["$item", "-", {"$toString": "$total"}]}}},
        {"$unset": ["tags", "cust"]},
        {"$replaceRoot": {"newRoot": {"l": "$label", "t": "$total"}}},
    ])
    assert list(out) == [{"l": "jkl-20", "t": 20}]


def test_lookup(sales, db):
    out = list(sales.aggregate([
        {"$match": {"_id": {"$in": [1, 4]}}},
        {"$lookup": {"from": "custs", "localField": "cust", "foreignField": "_id", "as": "c"}},
        {"$project": {"c.name": 1}},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [{"_id": 1, "c": [{"name": "Xena"}]}, {"_id": 4, "c": []}]


def test_count_documents_and_coll_stats(sales, db):
    assert sales.count_documents({}) == 5
    assert sales.count_documents({"item": "abc"}) == 2
    assert sales.count_documents({"qty": {"$gte": 10}}, skip=1, limit=1) == 1
    st = list(sales.aggregate([{"$collStats": {"storageStats": {}, "count": {}}}]))[0]
    assert st["count"] == 5 and st["storageStats"]["count"] == 5
    assert "size" in st["storageStats"] and "totalIndexSize" in st["storageStats"]


def test_large_result_uses_get_more(db):
    db.big.insert_many([{"_id": i, "g": i % 7} for i in range(5000)])
    out = list(db.big.aggregate([{"$match": {"g": 3}}], batchSize=50))
    assert len(out) == len([i for i in range(5000) if i % 7 == 3])


def test_aggregate_errors(sales):
    with pytest.raises(OperationFailure) as e:
        list(sales.aggregate([{"$frob": {}}]))
    assert e.value.code == 40324
    with pytest.raises(OperationFailure) as e:
        list(sales.aggregate([{"$project": {"x": {"$frob": 1}}}]))
    assert e.value.code == 31325
    with pytest.raises(OperationFailure) as e:
        list(sales.aggregate([{"$group": {"n": {"$sum": 1}}}]))
    assert e.value.code == 15955
    with pytest.raises(OperationFailure) as e:
        list(sales.aggregate([{"$project": {"x": {"$add": ["$item", 1]}}}]))
    assert e.value.code == 14
