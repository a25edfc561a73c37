"""Handshake and administrative commands."""
import pymongo
import pytest
from pymongo.errors import OperationFailure


def test_hello_and_ping(client):
    h = client.admin.command("hello")
    assert h["isWritablePrimary"] is True
    assert h["maxWireVersion"] == 21
    assert h["maxBsonObjectSize"] == 16 * 1024 * 1024
    assert h["maxMessageSizeBytes"] == 48000000
    assert h["maxWriteBatchSize"] == 100000
    assert "logicalSessionTimeoutMinutes" in h
    assert client.admin.command("ping")["ok"] == 1.0
    legacy = client.admin.command("isMaster")
    assert legacy["ismaster"] is True


def test_build_info_and_status(client):
    b = client.admin.command("buildInfo")
    assert b["version"].startswith("7.0")
    assert "silt" in b and "version" in b["silt"]
    s = client.admin.command("serverStatus")
    assert s["connections"]["current"] >= 1
    assert "opcounters" in s and s["storageEngine"]["name"] == "silt"
    assert client.admin.command("hostInfo")["system"]["numCores"] >= 1
    assert client.admin.command("getParameter", 1, featureCompatibilityVersion=1)[
        "featureCompatibilityVersion"]["version"] == "7.0"
    assert "argv" in client.admin.command("getCmdLineOpts")
    assert "authInfo" in client.admin.command("connectionStatus")
    assert ":" in client.admin.command("whatsmyuri")["you"]
    assert "global" in client.admin.command("getLog", "*")["names"]
    assert isinstance(client.admin.command("getLog", "global")["log"], list)
    assert "find" in client.admin.command("listCommands")["commands"]
    client.admin.command("endSessions", [])
    client.admin.command("killAllSessions", [])


def test_unknown_command(client):
    with pytest.raises(OperationFailure) as e:
        client.admin.command("frobnicate")
    assert e.value.code == 59
    assert e.value.details["codeName"] == "CommandNotFound"
    # The connection carries on.
    assert client.admin.command("ping")["ok"] == 1.0


def test_databases_and_stats(client, db):
    db.c.insert_many([{"x": i, "pad": "p" * 100} for i in range(50)])
    names = client.list_database_names()
    assert db.name in names
    dbs = client.admin.command("listDatabases")["databases"]
    assert any(d["name"] == db.name for d in dbs)
    only = client.admin.command("listDatabases", nameOnly=True)["databases"]
    assert {"name": db.name} in only
    st = db.command("dbStats")
    assert st["collections"] == 1 and st["objects"] == 50
    cs = db.command("collStats", "c")
    assert cs["count"] == 50 and cs["nindexes"] == 1
    assert cs["size"] > 50 * 100
    assert "storageSize" in cs and "totalIndexSize" in cs
    client.drop_database(db.name)
    assert db.name not in client.list_database_names()


def test_collections(db):
    db.create_collection("a")
    # MongoDB 7.0: the same options again succeed, other options fail.
    assert db.command("create", "a")["ok"] == 1
    with pytest.raises(OperationFailure) as e:
        db.command("create", "a", partitioned=True)
    assert e.value.code == 48
    with pytest.raises(OperationFailure) as e:
        db.command("create", "b", capped=True)
    assert e.value.code == 72 and "size" in str(e.value)
    db.b.insert_one({"x": 1})  # implicit creation
    assert sorted(db.list_collection_names()) == ["a", "b"]
    assert [c["name"] for c in db.list_collections(filter={"name": "b"})] == ["b"]
    db.b.rename("c")
    assert sorted(db.list_collection_names()) == ["a", "c"]
    assert db.c.find_one({}, {"_id": 0}) == {"x": 1}
    with pytest.raises(OperationFailure) as e:
        db.c.rename("a")
    assert e.value.code == 48
    db.c.rename("a", dropTarget=True)
    assert db.list_collection_names() == ["a"]
    with pytest.raises(OperationFailure) as e:
        db.nothere.rename("zz")
    assert e.value.code == 26
    db.a.drop()
    db.a.drop()  # dropping a missing collection is fine (7.0)
    assert db.list_collection_names() == []
    idx = list(db.create_collection("d").list_indexes())
    assert idx[0]["name"] == "_id_"


def test_legacy_op_query_handshake(server):
    import socket
    import struct
    import bson
    q = bson.encode({"isMaster": 1})
    body = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1) + q
    msg = struct.pack("<iiii", 16 + len(body), 7, 0, 2004) + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(msg)
        head = s.recv(16, socket.MSG_WAITALL)
        length, _, response_to, opcode = struct.unpack("<iiii", head)
        assert opcode == 1 and response_to == 7
        rest = s.recv(length - 16, socket.MSG_WAITALL)
        n = struct.unpack("<i", rest[16:20])[0]
        assert n == 1
        d = bson.decode(rest[20:])
        assert d["ismaster"] is True and d["maxWireVersion"] == 21


@pytest.mark.parametrize("compressor", ["zstd", "snappy", "zlib"])
def test_compressed_traffic(server, compressor):
    if compressor == "snappy":
        pytest.importorskip("snappy")
    elif compressor == "zstd":
        pytest.importorskip("zstandard")
    c = server.client(compressors=compressor)
    try:
        db = c.compress_test
        db.c.insert_many([{"_id": i, "text": "compress me " * 20} for i in range(200)])
        assert len(list(db.c.find())) == 200
        assert c.admin.command("ping")["ok"] == 1.0
        # The handshake agreed on this compressor.
        assert c.admin.command("hello", compression=[compressor])["compression"] == [compressor]
    finally:
        c.drop_database("compress_test")
        c.close()


def test_collections_have_uuids_that_survive_rename_and_restart():
    """listCollections' info.uuid: a UUID (binary subtype 4) given at create, the same after
    renameCollection and after a restart (change streams and tools rely on it)."""
    import uuid
    from conftest import Siltd
    s = Siltd().start()
    try:
        c = s.client(uuidRepresentation="standard")
        c.u.create_collection("a")
        c.u.create_collection("b")
        infos = {x["name"]: x["info"] for x in c.u.list_collections()}
        ua = infos["a"]["uuid"]
        # pymongo decodes listCollections with its default codec: a Binary of subtype 4.
        assert uuid.UUID(bytes=bytes(ua)) and ua.subtype == 4
        assert infos["a"]["readOnly"] is False
        assert ua != infos["b"]["uuid"]
        c.admin.command("renameCollection", "u.a", to="u.z")
        assert {x["name"]: x["info"]["uuid"] for x in c.u.list_collections()}["z"] == ua
        s.stop()
        s.start()
        c = s.client(uuidRepresentation="standard")
        assert {x["name"]: x["info"]["uuid"] for x in c.u.list_collections()}["z"] == ua
    finally:
        s.cleanup()
