"""Limits that protect the server (issue 14): the connection limit (`--maxConns`,
`net.maxIncomingConnections`): one connection more is closed at once with a log line, the
others are served, and room comes back when a connection closes."""
import socket
import time

from conftest import Siltd


def hello_works(port):
    """A fresh raw connection answers an OP_MSG ping (False when the server closed it)."""
    import bson
    body = bson.encode({"ping": 1, "$db": "admin"})
    msg = (0).to_bytes(4, "little") + b"\x00" + body
    header = (16 + len(msg)).to_bytes(4, "little") + (1).to_bytes(4, "little") + (0).to_bytes(4, "little") + (2013).to_bytes(4, "little")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(header + msg)
            data = s.recv(4)
            return len(data) == 4
    except OSError:
        return False


def test_max_connections():
    s = Siltd(extra=["--maxConns", "3"]).start()
    held = []
    try:
        # The start-up probe's connection is closed already; wait until the server sees it.
        time.sleep(0.3)
        for _ in range(3):
            held.append(socket.create_connection(("127.0.0.1", s.port), timeout=5))
        time.sleep(0.3)
        assert not hello_works(s.port)
        assert "too many open connections" in s.read_log()
        held.pop().close()
        # (Each probe's own connection takes a moment to be released, so probe until one works.)
        deadline = time.time() + 5
        served = hello_works(s.port)
        while not served and time.time() < deadline:
            time.sleep(0.1)
            served = hello_works(s.port)
        assert served
    finally:
        for h in held:
            h.close()
        s.stop()


def nested(n):
    d = {"x": 1}
    for _ in range(n):
        d = {"a": d}
    return d


def test_document_nesting_depth(db):
    """Stored documents nest at most 100 levels (MongoDB's storage limit): deeper inserts,
    update results and upserts get 15 (Overflow); the server goes on."""
    import pytest
    from pymongo.errors import OperationFailure, WriteError
    db.c.insert_one(dict(nested(100), _id=1))
    for attempt in [
        lambda: db.c.insert_one(nested(101)),
        lambda: db.c.update_one({"_id": 1}, {"$set": {"a": nested(101)}}),
        lambda: db.c.update_one({"_id": 2}, {"$set": {"b": nested(150)}}, upsert=True),
        lambda: db.command("update", "c", updates=[{"q": {"_id": 1}, "u": {"$set": {"deep": nested(120)}}}], fastUpdate=True)["writeErrors"][0]["code"],
    ]:
        try:
            r = attempt()
        except (OperationFailure, WriteError) as e:
            r = e.code
        assert r == 15
    assert db.c.count_documents({}) == 1
    assert db.command("ping")["ok"] == 1
