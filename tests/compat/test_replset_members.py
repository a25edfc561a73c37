"""Three siltd processes as one replica set on Raft (issue 36, first wiring): initiate,
one primary and two secondaries in `hello` and `replSetGetStatus`, a new primary within
10 s after `kill -9` of the primary, and the killed member back as a secondary from its own
log. A secondary refuses writes with NotWritablePrimary (10107); the primary's are replicated
(`test_replset_writes.py` checks them in depth)."""
import time

import pymongo
import pytest

from conftest import Siltd, free_port
from test_transactions import raw_command


def hello(m):
    try:
        with m.client(serverSelectionTimeoutMS=1000, connectTimeoutMS=500, directConnection=True) as c:
            return c.admin.command("hello")
    except pymongo.errors.PyMongoError:
        return None


def roles(members):
    out = {}
    for m in members:
        h = hello(m)
        out[m.port] = None if h is None else ("P" if h["isWritablePrimary"] else "S" if h.get("secondary") else "?")
    return out


def wait_for(pred, secs, what):
    deadline = time.time() + secs
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"{what} within {secs} s")


@pytest.fixture
def members():
    ms = [Siltd(extra=["--replSet", "rs0", "--bind", "127.0.0.1"]) for _ in range(3)]
    for m in ms:
        m.start()
    yield ms
    for m in ms:
        m.cleanup()


def one_primary(members):
    r = roles(members)
    primaries = [p for p, role in r.items() if role == "P"]
    secondaries = [p for p, role in r.items() if role == "S"]
    if len(primaries) == 1 and len(secondaries) == len(members) - 1:
        return primaries[0]
    return None


def test_three_members_elect_fail_over_and_rejoin(members):
    config = {"_id": "rs0", "members": [
        {"_id": i, "host": f"127.0.0.1:{m.port}"} for i, m in enumerate(members)]}
    with members[0].client(directConnection=True) as c:
        c.admin.command("replSetInitiate", config)
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            c.admin.command("replSetInitiate", config)
        assert e.value.code == 23
    primary = wait_for(lambda: one_primary(members), 15, "one primary and two secondaries")

    by_port = {m.port: m for m in members}
    h = hello(by_port[primary])
    assert sorted(h["hosts"]) == sorted(f"127.0.0.1:{m.port}" for m in members)
    assert h["setName"] == "rs0" and h["primary"] == f"127.0.0.1:{primary}"
    assert h["electionId"].binary[:4] == b"\x7f\xff\xff\xff"
    for m in members:
        if m.port != primary:
            hs = hello(m)
            assert hs["secondary"] and hs["primary"] == f"127.0.0.1:{primary}"
            with m.client(directConnection=True) as c:
                with pytest.raises(pymongo.errors.NotPrimaryError) as e:
                    c.t.c.insert_one({"a": 1})
                assert e.value.details["code"] == 10107
            # As mongod: a read that does not allow a secondary (no `$readPreference`, as
            # drivers send to a primary) is refused with 13435; one that does is served, and
            # the member's own `local` database is read either way.
            r = raw_command(m.port, {"find": "c", "$db": "t"})
            assert (r["ok"], r["code"], r["codeName"]) == (0, 13435, "NotPrimaryNoSecondaryOk"), r
            r = raw_command(m.port, {"count": "c", "$db": "t", "$readPreference": {"mode": "secondary"}})
            assert r["ok"] == 1, r
            r = raw_command(m.port, {"find": "oplog.rs", "$db": "local", "limit": 1})
            assert r["ok"] == 1, r
            r = raw_command(m.port, {"hello": 1, "$db": "admin"})
            assert r["ok"] == 1 and r["secondary"] is True, r

    uri = "mongodb://" + ",".join(f"127.0.0.1:{m.port}" for m in members) + "/?replicaSet=rs0"
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        st = c.admin.command("replSetGetStatus")
        assert st["set"] == "rs0" and st["myState"] == 1
        assert sorted(x["stateStr"] for x in st["members"]) == ["PRIMARY", "SECONDARY", "SECONDARY"]
        conf = c.admin.command("replSetGetConfig")["config"]
        assert [(m["_id"], m["host"], m["votes"]) for m in conf["members"]] == [
            (i, f"127.0.0.1:{m.port}", 1) for i, m in enumerate(members)]
        c.t.c.insert_one({"_id": "before", "a": 1})

    with by_port[primary].client(directConnection=True) as c:
        repl = c.admin.command("serverStatus")["repl"]
        assert repl["isWritablePrimary"] and repl["raft"]["term"] == st["term"]
        assert repl["raft"]["appliedIndex"] >= 1 and len(repl["raft"]["members"]) == 3
        assert all(isinstance(m["lagEntries"], int) for m in repl["raft"]["members"].values())
    assert "replica-set member state" in by_port[primary].read_log()

    old = by_port[primary]
    term = st["term"]
    # A driver's monitors (awaitable hello) must learn of the new primary as it happens, not
    # after their 10 s wait.
    watcher = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)
    assert watcher.primary == ("127.0.0.1", primary) or wait_for(
        lambda: watcher.primary == ("127.0.0.1", primary), 10, "the driver sees the primary")
    old.kill9()
    killed = time.time()
    rest = [m for m in members if m is not old]
    new = wait_for(lambda: one_primary(rest), 10, "a new primary after kill -9 of the old one")
    assert new != primary
    print(f"new primary after {time.time() - killed:.1f} s")
    wait_for(lambda: watcher.primary == ("127.0.0.1", new), 3,
             "the driver sees the new primary (its monitor's awaitable hello answers the change)")
    print(f"the driver saw it after {time.time() - killed:.1f} s")
    watcher.close()
    with by_port[new].client(directConnection=True) as c:
        assert c.admin.command("replSetGetStatus")["term"] > term

    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        c.t.c.insert_one({"_id": "after", "a": 2})
    old.start(port=old.port)
    wait_for(lambda: one_primary(members), 15, "the killed member back as a secondary")
    assert roles([old])[old.port] == "S"
    # The restarted member caught up from its own log and the new primary's.
    with old.client(directConnection=True) as c:
        wait_for(lambda: c.t.c.count_documents({}) == 2, 10, "both writes on the restarted member")


