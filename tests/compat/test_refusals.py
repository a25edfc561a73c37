"""What siltd does not implement is refused with MongoDB's error, never ignored."""
import pytest
from bson import Int64
from pymongo.errors import OperationFailure


def test_with_transaction_fails_and_writes_nothing(client, db):
    db.c.insert_one({"_id": 0})

    def body(session):
        db.c.insert_one({"_id": 1}, session=session)
        db.c.update_one({"_id": 0}, {"$set": {"x": 1}}, session=session)

    with client.start_session() as s:
        with pytest.raises(OperationFailure) as e:
            s.with_transaction(body)
    assert e.value.code == 20
    assert "Transaction numbers are only allowed on a replica set member or mongos" in str(e.value)
    assert list(db.c.find()) == [{"_id": 0}]


def test_bare_transaction_fails_and_writes_nothing(client, db):
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            db.c.insert_many([{"_id": 1}, {"_id": 2}], session=s)
        assert e.value.code == 20
        s.abort_transaction()
    assert db.c.count_documents({}) == 0


def test_session_fields_without_transaction_number(db):
    with pytest.raises(OperationFailure) as e:
        db.command("insert", "c", documents=[{"_id": 1}], autocommit=False)
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.command("insert", "c", documents=[{"_id": 1}], startTransaction=True)
    assert e.value.code == 72
    # A repeated txnNumber (a retried write) runs nothing either time.
    for _ in range(2):
        with pytest.raises(OperationFailure) as e:
            db.command({"insert": "c", "documents": [{"_id": 1}], "txnNumber": Int64(1),
                        "lsid": {"id": __import__("uuid").uuid4()}})
        assert e.value.code == 20
    with pytest.raises(OperationFailure) as e:
        db.client.admin.command("commitTransaction")
    assert e.value.code == 125
    assert db.c.count_documents({}) == 0


def test_collation_options_not_implemented(db):
    """Collation works on commands, indexes and collections (test_collation.py); what it
    cannot do is refused by name."""
    attempts = [
        # ICU4X takes backward secondary weights from the locale only.
        lambda: list(db.c.find({}, collation={"locale": "en", "backwards": True})),
    ]
    for attempt in attempts:
        with pytest.raises(OperationFailure) as e:
            attempt()
        assert e.value.code == 238, e.value.details
        assert "backwards" in str(e.value) or "collation" in str(e.value)
    assert "v" not in db.list_collection_names()


def test_unknown_and_unimplemented_fields(db):
    db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", foo=1)
    assert e.value.code == 40415
    assert e.value.details["codeName"] == "Location40415"
    assert "BSON field 'FindCommandRequest.foo' is an unknown field." in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("update", "c", updates=[{"q": {}, "u": {"$set": {"a": 1}}, "bogus": 1}])
    assert e.value.code == 40415 and "update.updates.bogus" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", returnKey=True)
    assert e.value.code == 238 and "returnKey" in str(e.value)
    # Defaults of unimplemented flags are fine; noCursorTimeout is honoured.
    assert db.command("find", "c", returnKey=False, showRecordId=False)["ok"] == 1
    db.c.insert_many([{"_id": 2}, {"_id": 3}])
    r = db.command("find", "c", noCursorTimeout=True, batchSize=1)
    assert r["cursor"]["firstBatch"] == [{"_id": 1}] and r["cursor"]["id"] != 0
    more = db.command("getMore", r["cursor"]["id"], collection="c", batchSize=10)
    assert more["cursor"]["nextBatch"] == [{"_id": 2}, {"_id": 3}]
    # Snapshot and linearizable reads need a replica set, as on mongod (123 NotAReplicaSet).
    for level in ("snapshot", "linearizable"):
        with pytest.raises(OperationFailure) as e:
            db.command("find", "c", readConcern={"level": level})
        assert e.value.code == 123
    assert db.command("find", "c", readConcern={"level": "majority"})["ok"] == 1
    assert db.c.find_one({"_id": 1}) == {"_id": 1}


