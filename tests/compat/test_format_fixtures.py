"""Data directories written by earlier releases (`crates/silt-collection/tests/fixtures/format-v*`,
made by `make.py` there; `docs/format.md` section 13) open in today's siltd, read through a
real driver: every document, index, count and `validate` answer is what the fixture's writes
made, and new writes survive a restart.

`format-v3` holds what node layout 3 brought: versioned entries from a committed transaction,
fast-update messages, and a transaction still open when the server was killed (recovery
aborts it); it is a replica-set member's directory, so it also holds an oplog."""
import os
import shutil
import tempfile

import pytest
from pymongo.errors import DuplicateKeyError

from conftest import Siltd

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "silt-collection", "tests",
                        "fixtures")


def expected():
    out = []
    for i in range(300):
        if 250 <= i < 260:
            continue
        d = {"_id": i, "a": i % 7, "s": f"s{i}", "arr": [i, i + 1]}
        if i % 10 == 0:
            d["u"] = True
        out.append(d)
    return out


@pytest.fixture(params=["format-v1", "format-v2", "format-v3"])
def fixture_server(request):
    tmp = tempfile.mkdtemp(prefix="silt-fixture-")
    dbpath = os.path.join(tmp, "db")
    shutil.copytree(os.path.join(FIXTURES, request.param), dbpath)
    extra = ["--replSet", "rs0"] if request.param == "format-v3" else []
    s = Siltd(dbpath=dbpath, extra=extra).start()
    try:
        yield request.param, s
    finally:
        s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_fixture_opens_with_every_answer(fixture_server):
    version, s = fixture_server
    c = s.client(directConnection=True)
    coll = c.fx.docs
    want = expected()
    assert list(coll.find().sort("_id", 1)) == want, version
    assert sorted(ix["name"] for ix in coll.list_indexes()) == ["_id_", "a_1", "s_1_a_-1"]
    v = c.fx.command("validate", "docs", full=True)
    assert v["valid"], v
    assert v["nrecords"] == 290
    assert all(n == 290 for n in v["keysPerIndex"].values()), v["keysPerIndex"]
    # Counts, by every path a count takes: the whole collection, index ranges, `_id` ranges,
    # with a matcher on an unindexed field, and through the aggregation `$count`.
    assert coll.count_documents({}) == 290
    for a in range(7):
        assert coll.count_documents({"a": a}) == sum(d["a"] == a for d in want)
    assert coll.count_documents({"a": {"$gte": 2, "$lt": 5}}) == sum(2 <= d["a"] < 5 for d in want)
    assert coll.count_documents({"_id": {"$gte": 100, "$lt": 280}}) == sum(
        100 <= d["_id"] < 280 for d in want)
    assert coll.count_documents({"a": 3, "u": True}) == sum(d["a"] == 3 and "u" in d for d in want)
    assert list(coll.aggregate([{"$match": {"s": {"$gte": "s2"}}}, {"$count": "n"}])) == [
        {"n": sum(d["s"] >= "s2" for d in want)}]
    # The unique index still holds, and new writes survive a restart.
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 1000, "a": 3, "s": "s3"})
    coll.insert_one({"_id": 1001, "a": 1, "s": "new"})
    if version == "format-v3":
        # The member's oplog came along: the fixture's writes are in it.
        assert c.local["oplog.rs"].count_documents({"ns": "fx.docs"}) > 0
    c.close()
    s.stop()
    s.start()
    c = s.client(directConnection=True)
    assert c.fx.docs.count_documents({}) == 291
    assert c.fx.docs.find_one({"_id": 1001})["s"] == "new"
    assert c.fx.command("validate", "docs", full=True)["valid"]
    c.close()
