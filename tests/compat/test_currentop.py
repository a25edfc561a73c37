"""currentOp, $currentOp and killOp: operations in flight in MongoDB's shape, index builds with
their progress, and killing a build."""
import glob
import os
import threading
import time

import pytest
from pymongo.errors import OperationFailure

N_DOCS = 200_000
# Several indexes in one request: each is a separate pass over the collection, so the build
# runs for a few seconds.
BUILD = [
    {"key": {"b": 1, "a": -1}, "name": "b_a"},
    {"key": {"c": 1, "b": 1}, "name": "c_b"},
    {"key": {"a": 1, "c": 1}, "name": "a_c"},
    {"key": {"c": -1, "a": 1}, "name": "c_a"},
    {"key": {"b": -1, "c": 1}, "name": "b_c"},
    {"key": {"a": 1, "b": 1, "c": 1}, "name": "a_b_c"},
]


def current_op(client, args):
    """`{currentOp: 1, ...args}` (pymongo's command(name, value) would nest them)."""
    r = client.admin.command({"currentOp": 1, **args})
    assert r["ok"] == 1
    return r["inprog"]


def test_current_op_shows_itself(client):
    r = client.admin.command("currentOp")
    assert r["ok"] == 1
    mine = [op for op in r["inprog"] if "currentOp" in op.get("command", {})]
    assert len(mine) == 1
    op = mine[0]
    assert op["type"] == "op" and op["active"] is True and op["op"] == "command"
    assert op["ns"] == "admin.$cmd"
    assert op["desc"] == f"conn{op['connectionId']}"
    assert isinstance(op["opid"], int) and isinstance(op["secs_running"], int)
    assert isinstance(op["microsecs_running"], int) and op["microsecs_running"] >= 0
    assert op["client"].startswith("127.0.0.1:")
    assert op["command"]["$db"] == "admin"
    assert op["clientMetadata"]["driver"]["name"].startswith("PyMongo")
    for k in ("host", "currentOpTime", "numYields", "locks", "waitingForLock", "lsid"):
        assert k in op, k


def test_current_op_filters_and_idle_connections(server, client):
    other = server.client(appname="idle-app")
    other.admin.command("ping")
    try:
        assert len(current_op(client, {"command.currentOp": {"$exists": True}})) == 1
        assert current_op(client, {"op": "query"}) == []
        assert current_op(client, {"ns": "admin.$cmd", "op": "command"})
        r = current_op(client, {"$ownOps": True, "active": True})
        assert r and all(op["active"] for op in r)
        # $all adds idle connections (active: false), with their application name.
        idle = current_op(client, {"$all": True, "active": False})
        assert any(op.get("appName") == "idle-app" for op in idle)
        assert all("opid" not in op and op["type"] == "op" for op in idle)
        with pytest.raises(OperationFailure) as e:
            client.test.command("currentOp")
        assert e.value.code == 13
    finally:
        other.close()


def test_current_op_aggregation_stage(client, db):
    ops = list(client.admin.aggregate([
        {"$currentOp": {"allUsers": True, "idleConnections": False}},
        {"$match": {"command.aggregate": 1}},
        {"$project": {"op": 1, "ns": 1, "command.pipeline": 1}},
    ]))
    assert len(ops) == 1 and ops[0]["ns"] == "admin.$cmd.aggregate"
    assert "$currentOp" in ops[0]["command"]["pipeline"][0]
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$currentOp": {}}]))
    assert e.value.code == 73
    with pytest.raises(OperationFailure) as e:
        list(client.admin.aggregate([{"$match": {}}, {"$currentOp": {}}]))
    assert e.value.code == 40602
    with pytest.raises(OperationFailure) as e:
        list(client.admin.aggregate([{"$currentOp": {"bogus": True}}]))
    assert e.value.code == 40415


def test_kill_op_arguments(client):
    assert client.admin.command("killOp", op=2 ** 31 - 1)["info"] == "attempting to kill op"
    with pytest.raises(OperationFailure) as e:
        client.test.command("killOp", op=1)
    assert e.value.code == 13
    with pytest.raises(OperationFailure):
        client.admin.command("killOp")


