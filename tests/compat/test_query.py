"""Query operators with arrays, nested documents and MongoDB's type rules."""
import re

import pytest
from bson import Int64, Regex
from pymongo.errors import OperationFailure

DOCS = [
    {"_id": 1, "a": 5, "s": "apple", "arr": [1, 2, 3], "sub": {"x": 1, "y": [10, 20]}},
    {"_id": 2, "a": 10, "s": "Banana", "arr": [4, 5], "sub": {"x": 2}},
    {"_id": 3, "a": "10", "s": "cherry", "arr": [], "objs": [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}]},
    {"_id": 4, "a": None, "arr": [[1, 2], 3], "objs": [{"k": 2, "v": "a"}]},
    {"_id": 5, "s": "apricot", "arr": 7, "sub": {"x": 1, "y": 20}},
    {"_id": 6, "a": 7.5, "arr": [1, "x", None], "tags": ["red", "blue"]},
]


@pytest.fixture()
def c(db):
    db.q.insert_many(DOCS)
    return db.q


def ids(c, f):
    return sorted(d["_id"] for d in c.find(f))


CASES = [
    ({"a": 5}, [1]),
    ({"a": {"$eq": 10}}, [2]),
    ({"a": {"$ne": 10}}, [1, 3, 4, 5, 6]),
    ({"a": {"$gt": 5}}, [2, 6]),
    ({"a": {"$gte": 5}}, [1, 2, 6]),
    ({"a": {"$lt": 10}}, [1, 6]),
    ({"a": {"$lte": "10"}}, [3]),
    ({"a": {"$in": [5, "10"]}}, [1, 3]),
    ({"a": {"$nin": [5, 10]}}, [3, 4, 5, 6]),
    ({"a": None}, [4, 5]),
    ({"a": {"$exists": False}}, [5]),
    ({"a": {"$exists": True}}, [1, 2, 3, 4, 6]),
    ({"a": {"$type": "string"}}, [3]),
    ({"a": {"$type": "number"}}, [1, 2, 6]),
    ({"a": {"$type": 10}}, [4]),
    ({"arr": 2}, [1]),  # nested arrays are not searched
    ({"arr": [1, 2]}, [4]),
    ({"arr": {"$size": 2}}, [2, 4]),
    ({"arr": {"$size": 0}}, [3]),
    ({"arr": {"$all": [1, 3]}}, [1]),
    ({"arr": {"$elemMatch": {"$gt": 3, "$lt": 5}}}, [2]),
    ({"arr": {"$gt": 4}}, [2, 5]),
    ({"sub.x": 1}, [1, 5]),
    ({"sub.y": 20}, [1, 5]),
    ({"sub.y.1": 20}, [1]),
    ({"objs.k": 2}, [3, 4]),
    ({"objs": {"$elemMatch": {"k": 2, "v": "a"}}}, [4]),
    ({"objs.k": 2, "objs.v": "a"}, [3, 4]),
    ({"s": {"$regex": "^ap"}}, [1, 5]),
    ({"s": {"$regex": "^b", "$options": "i"}}, [2]),
    ({"s": re.compile("rr")}, [3]),
    ({"s": {"$in": [re.compile("^ch"), "apple"]}}, [1, 3]),
    ({"s": {"$not": re.compile("^a")}}, [2, 3, 4, 6]),
    ({"a": {"$not": {"$gt": 5}}}, [1, 3, 4, 5]),
    ({"a": {"$mod": [5, 0]}}, [1, 2]),
    ({"$or": [{"a": 5}, {"s": "cherry"}]}, [1, 3]),
    ({"$and": [{"sub.x": 1}, {"s": {"$exists": True}}]}, [1, 5]),
    ({"$nor": [{"a": 5}, {"a": 10}]}, [3, 4, 5, 6]),
    ({"tags": "red"}, [6]),
    ({"$expr": {"$gt": ["$a", 6]}}, [2, 3, 6]),
    ({"a": Int64(10)}, [2]),
    ({"a": 10.0}, [2]),
]


@pytest.mark.parametrize("flt,want", CASES, ids=[str(i) for i in range(len(CASES))])
def test_operator(c, flt, want):
    assert ids(c, flt) == want


def test_bad_filters(c):
    for bad, code in [
        ({"a": {"$foo": 1}}, 2),
        ({"a": {"$in": 5}}, 2),
        ({"$or": []}, 2),
        ({"$and": 1}, 2),
    ]:
        with pytest.raises(OperationFailure) as e:
            list(c.find(bad))
        assert e.value.code == code, bad
