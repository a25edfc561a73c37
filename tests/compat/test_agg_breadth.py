"""Aggregation breadth: $setWindowFields, the N accumulators ($topN, $firstN, ...), $median and
$percentile, and the array expressions $firstN/$lastN/$maxN/$minN/$sortArray. Expected
documents follow MongoDB 7.0's documented results."""
import datetime

import pytest
from pymongo.errors import OperationFailure


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def seed(db):
    db.s.insert_many([{"_id": i, "st": "CA" if i % 2 else "WA", "q": i * 10,
                       "d": datetime.datetime(2024, 1, 1 + i)} for i in range(6)])


def test_set_window_fields(db):
    seed(db)
    out = list(db.s.aggregate([
        {"$setWindowFields": {"partitionBy": "$st", "sortBy": {"q": 1}, "output": {
            "cum": {"$sum": "$q", "window": {"documents": ["unbounded", "current"]}},
            "tot": {"$sum": "$q"},
            "avg3": {"$avg": "$q", "window": {"documents": [-1, 1]}},
            "rk": {"$rank": {}},
            "dn": {"$documentNumber": {}},
            "prev": {"$shift": {"output": "$q", "by": -1, "default": "none"}},
            "r": {"$push": "$q", "window": {"range": [-20, 0]}},
        }}},
        {"$project": {"d": 0, "st": 0}},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [
        {"_id": 0, "q": 0, "cum": 0, "tot": 60, "avg3": 10.0, "rk": 1, "dn": 1, "prev": "none", "r": [0]},
        {"_id": 1, "q": 10, "cum": 10, "tot": 90, "avg3": 20.0, "rk": 1, "dn": 1, "prev": "none", "r": [10]},
        {"_id": 2, "q": 20, "cum": 20, "tot": 60, "avg3": 20.0, "rk": 2, "dn": 2, "prev": 0, "r": [0, 20]},
        {"_id": 3, "q": 30, "cum": 40, "tot": 90, "avg3": 30.0, "rk": 2, "dn": 2, "prev": 10, "r": [10, 30]},
        {"_id": 4, "q": 40, "cum": 60, "tot": 60, "avg3": 30.0, "rk": 3, "dn": 3, "prev": 20, "r": [20, 40]},
        {"_id": 5, "q": 50, "cum": 90, "tot": 90, "avg3": 40.0, "rk": 3, "dn": 3, "prev": 30, "r": [30, 50]},
    ]
    # A date range with a unit.
    out = list(db.s.aggregate([{"$setWindowFields": {"sortBy": {"d": 1}, "output": {
        "n": {"$count": {}, "window": {"range": [-2, 0], "unit": "day"}}}}}, {"$project": {"n": 1}}]))
    assert [d["n"] for d in out] == [1, 2, 3, 3, 3, 3]
    # Ties share a rank; $denseRank leaves no gaps; $locf carries the last value forward.
    db.t.insert_many([{"_id": 1, "v": 5, "x": 1}, {"_id": 2, "v": 5}, {"_id": 3, "v": 7, "x": None}, {"_id": 4, "v": 9, "x": 4}])
    out = list(db.t.aggregate([{"$setWindowFields": {"sortBy": {"v": 1}, "output": {
        "r": {"$rank": {}}, "dr": {"$denseRank": {}}, "lx": {"$locf": "$x"}}}}]))
    assert [(d["r"], d["dr"], d["lx"]) for d in out] == [(1, 1, 1), (1, 1, 1), (3, 2, 1), (4, 3, 4)]
    assert code_of(lambda: list(db.t.aggregate([{"$setWindowFields": {"output": {"r": {"$rank": {}}}}}]))) == 9
    # $expMovingAvg needs N or alpha (the window functions: test_window_fns.py).
    assert code_of(lambda: list(db.t.aggregate([{"$setWindowFields": {"sortBy": {"v": 1}, "output": {
        "e": {"$expMovingAvg": {"input": "$v"}}}}}]))) == 9


def test_n_accumulators(db):
    seed(db)
    out = list(db.s.aggregate([{"$group": {
        "_id": "$st",
        "top2": {"$topN": {"n": 2, "sortBy": {"q": -1}, "output": "$q"}},
        "bottom": {"$bottom": {"sortBy": {"q": 1}, "output": "$_id"}},
        "top": {"$top": {"sortBy": {"q": 1}, "output": ["$_id", "$q"]}},
        "first2": {"$firstN": {"n": 2, "input": "$q"}},
        "last2": {"$lastN": {"n": 2, "input": "$q"}},
        "max2": {"$maxN": {"n": 2, "input": "$q"}},
        "min2": {"$minN": {"n": 2, "input": "$q"}},
        "med": {"$median": {"input": "$q", "method": "approximate"}},
        "pct": {"$percentile": {"input": "$q", "p": [0.5, 0.9], "method": "approximate"}},
    }}, {"$sort": {"_id": 1}}]))
    assert out == [
        {"_id": "CA", "top2": [50, 30], "bottom": 5, "top": [1, 10], "first2": [10, 30], "last2": [30, 50],
         "max2": [50, 30], "min2": [10, 30], "med": 30.0, "pct": [30.0, 50.0]},
        {"_id": "WA", "top2": [40, 20], "bottom": 4, "top": [0, 0], "first2": [0, 20], "last2": [20, 40],
         "max2": [40, 20], "min2": [0, 20], "med": 20.0, "pct": [20.0, 40.0]},
    ]
    assert code_of(lambda: list(db.s.aggregate([{"$group": {"_id": 1, "x": {"$firstN": {"n": 0, "input": "$q"}}}}]))) == 5787908
    assert code_of(lambda: list(db.s.aggregate([{"$group": {"_id": 1, "x": {"$topN": {"n": 1, "output": "$q"}}}}]))) == 5788005


def test_array_n_expressions(db):
    db.c.insert_one({"_id": 1})
    out = list(db.c.aggregate([{"$project": {"_id": 0,
        "a": {"$firstN": {"n": 2, "input": [3, 1, 2]}},
        "b": {"$lastN": {"n": 2, "input": [3, 1, 2]}},
        "c": {"$maxN": {"n": 2, "input": [3, 1, None, 2]}},
        "d": {"$minN": {"n": 2, "input": [3, 1, None, 2]}},
        "e": {"$sortArray": {"input": [{"x": 2}, {"x": 1}], "sortBy": {"x": 1}}},
        "f": {"$sortArray": {"input": [3, 1, 2], "sortBy": -1}},
    }}]))
    assert out == [{"a": [3, 1], "b": [1, 2], "c": [3, 2], "d": [1, 2], "e": [{"x": 1}, {"x": 2}], "f": [3, 2, 1]}]


def test_expressions_in_find_projections(db):
    db.c.insert_one({"_id": 1, "a": 2, "b": [1, 2, 3], "n": {"x": 1, "y": 2}})
    assert db.c.find_one({}, {"x": {"$add": ["$a", 1]}}) == {"_id": 1, "x": 3}
    assert db.c.find_one({}, {"a": 1, "y": "$b"}) == {"_id": 1, "a": 2, "y": [1, 2, 3]}
    assert db.c.find_one({}, {"_id": 0, "s": "abc", "z": {"$literal": "$b"}}) == {"s": "abc", "z": "$b"}
    assert db.c.find_one({}, {"n": {"x": 1, "t": {"$size": "$b"}}}) == {"_id": 1, "n": {"x": 1, "t": 3}}
    assert db.c.find_one_and_update({"_id": 1}, {"$inc": {"a": 1}}, projection={"v": {"$multiply": ["$a", 10]}},
                                    return_document=True) == {"_id": 1, "v": 30}
    with pytest.raises(OperationFailure) as e:
        db.c.find_one({}, {"a": 0, "x": {"$add": [1, 1]}})
    assert e.value.code == 31310


def test_date_arithmetic(db):
    db.c.insert_one({"_id": 1, "d": datetime.datetime(2024, 1, 31, 15, 30), "e": datetime.datetime(2024, 3, 2, 1, 0)})
    out = list(db.c.aggregate([{"$project": {"_id": 0,
        "add1m": {"$dateAdd": {"startDate": "$d", "unit": "month", "amount": 1}},
        "add2h": {"$dateAdd": {"startDate": "$d", "unit": "hour", "amount": 2}},
        "sub1y": {"$dateSubtract": {"startDate": "$d", "unit": "year", "amount": 1}},
        "diffd": {"$dateDiff": {"startDate": "$d", "endDate": "$e", "unit": "day"}},
        "diffm": {"$dateDiff": {"startDate": "$d", "endDate": "$e", "unit": "month"}},
        "diffw": {"$dateDiff": {"startDate": "$d", "endDate": "$e", "unit": "week"}},
        "tm": {"$dateTrunc": {"date": "$d", "unit": "month"}},
        "th": {"$dateTrunc": {"date": "$d", "unit": "hour", "binSize": 2}},
        "tw": {"$dateTrunc": {"date": "$d", "unit": "week", "startOfWeek": "monday"}},
        "tz": {"$dateTrunc": {"date": "$d", "unit": "day", "timezone": "+10:00"}},
        "nul": {"$dateAdd": {"startDate": None, "unit": "day", "amount": 1}},
    }}]))
    D = datetime.datetime
    assert out == [{"add1m": D(2024, 2, 29, 15, 30), "add2h": D(2024, 1, 31, 17, 30), "sub1y": D(2023, 1, 31, 15, 30),
                    "diffd": 31, "diffm": 2, "diffw": 4, "tm": D(2024, 1, 1), "th": D(2024, 1, 31, 14),
                    "tw": D(2024, 1, 29), "tz": D(2024, 1, 31, 14), "nul": None}]
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$project": {"x": {"$dateAdd": {"startDate": "$d", "unit": "fortnight", "amount": 1}}}}]))
    assert e.value.code == 5439014


def test_graph_lookup_and_bucket_auto(db):
    db.emp.insert_many([
        {"_id": 1, "name": "Dev"}, {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
        {"_id": 3, "name": "Ron", "reportsTo": "Eliot"}, {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
        {"_id": 5, "name": "Asya", "reportsTo": "Ron"}, {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
    ])
    out = list(db.emp.aggregate([
        {"$graphLookup": {"from": "emp", "startWith": "$reportsTo", "connectFromField": "reportsTo",
                          "connectToField": "name", "as": "chain", "depthField": "lvl"}},
        {"$project": {"chain": {"$map": {"input": "$chain", "in": ["$$this.name", "$$this.lvl"]}}}},
    ]))
    assert out == [
        {"_id": 1, "chain": []},
        {"_id": 2, "chain": [["Dev", 0]]},
        {"_id": 3, "chain": [["Eliot", 0], ["Dev", 1]]},
        {"_id": 4, "chain": [["Eliot", 0], ["Dev", 1]]},
        {"_id": 5, "chain": [["Ron", 0], ["Eliot", 1], ["Dev", 2]]},
        {"_id": 6, "chain": [["Andrew", 0], ["Eliot", 1], ["Dev", 2]]},
    ]
    out = list(db.emp.aggregate([
        {"$graphLookup": {"from": "emp", "startWith": "$name", "connectFromField": "name",
                          "connectToField": "reportsTo", "as": "r", "maxDepth": 0,
                          "restrictSearchWithMatch": {"name": {"$ne": "Andrew"}}}},
        {"$project": {"n": {"$size": "$r"}}},
    ]))
    assert [d["n"] for d in out] == [1, 1, 1, 1, 0, 0]
    db.b.insert_many([{"_id": i, "p": p} for i, p in enumerate([5, 1, 9, 3, 3, 7, 2, 8, 6, 4])])
    out = list(db.b.aggregate([{"$bucketAuto": {"groupBy": "$p", "buckets": 3, "output": {"n": {"$sum": 1}, "ps": {"$push": "$p"}}}}]))
    assert out == [
        {"_id": {"min": 1, "max": 4}, "n": 4, "ps": [1, 2, 3, 3]},
        {"_id": {"min": 4, "max": 7}, "n": 3, "ps": [4, 5, 6]},
        {"_id": {"min": 7, "max": 9}, "n": 3, "ps": [7, 8, 9]},
    ]
    # granularity: test_window_fns.py; an unknown series is refused.
    with pytest.raises(OperationFailure) as e:
        list(db.b.aggregate([{"$bucketAuto": {"groupBy": "$p", "buckets": 2, "granularity": "R3"}}]))
    assert e.value.code == 40257


def test_fill_and_densify(db):
    db.s.insert_many([{"_id": 1, "t": 1, "v": 10, "g": "a"}, {"_id": 2, "t": 2, "g": "a"},
                      {"_id": 3, "t": 3, "v": None, "g": "a"}, {"_id": 4, "t": 4, "v": 40, "g": "a"},
                      {"_id": 5, "t": 1, "g": "b"}])
    out = list(db.s.aggregate([{"$fill": {"sortBy": {"t": 1}, "partitionByFields": ["g"], "output": {"v": {"method": "linear"}}}},
                               {"$project": {"v": 1}}]))
    assert out == [{"_id": 1, "v": 10}, {"_id": 2, "v": 20.0}, {"_id": 3, "v": 30.0}, {"_id": 4, "v": 40}, {"_id": 5}]
    out = list(db.s.aggregate([{"$fill": {"sortBy": {"t": 1}, "partitionBy": "$g", "output": {"v": {"method": "locf"}}}},
                               {"$project": {"v": 1}}]))
    assert out == [{"_id": 1, "v": 10}, {"_id": 2, "v": 10}, {"_id": 3, "v": 10}, {"_id": 4, "v": 40}, {"_id": 5}]
    out = list(db.s.aggregate([{"$fill": {"output": {"v": {"value": 0}}}}, {"$project": {"v": 1}}]))
    assert [d["v"] for d in out] == [10, 0, 0, 40, 0]
    db.d.insert_many([{"_id": 1, "x": 1, "k": "a"}, {"_id": 2, "x": 5, "k": "a"}, {"_id": 3, "x": 3, "k": "b"}])
    out = list(db.d.aggregate([{"$densify": {"field": "x", "range": {"step": 1, "bounds": "full"}}}, {"$project": {"_id": 0}}]))
    assert out == [{"x": 1, "k": "a"}, {"x": 2}, {"x": 3, "k": "b"}, {"x": 4}, {"x": 5, "k": "a"}]
    out = list(db.d.aggregate([{"$densify": {"field": "x", "partitionByFields": ["k"], "range": {"step": 2, "bounds": "partition"}}},
                               {"$project": {"_id": 0}}]))
    assert out == [{"x": 1, "k": "a"}, {"k": "a", "x": 3}, {"x": 5, "k": "a"}, {"x": 3, "k": "b"}]
    out = list(db.d.aggregate([{"$densify": {"field": "x", "range": {"step": 2, "bounds": [0, 4]}}}, {"$project": {"_id": 0}}]))
    assert out == [{"x": 0}, {"x": 1, "k": "a"}, {"x": 2}, {"x": 3, "k": "b"}, {"x": 5, "k": "a"}]
    with pytest.raises(OperationFailure) as e:
        list(db.d.aggregate([{"$densify": {"field": "x", "range": {"step": 0, "bounds": "full"}}}]))
    assert e.value.code == 5733401


def test_regex_find_trig_and_bits(db):
    db.c.insert_one({"_id": 1, "s": "a1b22c333", "x": 0.5})
    out = list(db.c.aggregate([{"$project": {"_id": 0,
        "f": {"$regexFind": {"input": "$s", "regex": "([a-z])(\\d+)"}},
        "fa": {"$regexFindAll": {"input": "$s", "regex": "\\d+"}},
        "nf": {"$regexFind": {"input": "$s", "regex": "z"}},
        "sin": {"$sin": 0}, "d": {"$radiansToDegrees": 3.141592653589793}, "a2": {"$atan2": [1, 0]},
        "band": {"$bitAnd": [12, 10]}, "bor": {"$bitOr": [12, 10]}, "bx": {"$bitXor": [12, 10]}, "bn": {"$bitNot": 0},
        "bl": {"$bitOr": [{"$toLong": 1}, 2]},
    }}]))
    assert out == [{
        "f": {"match": "a1", "idx": 0, "captures": ["a", "1"]},
        "fa": [{"match": "1", "idx": 1, "captures": []}, {"match": "22", "idx": 3, "captures": []},
               {"match": "333", "idx": 6, "captures": []}],
        "nf": None, "sin": 0.0, "d": 180.0, "a2": 1.5707963267948966,
        "band": 8, "bor": 14, "bx": 6, "bn": -1, "bl": 3,
    }]
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$project": {"a": {"$acos": 2}}}]))
    assert e.value.code == 50989


def test_date_parts_and_strings(db):
    db.c.insert_one({"_id": 1, "d": datetime.datetime(2024, 2, 29, 13, 5, 7, 123000)})
    out = list(db.c.aggregate([{"$project": {"_id": 0,
        "fp": {"$dateFromParts": {"year": 2024, "month": 2, "day": 30}},
        "fp2": {"$dateFromParts": {"year": 2024, "month": 1, "day": 1, "hour": 12, "timezone": "+02:00"}},
        "tp": {"$dateToParts": {"date": "$d"}},
        "fs": {"$dateFromString": {"dateString": "2024-03-01T10:00:00Z"}},
        "fs2": {"$dateFromString": {"dateString": "2024-03-01T10:00:00", "timezone": "+01:00"}},
        "fe": {"$dateFromString": {"dateString": "nope", "onError": "bad"}},
        "fn": {"$dateFromString": {"dateString": None, "onNull": "null!"}},
    }}]))
    D = datetime.datetime
    assert out == [{"fp": D(2024, 3, 1), "fp2": D(2024, 1, 1, 10),
                    "tp": {"year": 2024, "month": 2, "day": 29, "hour": 13, "minute": 5, "second": 7, "millisecond": 123},
                    "fs": D(2024, 3, 1, 10), "fs2": D(2024, 3, 1, 9), "fe": "bad", "fn": "null!"}]
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$project": {"x": {"$dateFromString": {"dateString": "nope"}}}}]))
    assert e.value.code == 241


def test_olson_time_zones_and_iso_week_dates(db):
    import datetime
    db.d.insert_one({"_id": 1, "d": datetime.datetime(2026, 7, 1, 12, 0)})
    out = list(db.d.aggregate([{"$project": {
        "ny": {"$dateToString": {"date": "$d", "format": "%Y-%m-%d %H:%M %z", "timezone": "America/New_York"}},
        "tokyo_hour": {"$hour": {"date": "$d", "timezone": "Asia/Tokyo"}},
        "iso": {"$dateToParts": {"date": "$d", "iso8601": True}},
        "back": {"$dateFromParts": {"isoWeekYear": 2026, "isoWeek": 27, "isoDayOfWeek": 3, "hour": 14, "timezone": "Europe/Paris"}},
    }}]))[0]
    assert out["ny"] == "2026-07-01 08:00 -0400"
    assert out["tokyo_hour"] == 21
    assert out["iso"] == {"isoWeekYear": 2026, "isoWeek": 27, "isoDayOfWeek": 3, "hour": 12, "minute": 0, "second": 0, "millisecond": 0}
    assert out["back"] == datetime.datetime(2026, 7, 1, 12, 0)
    with pytest.raises(OperationFailure) as e:
        list(db.d.aggregate([{"$project": {"h": {"$hour": {"date": "$d", "timezone": "Nowhere/Special"}}}}]))
    assert e.value.code == 40485
    # $dateFromString with a format (an offset in the string wins over the timezone).
    out = list(db.d.aggregate([{"$project": {
        "a": {"$dateFromString": {"dateString": "15/06/2026 14:30", "format": "%d/%m/%Y %H:%M", "timezone": "Europe/Paris"}},
        "b": {"$dateFromString": {"dateString": "2026-166 09:00 +0100", "format": "%Y-%j %H:%M %z", "timezone": "Asia/Tokyo"}},
        "c": {"$dateFromString": {"dateString": "15.06.2026", "format": "%Y-%m-%d", "onError": "bad"}},
    }}]))[0]
    assert out["a"] == datetime.datetime(2026, 6, 15, 12, 30)
    assert out["b"] == datetime.datetime(2026, 6, 15, 8, 0)
    assert out["c"] == "bad"
    with pytest.raises(OperationFailure) as e:
        list(db.d.aggregate([{"$project": {"x": {"$dateFromString": {"dateString": "2026", "format": "%Q"}}}}]))
    assert e.value.code == 18536