def test_list_commands_is_the_dispatch_table(client):
    cmds = client.admin.command("listCommands")["commands"]
    for name in ("find", "insert", "compact", "aggregate", "listCommands"):
        assert name in cmds
    scratch = client["t_listcmds"]
    for name in cmds:
        if name in ("configureFailPoint", "dropDatabase", "killOp", "shutdown"):
            continue
        try:
            scratch.command(name)
        except OperationFailure as e:
            assert e.code != 59, name
    client.drop_database("t_listcmds")


def test_index_stats(db):
    db.c.create_index("a")
    db.c.insert_many([{"_id": i, "a": i % 10} for i in range(100)])
    for _ in range(3):
        list(db.c.find({"a": 3}))
    db.c.find_one({"_id": 5})
    stats = {d["name"]: d for d in db.c.aggregate([{"$indexStats": {}}])}
    assert set(stats) == {"_id_", "a_1"}
    a = stats["a_1"]
    assert set(a) == {"name", "key", "host", "accesses", "spec"}
    assert a["key"] == {"a": 1} and a["spec"]["name"] == "a_1"
    assert isinstance(a["accesses"]["ops"], int) and a["accesses"]["ops"] >= 3
    assert stats["_id_"]["accesses"]["ops"] >= 1
    # Documents are never what $indexStats yields.
    assert all("_id" not in d for d in stats.values())
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$match": {}}, {"$indexStats": {}}]))
    assert e.value.code == 40602
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$indexStats": {"x": 1}}]))
    assert e.value.code == 28803
    assert list(db.nothing.aggregate([{"$indexStats": {}}])) == []


def test_index_and_collection_options(db):
    # Another engine's tuning changes no answer: accepted, as mongod accepts it for an engine
    # it does not run (each engine's settings must still be a document).
    db.command("createIndexes", "e", indexes=[{"key": {"a": 1}, "name": "a_1",
                                                "storageEngine": {"wiredTiger": {"configString": "block_compressor=zlib"}}}])
    assert [i["name"] for i in db.e.list_indexes()] == ["_id_", "a_1"]
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "e", indexes=[{"key": {"b": 1}, "name": "b_1", "storageEngine": {"x": 1}}])
    assert e.value.code == 2
    # mongorestore's relaxation: options no MongoDB knows are dropped...
    r = db.command("createIndexes", "e", indexes=[{"key": {"b": 1}, "name": "b_1", "unique": True, "bogus": 1,
                                                    "safe": True}], ignoreUnknownIndexOptions=True)
    assert r["numIndexesAfter"] == 3
    spec = [i for i in db.e.list_indexes() if i["name"] == "b_1"][0]
    assert spec["unique"] is True and "bogus" not in spec and "safe" not in spec
    # ...while known options siltd does not implement are still refused.
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "e", indexes=[{"key": {"g": "2dsphere"}, "name": "g", "2dsphereIndexVersion": 3}],
                   ignoreUnknownIndexOptions=True)
    assert e.value.code == 238 and "2dsphereIndexVersion" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1", "bogus": 1}])
    assert e.value.code == 197
    assert "The field 'bogus' is not valid for an index specification" in str(e.value)
    # Text options belong to text indexes (test_text_search.py) and are not ignored elsewhere.
    with pytest.raises(OperationFailure) as e:
        db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1", "weights": {"a": 1}}])
    assert e.value.code == 197 and "weights" in str(e.value)
    # Defaults are fine.
    db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1", "hidden": False}])
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_", "a_1"]
    db.command("create", "se", storageEngine={"wiredTiger": {"configString": "block_compressor=zlib"}},
               indexOptionDefaults={"storageEngine": {"wiredTiger": {}}})
    opts = db.se.options()
    assert opts["storageEngine"] == {"wiredTiger": {"configString": "block_compressor=zlib"}}
    assert opts["indexOptionDefaults"] == {"storageEngine": {"wiredTiger": {}}}
    for opt in ({"timeseries": {"timeField": "t"}}, {"expireAfterSeconds": 5}):
        with pytest.raises(OperationFailure) as e:
            db.command(dict({"create": "d"}, **opt))
        assert e.value.code == 238 and next(iter(opt)) in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("create", "d", nonsense=1)
    assert e.value.code == 40415
    # What mongorestore sends.
    db.command("create", "d", idIndex={"key": {"_id": 1}, "name": "_id_", "v": 2})
    assert "d" in db.list_collection_names()
    assert db.list_collection_names().count("c") == 1
