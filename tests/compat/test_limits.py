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


def _rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_thousands_of_idle_and_slow_clients():
    """2,500 idle connections and 200 clients sending a `ping` one byte at a time: a normal
    client is still served throughout, the slow clients' pings are answered once whole, and
    the server's resident memory grows by a bounded amount per connection (each has a thread
    whose stack is reserved, not resident)."""
    import threading
    import bson

    s = Siltd().start()
    socks, slow = [], []
    try:
        c = s.client()
        c.test.t.insert_one({"_id": 0})
        base = _rss_kb(s.proc.pid)
        for _ in range(2500):
            socks.append(socket.create_connection(("127.0.0.1", s.port), timeout=10))
        body = bson.encode({"ping": 1, "$db": "admin"})
        msg = (0).to_bytes(4, "little") + b"\x00" + body
        ping = (16 + len(msg)).to_bytes(4, "little") + (7).to_bytes(4, "little") + \
            (0).to_bytes(4, "little") + (2013).to_bytes(4, "little") + msg
        for _ in range(200):
            slow.append(socket.create_connection(("127.0.0.1", s.port), timeout=30))
        deadline = time.time() + 60
        while c.admin.command("serverStatus")["connections"]["current"] < 2701:
            assert time.time() < deadline, "the server did not accept 2,700 connections"
            time.sleep(0.1)

        done = threading.Event()

        def drip():
            # One byte to each slow client in turn, 20 ms between rounds.
            for i in range(len(ping)):
                for sk in slow:
                    sk.send(ping[i:i + 1])
                time.sleep(0.02)
            done.set()

        t = threading.Thread(target=drip)
        t.start()
        served = 0
        while not done.is_set():
            c.test.t.update_one({"_id": 0}, {"$inc": {"n": 1}})
            assert c.test.t.find_one({"_id": 0})["n"] == served + 1
            served += 1
        t.join()
        assert served > 10
        for sk in slow:
            head = b""
            while len(head) < 16:
                chunk = sk.recv(16 - len(head))
                assert chunk, "a slow client's connection was closed"
                head += chunk
            assert int.from_bytes(head[12:16], "little") == 2013
        grown_mb = (_rss_kb(s.proc.pid) - base) / 1024
        # 2,700 connections: well under 64 KiB each.
        assert grown_mb < 170, f"resident memory grew by {grown_mb:.0f} MiB"
        print(f"\n2,700 connections: resident memory grew by {grown_mb:.1f} MiB; "
              f"{served} update+find pairs served while the slow clients dripped")
    finally:
        for sk in socks + slow:
            sk.close()
        s.stop()
        s.cleanup()


def test_sort_and_group_memory_caps():
    """A blocking sort and $group hold at most their memory cap (MongoDB's parameters, 100 MiB
    by default); past it the command fails with 292 and the server goes on. A sort with a
    limit keeps only the best documents, and an index that gives the order needs no memory."""
    import pytest
    from pymongo.errors import OperationFailure

    s = Siltd().start()
    try:
        c = s.client()
        coll = c.test.big
        coll.insert_many([{"_id": i, "k": (i * 7919) % 5000, "pad": "x" * 200} for i in range(5000)])
        a = c.admin
        assert a.command("getParameter", internalQueryMaxBlockingSortMemoryUsageBytes=1)[
            "internalQueryMaxBlockingSortMemoryUsageBytes"] == 100 << 20
        a.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=200_000,
                  internalDocumentSourceGroupMaxMemoryBytes=200_000)

        for run in [lambda: list(coll.find().sort("k", 1)),
                    lambda: list(coll.aggregate([{"$sort": {"k": 1}}])),
                    lambda: list(coll.aggregate([{"$sort": {"k": 1}}], allowDiskUse=True)),
                    lambda: list(coll.aggregate([{"$group": {"_id": None, "all": {"$push": "$$ROOT"}}}])),
                    lambda: list(coll.aggregate([{"$group": {"_id": "$_id"}}]))]:
            with pytest.raises(OperationFailure) as e:
                run()
            assert e.value.code == 292, e.value
            assert "memory limit" in str(e.value)
        # Bounded by a limit, or given by an index, or grouped into few keys: served.
        top = list(coll.find().sort("k", -1).limit(5))
        assert [d["k"] for d in top] == [4999, 4998, 4997, 4996, 4995]
        assert len(list(coll.find().sort("k", 1).skip(10).limit(3))) == 3
        assert [d["k"] for d in coll.aggregate([{"$sort": {"k": 1}}, {"$limit": 2}])] == [0, 1]
        assert list(coll.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}}}]))[0]["n"] == 5000
        coll.create_index("k")
        assert len(list(coll.find().sort("k", 1))) == 5000
        a.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=100 << 20,
                  internalDocumentSourceGroupMaxMemoryBytes=100 << 20)
        assert len(list(coll.aggregate([{"$sort": {"pad": 1, "_id": -1}}]))) == 5000
    finally:
        s.stop()
        s.cleanup()


def test_query_nesting_is_bounded():
    """Filters and expressions nest at most as deep as BSON may (200 levels): deeper ones are
    refused with InvalidBSON (22) before anything runs, and the server goes on."""
    import pytest
    from pymongo.errors import OperationFailure

    s = Siltd().start()
    try:
        c = s.client()
        f = {"a": 1}
        for _ in range(90):
            f = {"$and": [f]}
        assert c.test.c.count_documents(f) == 0
        for _ in range(20):
            f = {"$and": [f]}
        with pytest.raises(OperationFailure) as e:
            c.test.c.count_documents(f)
        assert e.value.code == 22
        assert c.admin.command("ping")["ok"] == 1
    finally:
        s.stop()
        s.cleanup()


def test_session_limit():
    """`maxSessions` (MongoDB's parameter): a new session beyond it gets
    TooManyLogicalSessions (261); known sessions and sessionless commands go on."""
    import pytest
    from pymongo.errors import OperationFailure

    s = Siltd(extra=["--setParameter", "maxSessions=3"]).start()
    try:
        c = s.client()
        assert c.admin.command("getParameter", maxSessions=1)["maxSessions"] == 3
        held = [c.start_session() for _ in range(3)]
        for sess in held:
            c.test.s.insert_one({}, session=sess)
        with c.start_session() as extra:
            with pytest.raises(OperationFailure) as e:
                c.test.s.insert_one({}, session=extra)
            assert e.value.code == 261
        c.test.s.find_one({}, session=held[0])
        c.admin.command("endSessions", [sess.session_id for sess in held], session=held[0])
        for sess in held:
            sess.end_session()
        with c.start_session() as again:
            c.test.s.insert_one({}, session=again)
    finally:
        s.stop()
        s.cleanup()