def test_step_down_freeze_and_reconfig(members):
    config = {"_id": "rs0", "members": [
        {"_id": i, "host": f"127.0.0.1:{m.port}"} for i, m in enumerate(members)]}
    with members[0].client(directConnection=True) as c:
        c.admin.command("replSetInitiate", config)
    primary = wait_for(lambda: one_primary(members), 15, "one primary")
    by_port = {m.port: m for m in members}

    # A secondary can be frozen; the primary cannot.
    secondary = next(m for m in members if m.port != primary)
    with secondary.client(directConnection=True) as c:
        assert c.admin.command("replSetFreeze", 30)["ok"] == 1
        assert c.admin.command("replSetFreeze", 0)["info"] == "unfreezing"
    with by_port[primary].client(directConnection=True) as c:
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            c.admin.command("replSetFreeze", 30)
        assert e.value.code == 95

    # Step down: another member becomes primary, the old one does not campaign.
    with by_port[primary].client(directConnection=True) as c:
        c.admin.command("replSetStepDown", 60, secondaryCatchUpPeriodSecs=5)
    new = wait_for(lambda: one_primary(members), 10, "a new primary after replSetStepDown")
    assert new != primary
    not_primary = next(m for m in members if m.port != new)
    with not_primary.client(directConnection=True) as c:
        with pytest.raises(pymongo.errors.NotPrimaryError):
            c.admin.command("replSetStepDown", 60)

    # Reconfig: a fourth member joins (as mongosh's rs.add() sends it), then leaves.
    fourth = Siltd(extra=["--replSet", "rs0", "--bind", "127.0.0.1"]).start()
    try:
        uri = "mongodb://" + ",".join(f"127.0.0.1:{m.port}" for m in members) + "/?replicaSet=rs0"
        with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
            conf = c.admin.command("replSetGetConfig")["config"]
            conf["version"] += 1
            conf["members"].append({"_id": 3, "host": f"127.0.0.1:{fourth.port}"})
            c.admin.command("replSetReconfig", conf)
            wait_for(lambda: one_primary(members + [fourth]), 15, "the fourth member as a secondary")
            st = c.admin.command("replSetGetStatus")
            assert st["votingMembersCount"] == 4
            # mongod's rules: a hidden member has priority 0; arbiters are not built.
            with pytest.raises(pymongo.errors.OperationFailure) as e:
                bad = dict(conf, members=conf["members"] + [{"_id": 4, "host": "127.0.0.1:1", "hidden": True}])
                c.admin.command("replSetReconfig", bad)
            assert e.value.code == 93 and "hidden" in str(e.value)
            with pytest.raises(pymongo.errors.OperationFailure) as e:
                bad = dict(conf, members=conf["members"] + [{"_id": 4, "host": "127.0.0.1:1", "arbiterOnly": True}])
                c.admin.command("replSetReconfig", bad)
            assert e.value.code == 238 and "arbiterOnly" in str(e.value)
            # A config made from an older one is refused, as mongod refuses it: the
            # version is not above the current one.
            stale = dict(conf, members=conf["members"][:3])
            with pytest.raises(pymongo.errors.OperationFailure) as e:
                c.admin.command("replSetReconfig", stale)
            assert e.value.code == 103, e.value
            conf = c.admin.command("replSetGetConfig")["config"]
            conf["members"] = conf["members"][:3]
            conf["version"] += 1
            c.admin.command("replSetReconfig", conf)
            st = c.admin.command("replSetGetStatus")
            assert st["votingMembersCount"] == 3 and len(st["members"]) == 3
    finally:
        fourth.cleanup()


