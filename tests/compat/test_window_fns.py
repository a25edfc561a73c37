"""$setWindowFields window functions beyond the accumulators: $derivative, $integral,
$expMovingAvg, $covariancePop/$covarianceSamp, $linearFill (values worked out by hand)."""
import datetime

import pytest
from pymongo.errors import OperationFailure

V = [0, 10, 30, 60, 100]


def approx(xs):
    return [None if x is None else pytest.approx(x) for x in xs]


def run(db, output, sort=None):
    stage = {"output": output}
    if sort is not None:
        stage["sortBy"] = sort
    return list(db.s.aggregate([{"$setWindowFields": stage}, {"$sort": {"t": 1}}]))


def test_rates_averages_covariance_fill(db):
    db.s.insert_many([{"_id": i, "t": i + 1, "v": v, "w": [1, None, None, 7, None][i]} for i, v in enumerate(V)])
    out = run(db, {"d": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}},
                   "i": {"$integral": {"input": "$v"}, "window": {"documents": [-1, 0]}},
                   "total": {"$integral": {"input": "$v"}},
                   "e": {"$expMovingAvg": {"input": "$v", "N": 2}},
                   "cp": {"$covariancePop": ["$t", "$v"]},
                   "cs": {"$covarianceSamp": ["$t", "$v"]},
                   "f": {"$linearFill": "$w"}}, {"t": 1})
    assert [o["d"] for o in out] == approx([None, 10, 20, 30, 40])
    assert [o["i"] for o in out] == approx([0, 5, 20, 45, 80])
    assert [o["total"] for o in out] == approx([150] * 5)
    e, want = 0.0, []
    for i, v in enumerate(V):
        e = v if i == 0 else 2 / 3 * v + 1 / 3 * e
        want.append(e)
    assert [o["e"] for o in out] == approx(want)
    assert [o["cp"] for o in out] == approx([50] * 5)
    assert [o["cs"] for o in out] == approx([62.5] * 5)
    assert [o["f"] for o in out] == approx([1, 3, 5, 7, None])


def test_date_axis_and_errors(db):
    base = datetime.datetime(2026, 1, 1)
    db.s.insert_many([{"_id": i, "t": base + datetime.timedelta(hours=i), "v": v} for i, v in enumerate(V)])
    out = run(db, {"d": {"$derivative": {"input": "$v", "unit": "hour"}, "window": {"range": [-1, 0], "unit": "hour"}}}, {"t": 1})
    assert [o["d"] for o in out] == approx([None, 10, 20, 30, 40])
    for bad in [{"d": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}}},   # a date axis needs a unit
                {"d": {"$derivative": {"input": "$v", "unit": "hour"}}},                     # explicit window needed
                {"e": {"$expMovingAvg": {"input": "$v"}}}]:
        with pytest.raises(OperationFailure):
            run(db, bad, {"t": 1})
    with pytest.raises(OperationFailure):
        run(db, {"f": {"$linearFill": "$v"}})  # needs a sortBy


def test_bucket_auto_granularity(db):
    db.p.insert_many([{"_id": i, "price": p} for i, p in enumerate([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20])])
    out = list(db.p.aggregate([{"$bucketAuto": {"groupBy": "$price", "buckets": 4, "granularity": "R5"}}]))
    bounds = [(o["_id"]["min"], o["_id"]["max"], o["count"]) for o in out]
    # Boundaries on the R5 series (1.0, 1.6, 2.5, 4.0, 6.3, 10, 16, 25, ...), contiguous,
    # each count complete.
    assert sum(b[2] for b in bounds) == 20
    for (lo, hi, _), (lo2, _, _) in zip(bounds, bounds[1:]):
        assert hi == lo2
    series = [v * m for m in (0.01, 0.1, 1, 10, 100) for v in (10, 16, 25, 40, 63)]
    assert all(any(abs(x - s) < 1e-9 for s in series) for b in bounds for x in b[:2])
    assert bounds[0][0] == pytest.approx(0.63) and bounds[-1][1] == pytest.approx(25)
    out = list(db.p.aggregate([{"$bucketAuto": {"groupBy": "$price", "buckets": 3, "granularity": "POWERSOF2"}}]))
    # 1..7 -> [0.5, 8), 8..15 -> [8, 16), 16..20 -> [16, 32): integers stay integers.
    assert [(o["_id"]["min"], o["_id"]["max"], o["count"]) for o in out] == [(0.5, 8, 7), (8, 16, 8), (16, 32, 5)]
    with pytest.raises(OperationFailure) as e:
        list(db.p.aggregate([{"$bucketAuto": {"groupBy": "$price", "buckets": 3, "granularity": "R7"}}]))
    assert e.value.code == 40257
    db.p.insert_one({"price": -1})
    with pytest.raises(OperationFailure) as e:
        list(db.p.aggregate([{"$bucketAuto": {"groupBy": "$price", "buckets": 3, "granularity": "R5"}}]))
    assert e.value.code == 40260
