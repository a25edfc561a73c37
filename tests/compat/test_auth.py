"""Authentication and roles through pymongo: SCRAM-SHA-256 and SCRAM-SHA-1, the localhost
exception, built-in roles allowed and refused, user management commands, and users that
survive a restart."""
import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import Siltd


@pytest.fixture(scope="module")
def authed():
    s = Siltd(extra=["--auth"]).start()
    yield s
    s.stop()
    s.cleanup()


def login(s, user, pwd, source="admin", mech=None, **kw):
    opts = dict(username=user, password=pwd, authSource=source)
    if mech:
        opts["authMechanism"] = mech
    opts.update(kw)
    return s.client(**opts)


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def test_localhost_exception_then_users(authed):
    anon = authed.client()
    # Before any user exists: only the first user can be created, nothing else runs.
    assert code_of(lambda: anon.test.c.find_one()) == 13
    assert code_of(lambda: anon.admin.command("serverStatus")) == 13
    anon.admin.command("ping")
    anon.admin.command("hello")
    anon.admin.command("createUser", "root", pwd="rootpw", roles=["root"])
    # The exception is closed once a user exists.
    assert code_of(lambda: anon.admin.command(
        "createUser", "sneaky", pwd="x", roles=["root"])) == 13

    root = login(authed, "root", "rootpw")
    root.test.c.insert_one({"_id": 1, "v": "secret"})
    status = root.admin.command("connectionStatus")["authInfo"]
    assert status["authenticatedUsers"] == [{"user": "root", "db": "admin"}]
    assert status["authenticatedUserRoles"] == [{"role": "root", "db": "admin"}]

    root.test.command("createUser", "reader", pwd="r", roles=["read"])
    root.test.command("createUser", "writer", pwd="w", roles=["readWrite"])
    root.test.command("createUser", "dba", pwd="d", roles=["dbAdmin"])
    root.test.command("createUser", "ua", pwd="u", roles=["userAdmin"])
    root.admin.command("createUser", "mon", pwd="m", roles=["clusterMonitor"])
    root.admin.command("createUser", "anyreader", pwd="a", roles=["readAnyDatabase"])
    root.test.command("createUser", "sha1only", pwd="s1", roles=["read"],
                      mechanisms=["SCRAM-SHA-1"])


def test_passwords_and_mechanisms(authed):
    for mech in ["SCRAM-SHA-256", "SCRAM-SHA-1"]:
        c = login(authed, "root", "rootpw", mech=mech)
        assert c.admin.command("ping")["ok"] == 1
        assert c.test.c.find_one()["v"] == "secret"
        with pytest.raises(OperationFailure) as e:
            login(authed, "root", "wrong", mech=mech).admin.command("ping")
        assert e.value.code == 18
    # An unknown user fails exactly like a wrong password.
    with pytest.raises(OperationFailure) as e:
        login(authed, "nobody", "x").admin.command("ping")
    assert e.value.code == 18
    # A user defined on `test` authenticates against `test`, not `admin`.
    assert login(authed, "reader", "r", source="test").test.c.find_one()["_id"] == 1
    assert code_of(lambda: login(authed, "reader", "r").admin.command("ping")) == 18
    # Mechanism negotiation: a SCRAM-SHA-1-only user still logs in with the default; asked for
    # SCRAM-SHA-256, it is told it has no such credentials (334), as mongod tells it.
    assert login(authed, "sha1only", "s1", source="test").test.c.count_documents({}) == 1
    assert code_of(lambda: login(authed, "sha1only", "s1", source="test",
                                 mech="SCRAM-SHA-256").test.c.find_one()) == 334
    assert "Authentication failed" in authed.read_log()


