"""The write rules of the document layer hold whatever the entry point: a capped collection's
cap, the validator, the size and nesting limits, and unique indexes, through insert (one and
many, ordered or not), update, replace, upsert, findAndModify, bulk writes and `$merge`/`$out`.
Every test runs against a standalone siltd and against `--replSet rs0` with retryable
writes (conftest's BOTH_TOPOLOGIES), where every write runs in a transaction of its own.
Multi-document transactions refuse writes to capped collections, as mongod does."""
import pytest
from bson import SON
from pymongo import InsertOne, ReplaceOne, UpdateOne
from pymongo.errors import BulkWriteError, DocumentTooLarge, OperationFailure


def test_capped_by_count_trims_on_every_path(db):
    db.create_collection("c", capped=True, size=100000, max=3)
    for i in range(15):
        db.c.insert_one({"_id": i})
    assert [d["_id"] for d in db.c.find()] == [12, 13, 14]
    db.c.insert_many([{"_id": 100 + i} for i in range(5)])
    assert [d["_id"] for d in db.c.find()] == [102, 103, 104]
    db.c.update_one({"_id": 500}, {"$set": {"x": 1}}, upsert=True)
    db.c.bulk_write([InsertOne({"_id": 600}), UpdateOne({"_id": 700}, {"$set": {"y": 1}}, upsert=True)])
    db.c.find_one_and_update({"_id": 800}, {"$set": {"z": 1}}, upsert=True)
    assert [d["_id"] for d in db.c.find()] == [600, 700, 800]
    db.src.insert_many([{"_id": 900 + i} for i in range(4)])
    db.src.aggregate([{"$merge": {"into": "c"}}])
    assert db.c.count_documents({}) == 3
    assert [d["_id"] for d in db.c.find()] == [901, 902, 903]


def test_capped_by_size_trims(db):
    db.create_collection("small", capped=True, size=4096)
    for i in range(200):
        db.small.insert_one({"_id": i, "p": "x" * 100})
    ids = [d["_id"] for d in db.small.find()]
    assert ids == list(range(ids[0], 200))
    assert len(ids) < 40
    assert db.command("collStats", "small")["size"] <= 4096


def test_capped_writes_refused_in_multi_document_transaction(db, topology):
    if topology != "replset":
        pytest.skip("transactions need a replica set")
    db.create_collection("cap", capped=True, size=100000)
    db.cap.insert_one({"_id": 1, "a": 1})
    client = db.client
    refused = f"Collection '{db.name}.cap' is a capped collection. Writes in transactions are not allowed on capped collections."
    for write, code, msg in [
        (lambda c, s: c.insert_one({"_id": 2}, session=s), 263, refused),
        (lambda c, s: c.update_one({"_id": 1}, {"$set": {"a": 2}}, session=s), 263, refused),
        (lambda c, s: c.update_one({"_id": 9}, {"$set": {"a": 2}}, upsert=True, session=s), 263, refused),
        (lambda c, s: c.replace_one({"_id": 1}, {"a": 5}, session=s), 263, refused),
        (lambda c, s: c.find_one_and_update({"_id": 1}, {"$set": {"a": 3}}, session=s), 263, refused),
        (lambda c, s: c.delete_one({"_id": 1}, session=s),
         20, f"Cannot remove from a capped collection in a multi-document transaction: {db.name}.cap"),
    ]:
        with client.start_session() as s:
            s.start_transaction()
            with pytest.raises(OperationFailure) as e:
                write(db.cap, s)
            assert e.value.code == code, e.value.details
            assert msg in str(e.value), e.value.details
            with pytest.raises(OperationFailure) as e:
                s.commit_transaction()
            assert e.value.code == 251
    assert list(db.cap.find()) == [{"_id": 1, "a": 1}]
    # Reading a capped collection in a transaction is fine, as is writing another one.
    with client.start_session() as s:
        with s.start_transaction():
            assert db.cap.find_one({"_id": 1}, session=s) == {"_id": 1, "a": 1}
            db.plain.insert_one({"_id": 1}, session=s)
    assert db.plain.count_documents({}) == 1


def expect_code(fn, code):
    with pytest.raises((OperationFailure, BulkWriteError)) as e:
        fn()
    err = e.value
    if isinstance(err, BulkWriteError):
        got = err.details["writeErrors"][0]["code"]
    else:
        got = err.code
    assert got == code, err.details