@pytest.fixture(scope="module")
def big(standalone_client):
    """A collection large enough that building BUILD takes seconds."""
    client = standalone_client
    db = client["t_currentop_big"]
    db.drop_collection("c")
    for start in range(0, N_DOCS, 20_000):
        db.c.insert_many(
            [{"_id": i, "a": i % 1000, "b": f"k{i % 7919}", "c": i * 0.5}
             for i in range(start, start + 20_000)],
            ordered=False)
    yield db
    client.drop_database(db.name)


def start_build(db):
    """Run createIndexes on a thread; returns the thread and its outcome."""
    out = {}

    def run():
        try:
            out["reply"] = db.command("createIndexes", "c", indexes=BUILD)
        except OperationFailure as e:
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


def wait_for_build(client, db, pred, timeout=30):
    """Poll currentOp from another connection until the build shows up and `pred` holds."""
    deadline = time.time() + timeout
    seen = []
    while time.time() < deadline:
        ops = current_op(client, {"command.createIndexes": "c", "ns": db.name + ".c"})
        if ops:
            seen.append(ops[0])
            if pred(ops[0]):
                return ops[0], seen
        time.sleep(0.005)
    raise AssertionError(f"index build not seen in currentOp: {seen[-1:]}")


def test_index_build_progress(server, big):
    watcher = server.client()
    t, out = start_build(big)
    try:
        op, seen = wait_for_build(watcher, big, lambda op: op.get("progress", {}).get("done", 0) > 0)
        assert op["active"] is True and op["op"] == "command" and op["type"] == "op"
        assert op["command"]["createIndexes"] == "c"
        assert [i["name"] for i in op["command"]["indexes"]] == [b["name"] for b in BUILD]
        assert op["msg"].startswith("Index Build: scanning collection") or op["msg"].startswith(
            "Index Build: inserting keys from external sorter into index")
        done, total = op["progress"]["done"], op["progress"]["total"]
        assert 0 < done <= total
        pct = done * 100 // total
        assert op["msg"].endswith(f": {done}/{total} {pct}%")
        # Progress moves on while the build runs.
        later, _ = wait_for_build(
            watcher, big, lambda o: o["opid"] == op["opid"] and (
                o.get("msg") != op["msg"] or o["progress"]["done"] != done))
        assert later["secs_running"] >= 0 and later["microsecs_running"] > op["microsecs_running"]
        # Also through the aggregation stage, as mongosh's db.currentOp() asks.
        ops = list(watcher.admin.aggregate([
            {"$currentOp": {"allUsers": True, "idleConnections": False, "truncateOps": False}},
            {"$match": {"opid": op["opid"]}}]))
        assert ops and ops[0]["msg"].startswith("Index Build:")
    finally:
        t.join()
        watcher.close()
    assert out.get("reply", {}).get("numIndexesAfter") == 1 + len(BUILD), out
    big.c.drop_indexes()


def test_kill_index_build(server, big):
    files = lambda: sorted(glob.glob(os.path.join(server.dbpath, "dict-*")))
    before = files()
    watcher = server.client()
    t, out = start_build(big)
    try:
        op, _ = wait_for_build(watcher, big, lambda o: o.get("progress", {}).get("done", 0) > 0)
        assert watcher.admin.command("killOp", op=op["opid"])["ok"] == 1
    finally:
        t.join()
        watcher.close()
    assert "error" in out, out
    assert out["error"].code == 11601 and out["error"].details["codeName"] == "Interrupted"
    # Nothing is left of the build: no index, no dictionary, and the collection is usable.
    assert [i["name"] for i in big.c.list_indexes()] == ["_id_"]
    assert files() == before
    big.c.insert_one({"_id": -1, "a": 1})
    big.c.delete_one({"_id": -1})
    assert big.command("createIndexes", "c", indexes=BUILD[:1])["numIndexesAfter"] == 2
    big.c.drop_indexes()