def test_roles_allow_and_refuse(authed):
    reader = login(authed, "reader", "r", source="test").test
    assert reader.c.find_one()["_id"] == 1
    assert reader.c.count_documents({}) == 1
    assert reader.list_collection_names() == ["c"]
    assert code_of(lambda: reader.c.insert_one({"x": 1})) == 13
    assert code_of(lambda: reader.c.create_index("v")) == 13
    assert code_of(lambda: reader.client.admin.command("serverStatus")) == 13
    assert code_of(lambda: reader.client.other.c.find_one()) == 13

    writer = login(authed, "writer", "w", source="test").test
    writer.c.insert_one({"_id": 2})
    writer.c.update_one({"_id": 2}, {"$set": {"a": 1}})
    writer.c.create_index("a")
    writer.d.insert_one({"_id": 1})
    writer.d.drop()
    assert code_of(lambda: writer.command("collMod", "c", validator={})) == 13
    assert code_of(lambda: writer.command("createUser", "x", pwd="x", roles=[])) == 13
    # $out into another database needs write access there.
    assert code_of(lambda: list(writer.c.aggregate(
        [{"$out": {"db": "other", "coll": "o"}}]))) == 13

    dba = login(authed, "dba", "d", source="test").test
    assert dba.command("validate", "c")["valid"] is True
    dba.command("collMod", "c", validator={})
    assert "c" in dba.list_collection_names()
    assert code_of(lambda: dba.c.find_one()) == 13
    assert code_of(lambda: dba.c.insert_one({})) == 13

    mon = login(authed, "mon", "m").admin
    assert mon.command("serverStatus")["ok"] == 1
    mon.command("currentOp")
    assert code_of(lambda: mon.client.test.c.find_one()) == 13
    assert code_of(lambda: mon.command("shutdown")) == 13

    anyreader = login(authed, "anyreader", "a")
    assert anyreader.test.c.find_one()["_id"] == 1
    assert code_of(lambda: anyreader.test.c.delete_many({})) == 13
    # Credentials are not readable without user administration.
    assert code_of(lambda: anyreader.admin.system.users.find_one()) == 13

    # listDatabases shows a user the databases it holds roles on.
    names = login(authed, "reader", "r", source="test").list_database_names()
    assert names == ["test"]


def test_user_administration(authed):
    ua = login(authed, "ua", "u", source="test").test
    ua.command("createUser", "temp", pwd="t", roles=["read"])
    # userAdmin of `test` cannot hand out roles elsewhere.
    assert code_of(lambda: ua.command("createUser", "esc", pwd="e",
                                      roles=[{"role": "root", "db": "admin"}])) == 13
    assert code_of(lambda: ua.command("grantRolesToUser", "temp",
                                      roles=[{"role": "read", "db": "other"}])) == 13
    info = ua.command("usersInfo", "temp")["users"]
    assert len(info) == 1 and info[0]["user"] == "temp" and info[0]["db"] == "test"
    assert sorted(info[0]["mechanisms"]) == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    assert "credentials" not in info[0]
    shown = ua.command("usersInfo", "temp", showCredentials=True)["users"][0]["credentials"]
    for mech in shown.values():
        # Salted keys only: nothing like the password is stored.
        assert set(mech) == {"iterationCount", "salt", "storedKey", "serverKey"}
        assert "t" not in mech.values()

    temp = login(authed, "temp", "t", source="test").test
    assert code_of(lambda: temp.c.insert_one({})) == 13
    ua.command("grantRolesToUser", "temp", roles=["readWrite"])
    temp.c.insert_one({"_id": "granted"})   # the same connection sees the grant at once
    ua.command("revokeRolesFromUser", "temp", roles=["readWrite"])
    assert code_of(lambda: temp.c.insert_one({})) == 13
    ua.command("updateUser", "temp", pwd="t2")
    assert code_of(lambda: login(authed, "temp", "t", source="test").test.c.find_one()) == 18
    assert login(authed, "temp", "t2", source="test").test.c.find_one() is not None
    # A user can always read its own description.
    assert temp.command("usersInfo", "temp")["users"][0]["user"] == "temp"

    assert code_of(lambda: ua.command("createUser", "temp", pwd="t", roles=[])) == 51003
    assert code_of(lambda: ua.command("createUser", "bad", pwd="t", roles=["nosuch"])) == 31
    assert code_of(lambda: ua.command("createUser", "bad", pwd="t",
                                      roles=["readAnyDatabase"])) == 31
    # mongod's words for an empty password come from ICU.
    assert code_of(lambda: ua.command("createUser", "bad", pwd="", roles=[])) == 50687
    ua.command("dropUser", "temp")
    assert code_of(lambda: ua.command("dropUser", "temp")) == 11
    # A dropped user's open connection holds no roles any more.
    assert code_of(lambda: temp.c.find_one()) == 13
    assert ua.command("usersInfo", 1)["users"] and all(
        u["db"] == "test" for u in ua.command("usersInfo", 1)["users"])


def test_users_survive_restart_and_kill9(authed):
    authed.kill9()
    authed.start()
    c = login(authed, "root", "rootpw")
    assert c.test.c.find_one({"_id": 1})["v"] == "secret"
    assert code_of(lambda: authed.client().test.c.find_one()) == 13


def test_without_auth_credentials_are_still_checked():
    s = Siltd().start()
    try:
        plain = s.client()
        plain.admin.command("createUser", "u", pwd="p", roles=["root"])
        assert login(s, "u", "p").admin.command("ping")["ok"] == 1
        assert code_of(lambda: login(s, "u", "bad").admin.command("ping")) == 18
        # Without --auth, an unauthenticated client may do anything, as with mongod.
        plain.test.c.insert_one({})
    finally:
        s.stop()
        s.cleanup()