def every_entry_point(db, coll, bad, seed):
    """Write `bad` (a document that breaks a rule) into `coll` through each entry point; each
    attempt must fail. `seed` is the `_id` of a valid document the updates rewrite."""
    c = db[coll]
    yield "insert_one", lambda: c.insert_one(dict(bad, _id="i1"))
    yield "insert_many unordered", lambda: c.insert_many([dict(bad, _id="i2")], ordered=False)
    yield "insert ignoreDuplicates", lambda: _insert_ignoring_dups(db, coll, dict(bad, _id="i3"))
    yield "replace_one", lambda: c.replace_one({"_id": seed}, bad)
    yield "update_one $set", lambda: c.update_one({"_id": seed}, {"$set": bad})
    yield "update pipeline", lambda: c.update_one({"_id": seed}, [{"$set": bad}])
    yield "upsert", lambda: c.update_one({"_id": "u1"}, {"$set": bad}, upsert=True)
    yield "replace upsert", lambda: c.replace_one({"_id": "u2"}, bad, upsert=True)
    yield "findAndModify", lambda: c.find_one_and_update({"_id": seed}, {"$set": bad})
    yield "findAndModify upsert", lambda: c.find_one_and_replace({"_id": "u3"}, bad, upsert=True)
    yield "bulk", lambda: c.bulk_write([ReplaceOne({"_id": seed}, bad)])
    yield "$merge", lambda: _merge(db, coll, dict(bad, _id="m1"))


def _insert_ignoring_dups(db, coll, d):
    r = db.command(SON([("insert", coll), ("documents", [d]), ("ignoreDuplicates", True)]))
    if r.get("writeErrors"):
        raise OperationFailure(r["writeErrors"][0]["errmsg"], r["writeErrors"][0]["code"], r)
    return r


def _merge(db, coll, d):
    src = db[coll + "_src"]
    src.drop()
    src.insert_one(d)
    src.aggregate([{"$merge": {"into": coll}}])


def test_validator_holds_on_every_entry_point(db):
    db.create_collection("v", validator={"n": {"$type": "int"}})
    db.v.insert_one({"_id": "seed", "n": 1})
    for name, write in every_entry_point(db, "v", {"n": "not an int"}, "seed"):
        expect_code(write, 121)
    assert list(db.v.find()) == [{"_id": "seed", "n": 1}]
    # bypassDocumentValidation lets the same writes through.
    db.v.insert_one({"_id": "b", "n": "x"}, bypass_document_validation=True)
    db.v.update_one({"_id": "seed"}, {"$set": {"n": "y"}}, bypass_document_validation=True)
    assert db.v.count_documents({"n": {"$type": "string"}}) == 2


def test_nesting_limit_holds_on_every_entry_point(db):
    deep = {}
    cur = deep
    for _ in range(120):
        cur["d"] = {}
        cur = cur["d"]
    db.n.insert_one({"_id": "seed"})
    for name, write in every_entry_point(db, "n", {"deep": deep}, "seed"):
        expect_code(write, 15)
    assert list(db.n.find()) == [{"_id": "seed"}]


def test_size_limit_holds_on_updates(db):
    db.s.insert_one({"_id": 1, "a": "x" * (9 << 20)})
    for write in [
        lambda: db.s.update_one({"_id": 1}, {"$set": {"b": "y" * (9 << 20)}}),
        lambda: db.s.update_one({"_id": 1}, [{"$set": {"b": {"$concat": ["$a", "$a"]}}}]),
        lambda: db.s.find_one_and_update({"_id": 1}, {"$set": {"b": "y" * (9 << 20)}}),
    ]:
        expect_code(write, 10334)
    with pytest.raises((DocumentTooLarge, OperationFailure)):
        db.s.insert_one({"_id": 2, "a": "x" * (17 << 20)})
    assert db.s.count_documents({}) == 1


def test_unique_index_holds_on_every_entry_point(db):
    db.u.create_index("k", unique=True)
    db.u.insert_many([{"_id": "seed", "k": 1}, {"_id": "other", "k": 2}])
    for name, write in every_entry_point(db, "u", {"k": 2}, "seed"):
        if name == "insert ignoreDuplicates":
            continue  # a duplicate is skipped, by request
        expect_code(write, 11000)
    assert db.u.count_documents({}) == 2