def test_initiate_alone_then_add_members(members):
    """The setup scripts' way: `rs.initiate()` on one server, then `rs.add()` of the others
    (a reconfig of the one-member set, then of the multi-member one)."""
    m0, m1, m2 = members
    with m0.client(directConnection=True) as c:
        r = c.admin.command("replSetInitiate")
        assert r["ok"] == 1 and r["me"] == f"127.0.0.1:{m0.port}", r
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            c.admin.command("replSetInitiate")
        assert e.value.code == 23
        c.app.c.insert_one({"_id": "alone"})
        for n, m in [(1, m1), (2, m2)]:
            conf = wait_for(lambda: c.admin.command("replSetGetConfig")["config"], 10, "the config")
            conf["version"] += 1
            conf["members"].append({"_id": n, "host": f"127.0.0.1:{m.port}"})
            wait_for(lambda: c.admin.command("hello")["isWritablePrimary"], 15, "member 0 primary")
            c.admin.command("replSetReconfig", conf)
    primary = wait_for(lambda: one_primary(members), 20, "one primary and two secondaries")
    assert primary == m0.port
    uri = "mongodb://" + ",".join(f"127.0.0.1:{m.port}" for m in members) + "/?replicaSet=rs0"
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        c.app.get_collection("c", write_concern=pymongo.WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": "three"})
        assert c.admin.command("replSetGetStatus")["votingMembersCount"] == 3
    # The data written before the set grew is on every member.
    for m in members:
        with m.client(directConnection=True) as c:
            assert {d["_id"] for d in c.app.c.find()} == {"alone", "three"}


def test_a_multi_member_set_under_auth_is_refused_until_members_authenticate():
    m = Siltd(extra=["--replSet", "rs0", "--bind", "127.0.0.1", "--auth"]).start()
    try:
        with m.client(directConnection=True) as c:
            c.admin.command("createUser", "root", pwd="pw", roles=["root"])
        with m.client(directConnection=True, username="root", password="pw") as c:
            config = {"_id": "rs0", "members": [
                {"_id": 0, "host": f"127.0.0.1:{m.port}"}, {"_id": 1, "host": "127.0.0.1:1"}]}
            with pytest.raises(pymongo.errors.OperationFailure) as e:
                c.admin.command("replSetInitiate", config)
            assert e.value.code == 238 and "keyFile" in str(e.value)
            assert c.admin.command("hello")["isWritablePrimary"]
    finally:
        m.cleanup()


def test_priorities_and_hidden_members(members):
    """Priority decides which member is primary (a caught-up member of higher priority takes
    over; priority 0 never campaigns); a hidden member replicates and votes but `hello` lists
    it nowhere."""
    m0, m1, m2 = members
    config = {"_id": "rs0", "members": [
        {"_id": 0, "host": f"127.0.0.1:{m0.port}", "priority": 1, "tags": {"dc": "east"}},
        {"_id": 1, "host": f"127.0.0.1:{m1.port}", "priority": 0, "hidden": True},
        {"_id": 2, "host": f"127.0.0.1:{m2.port}", "priority": 5, "tags": {"dc": "west"}}]}
    with m0.client(directConnection=True) as c:
        c.admin.command("replSetInitiate", config)
    assert wait_for(lambda: one_primary(members) == m2.port, 20, "the priority-5 member primary")
    h = hello(m0)
    assert sorted(h["hosts"]) == sorted([f"127.0.0.1:{m0.port}", f"127.0.0.1:{m2.port}"]), h
    assert "passives" not in h, h
    h1 = hello(m1)
    assert h1["hidden"] is True and h1["passive"] is True and h1["secondary"] is True, h1
    uri = f"mongodb://127.0.0.1:{m0.port},127.0.0.1:{m2.port}/?replicaSet=rs0"
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        conf = c.admin.command("replSetGetConfig")["config"]
        assert [(m["priority"], m["hidden"], m["votes"]) for m in conf["members"]] == \
            [(1.0, False, 1), (0.0, True, 1), (5.0, False, 1)]
        c.app.c.with_options(write_concern=pymongo.WriteConcern(w=3, wtimeout=10000)).insert_one({"_id": 1})
        # Tag sets select by `hello.tags`; maxStalenessSeconds by `hello.lastWrite`.
        assert hello(m0)["tags"] == {"dc": "east"}
        east = c.app.get_collection("c", read_preference=pymongo.read_preferences.Secondary(
            tag_sets=[{"dc": "east"}], max_staleness=90))
        assert east.find_one({"_id": 1}) is not None
        with pytest.raises(pymongo.errors.ServerSelectionTimeoutError):
            pymongo.MongoClient(uri, serverSelectionTimeoutMS=1500).app.get_collection(
                "c", read_preference=pymongo.read_preferences.Secondary(tag_sets=[{"dc": "north"}])
            ).find_one({})
    with m1.client(directConnection=True) as c:
        assert c.app.c.find_one({"_id": 1}) is not None

    # Without the priority-5 member, the priority-0 one never becomes primary.
    m2.kill9()
    assert wait_for(lambda: one_primary([m0, m1]) == m0.port, 15, "member 0 primary")
    time.sleep(2)
    assert roles([m0, m1]) == {m0.port: "P", m1.port: "S"}
    # Back and caught up, the priority-5 member takes over again.
    m2.start(port=m2.port)
    assert wait_for(lambda: one_primary(members) == m2.port, 30, "the priority-5 member primary again")

    # A reconfig changes priorities: member 0 now outranks member 2.
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        conf = c.admin.command("replSetGetConfig")["config"]
        old_version = conf["version"]
        assert c.admin.command("hello")["setVersion"] == old_version
        assert conf["term"] == c.admin.command("replSetGetStatus")["term"]
        conf["version"] += 1
        conf["members"][0]["priority"] = 10
        c.admin.command("replSetReconfig", conf)
        # The version moves on with every change of the membership.
        new_version = c.admin.command("replSetGetConfig")["config"]["version"]
        assert new_version > old_version
    assert wait_for(lambda: one_primary(members) == m0.port, 20, "member 0 primary after the reconfig")
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        assert c.admin.command("hello")["setVersion"] == new_version

