"""What the database tools, mongosh and Compass send, replayed through pymongo: serverStatus's
sections in mongod's types (mongostat, mongotop, Compass's performance tab), connectionStatus
with showPrivileges (Compass's connect), getParameter and admin.system.version (mongodump and
mongorestore's auth checks), rolesInfo and user-defined roles, _mergeAuthzCollections
(mongorestore's users and roles), the read/write concern defaults, logRotate, setParameter
logLevel, lockInfo, features, and the specification differences the drivers' tests found."""
import datetime
import glob
import os
import time

import pytest
from bson import Int64
from pymongo.errors import OperationFailure

from conftest import Siltd


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def test_server_status_sections_in_mongods_types(client, db):
    db.c.insert_one({"a": 1})
    before = client.admin.command("serverStatus")
    db.c.find_one()
    st = client.admin.command("serverStatus")
    net = st["network"]
    for k in ("bytesIn", "bytesOut", "numRequests", "physicalBytesIn", "physicalBytesOut"):
        assert isinstance(net[k], Int64), k
    assert net["numRequests"] > before["network"]["numRequests"]
    assert net["bytesIn"] > before["network"]["bytesIn"]
    assert net["bytesOut"] > before["network"]["bytesOut"]
    for k in ("insert", "query", "update", "delete", "getmore", "command"):
        assert isinstance(st["opcounters"][k], Int64)
        assert st["opcountersRepl"][k] == 0
    assert st["opcounters"]["insert"] >= 1
    for k in ("current", "available", "totalCreated"):
        assert k in st["connections"]
    assert isinstance(st["mem"]["resident"], int) and st["mem"]["resident"] > 0
    assert st["mem"]["bits"] == 64
    gl = st["globalLock"]
    assert isinstance(gl["totalTime"], Int64)
    assert gl["currentQueue"] == {"total": 0, "readers": 0, "writers": 0}
    # The serverStatus running now is an active reader.
    assert gl["activeClients"]["total"] >= 1
    assert st["locks"]["Global"]["acquireCount"]["r"] > 0
    for k in ("regular", "warning", "msg", "user", "rollovers"):
        assert k in st["asserts"]
    with pytest.raises(OperationFailure):
        db.command("nosuchcommand")
    assert client.admin.command("serverStatus")["asserts"]["user"] > st["asserts"]["user"]
    ei = st["extra_info"]
    assert ei["note"] == "fields vary by platform"
    assert isinstance(ei["page_faults"], Int64)
    assert ei["maximum_resident_set_kb"] > 0
    assert isinstance(st["uptime"], float) and isinstance(st["uptimeMillis"], Int64)
    assert "localTime" in st


def test_connection_status_show_privileges_without_auth(client):
    info = client.admin.command("connectionStatus", showPrivileges=True)["authInfo"]
    assert info == {"authenticatedUsers": [], "authenticatedUserRoles": [],
                    "authenticatedUserPrivileges": []}
    assert "authenticatedUserPrivileges" not in client.admin.command("connectionStatus")["authInfo"]
    assert code_of(lambda: client.admin.command("connectionStatus", showPrivileges="yes")) == 14


def test_parameters_and_system_version(client):
    r = client.admin.command("getParameter", 1, authSchemaVersion=1, featureCompatibilityVersion=1)
    assert r["authSchemaVersion"] == 5
    assert r["featureCompatibilityVersion"] == {"version": "7.0"}
    docs = list(client.admin["system.version"].find())
    assert {"_id": "featureCompatibilityVersion", "version": "7.0"} in docs
    assert "admin" in client.list_database_names()


def test_log_level_lock_info_features(client):
    assert client.admin.command("getParameter", 1, logLevel=1)["logLevel"] == 0
    assert client.admin.command("setParameter", 1, logLevel=1)["was"] == 0
    assert client.admin.command("getParameter", 1, logLevel=1)["logLevel"] == 1
    assert client.admin.command("setParameter", 1, logLevel=0)["was"] == 1
    assert code_of(lambda: client.admin.command("setParameter", 1, logLevel=9)) == 2
    assert client.admin.command("lockInfo")["lockInfo"] == []
    assert isinstance(client.admin.command("features")["oidMachine"], int)
    # logRotate without a log file has nothing to rotate, and succeeds as mongod does.
    client.admin.command("logRotate")


def test_rw_concern_defaults_need_a_replica_set(client):
    assert code_of(lambda: client.admin.command("getDefaultRWConcern")) == 51300
    assert code_of(lambda: client.admin.command(
        "setDefaultRWConcern", defaultWriteConcern={"w": 1})) == 51300


def test_rw_concern_defaults_on_a_replica_set():
    s = Siltd(extra=["--replSet", "rs0"]).start()
    try:
        c = s.client(directConnection=True)
        r = c.admin.command("getDefaultRWConcern")
        assert r["defaultReadConcernSource"] == "implicit"
        assert r["defaultWriteConcernSource"] == "implicit"
        assert r["defaultWriteConcern"] == {"w": "majority", "wtimeout": 0}
        r = c.admin.command("setDefaultRWConcern", defaultReadConcern={"level": "majority"},
                            defaultWriteConcern={"w": 1})
        assert r["defaultReadConcern"] == {"level": "majority"}
        assert r["defaultWriteConcern"] == {"w": 1, "wtimeout": 0}
        assert r["defaultWriteConcernSource"] == "global"
        assert code_of(lambda: c.admin.command(
            "setDefaultRWConcern", defaultReadConcern={"level": "snapshot"})) == 2
        assert code_of(lambda: c.admin.command(
            "setDefaultRWConcern", defaultWriteConcern={"w": 3})) == 100
        assert code_of(lambda: c.admin.command("setDefaultRWConcern")) == 2
        s.stop()
        s.start()
        c = s.client(directConnection=True)
        r = c.admin.command("getDefaultRWConcern")
        assert r["defaultReadConcern"] == {"level": "majority"}
        assert r["defaultWriteConcernSource"] == "global"
    finally:
        s.stop()
        s.cleanup()


def test_log_rotate_renames_the_file_aside():
    s = Siltd()
    logpath = os.path.join(s.dbpath, "rot.log")
    s.extra = ["--logpath", logpath]
    s.start()
    try:
        c = s.client()
        c.admin.command("ping")
        c.admin.command("logRotate")
        c.admin.command("logRotate", "server")
        assert code_of(lambda: c.admin.command("logRotate", "nonsense")) == 4
        c.admin.command("setParameter", 1, logLevel=1)
        c.test.c.insert_one({})
        aside = glob.glob(logpath + ".*")
        assert len(aside) == 2, aside
        assert os.path.exists(logpath)
        deadline = time.time() + 10
        while os.path.getsize(logpath) == 0 and time.time() < deadline:
            c.admin.command("ping")
            time.sleep(0.1)
        assert os.path.getsize(logpath) > 0
    finally:
        s.stop()
        s.cleanup()


def test_top_names_renames_by_their_namespace(client, db):
    db.a.insert_one({})
    client.admin.command("renameCollection", f"{db.name}.a", to=f"{db.name}.b")
    totals = client.admin.command("top")["totals"]
    assert not any(k.startswith(f"admin.{db.name}") for k in totals), list(totals)
    assert f"{db.name}.a" in totals


def test_capped_coll_stats(db):
    db.create_collection("cap", capped=True, size=100_000, max=50)
    s = db.command("collStats", "cap")
    assert s["capped"] is True and s["max"] == 50 and s["maxSize"] == 100_096
    assert db.command("collStats", "cap", scale=1024)["maxSize"] == 100_096 // 1024
    db.create_collection("nomax", capped=True, size=8192)
    assert db.command("collStats", "nomax")["max"] == 0
    db.plain.insert_one({})
    assert "maxSize" not in db.command("collStats", "plain")


def test_get_more_without_batch_size_returns_the_rest(db):
    db.c.insert_many([{"_id": i} for i in range(500)])
    r = db.command("find", "c", batchSize=2)
    cid = r["cursor"]["id"]
    assert len(r["cursor"]["firstBatch"]) == 2
    r = db.command("getMore", cid, collection="c")
    assert len(r["cursor"]["nextBatch"]) == 498 and r["cursor"]["id"] == 0


def test_clustered_collections_list_their_index(db):
    db.command("create", "cl", clusteredIndex={"key": {"_id": 1}, "unique": True})
    info = next(db.list_collections(filter={"name": "cl"}))
    assert info["options"]["clusteredIndex"] == {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": True}
    assert "idIndex" not in info
    assert list(db.cl.list_indexes()) == [
        {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": True, "clustered": True}]
    db.plain.insert_one({})
    assert "idIndex" in next(db.list_collections(filter={"name": "plain"}))


def test_merge_duplicate_key_names_key(db):
    db.src.insert_many([{"_id": 1, "k": "x"}])
    db.dst.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$merge": {"into": "dst", "whenMatched": "fail"}}]))
    assert e.value.code == 11000
    assert e.value.details["keyPattern"] == {"_id": 1}
    assert e.value.details["keyValue"] == {"_id": 1}
    db.dst2.create_index("k", unique=True)
    db.dst2.insert_one({"k": "x"})
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$merge": {"into": "dst2", "on": "k", "whenMatched": "fail"}}]))
    assert e.value.details["keyPattern"] == {"k": 1} and e.value.details["keyValue"] == {"k": "x"}


def test_mongorestore_index_and_collection_sequence(db):
    """mongorestore: create with the dumped options and idIndex, then createIndexes with
    ignoreUnknownIndexOptions and the dumped specs (which may carry options of older
    servers)."""
    db.command("create", "orders", idIndex={"key": {"_id": 1}, "name": "_id_", "v": 2},
               storageEngine={"wiredTiger": {"configString": ""}})
    db.orders.insert_many([{"_id": i, "sku": f"s{i}", "qty": i} for i in range(10)])
    db.command("createIndexes", "orders", ignoreUnknownIndexOptions=True, indexes=[
        {"key": {"sku": 1}, "name": "sku_1", "unique": True, "v": 2, "ns": f"{db.name}.orders",
         "background": True, "safe": None},
        {"key": {"qty": -1}, "name": "qty_-1", "sparse": True, "v": 1},
        {"key": {"qty": 1, "sku": 1}, "name": "p", "partialFilterExpression": {"qty": {"$gt": 3}},
         "storageEngine": {"wiredTiger": {}}},
    ])
    names = [i["name"] for i in db.orders.list_indexes()]
    assert names == ["_id_", "sku_1", "qty_-1", "p"]
    with pytest.raises(OperationFailure) as e:
        db.orders.insert_one({"_id": 99, "sku": "s1"})
    assert e.value.code == 11000


@pytest.fixture(scope="module")
def authed():
    s = Siltd(extra=["--auth"]).start()
    root = s.client()
    root.admin.command("createUser", "root", pwd="rootpw", roles=["root"])
    yield s
    s.stop()
    s.cleanup()


def login(s, user, pwd, source="admin"):
    return s.client(username=user, password=pwd, authSource=source)


def test_roles_info_built_in(authed):
    root = login(authed, "root", "rootpw")
    r = root.test.command("rolesInfo", "read", showPrivileges=True)["roles"]
    assert len(r) == 1 and r[0]["role"] == "read" and r[0]["db"] == "test" and r[0]["isBuiltin"]
    actions = r[0]["privileges"][0]["actions"]
    assert "find" in actions and "insert" not in actions
    assert r[0]["privileges"][0]["resource"] == {"db": "test", "collection": ""}
    assert root.test.command("rolesInfo", 1)["roles"] == []
    names = {x["role"] for x in root.test.command("rolesInfo", 1, showBuiltinRoles=True)["roles"]}
    assert {"read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"} <= names
    assert "root" not in names
    assert root.test.command("rolesInfo", "nosuch")["roles"] == []
    info = root.admin.command("connectionStatus", showPrivileges=True)["authInfo"]
    assert info["authenticatedUserPrivileges"] == [{"resource": {"anyResource": True}, "actions": ["anyAction"]}]


def test_user_defined_roles_are_enforced(authed):
    root = login(authed, "root", "rootpw")
    root.shop.orders.insert_one({"_id": 1})
    root.shop.secrets.insert_one({"_id": 1})
    root.shop.command("createRole", "orderReader", privileges=[
        {"resource": {"db": "shop", "collection": "orders"}, "actions": ["find"]}], roles=[])
    root.shop.command("createRole", "orderClerk", privileges=[
        {"resource": {"db": "shop", "collection": "orders"}, "actions": ["insert"]}],
        roles=["orderReader"])
    assert code_of(lambda: root.shop.command("createRole", "orderReader", privileges=[], roles=[])) == 51002
    assert code_of(lambda: root.shop.command("createRole", "read", privileges=[], roles=[])) == 2
    assert code_of(lambda: root.shop.command("createRole", "x", privileges=[
        {"resource": {"db": "other", "collection": ""}, "actions": ["find"]}], roles=[])) == 49
    assert code_of(lambda: root.shop.command("createRole", "y", privileges=[
        {"resource": {"db": "shop", "collection": ""}, "actions": ["fly"]}], roles=[])) == 9
    assert code_of(lambda: root.shop.command("createRole", "z", privileges=[], roles=["nosuch"])) == 31
    # A cycle is refused.
    assert code_of(lambda: root.shop.command("grantRolesToRole", "orderReader", roles=["orderClerk"])) == 49
    root.shop.command("createUser", "clerk", pwd="c", roles=["orderClerk"])
    clerk = login(authed, "clerk", "c", "shop")
    assert clerk.shop.orders.find_one() == {"_id": 1}
    clerk.shop.orders.insert_one({"_id": 2})
    # A collection privilege covers the cursor's getMore too.
    assert [d["_id"] for d in clerk.shop.orders.find(batch_size=1)] == [1, 2]
    assert clerk.shop.orders.find({"_id": 1}).explain()["queryPlanner"]["namespace"] == "shop.orders"
    # What a pipeline reaches is checked too: another collection's documents stay out.
    assert code_of(lambda: list(clerk.shop.orders.aggregate([
        {"$lookup": {"from": "secrets", "localField": "_id", "foreignField": "_id", "as": "s"}}]))) == 13
    assert code_of(lambda: list(clerk.shop.orders.aggregate([{"$unionWith": "secrets"}]))) == 13
    assert code_of(lambda: list(clerk.shop.orders.aggregate([{"$out": "copy"}]))) == 13
    assert code_of(lambda: clerk.shop.secrets.find_one()) == 13
    assert code_of(lambda: clerk.shop.orders.delete_one({})) == 13
    info = clerk.shop.command("connectionStatus", showPrivileges=True)["authInfo"]
    assert info["authenticatedUserRoles"] == [{"role": "orderClerk", "db": "shop"},
                                              {"role": "orderReader", "db": "shop"}]
    assert info["authenticatedUserPrivileges"] == [
        {"resource": {"db": "shop", "collection": "orders"}, "actions": ["find", "insert"]}]
    r = root.shop.command("rolesInfo", "orderClerk", showPrivileges=True)["roles"][0]
    assert r["_id"] == "shop.orderClerk" and r["isBuiltin"] is False
    assert r["roles"] == [{"role": "orderReader", "db": "shop"}]
    assert r["inheritedRoles"] == [{"role": "orderReader", "db": "shop"}]
    assert r["inheritedPrivileges"] == info["authenticatedUserPrivileges"]
    # Changes count at once.
    root.shop.command("grantPrivilegesToRole", "orderReader", privileges=[
        {"resource": {"db": "shop", "collection": "secrets"}, "actions": ["find"]}])
    assert clerk.shop.secrets.find_one() == {"_id": 1}
    root.shop.command("revokePrivilegesFromRole", "orderReader", privileges=[
        {"resource": {"db": "shop", "collection": "secrets"}, "actions": ["find"]}])
    assert code_of(lambda: clerk.shop.secrets.find_one()) == 13
    root.shop.command("revokeRolesFromRole", "orderClerk", roles=["orderReader"])
    assert code_of(lambda: clerk.shop.orders.find_one()) == 13
    root.shop.command("updateRole", "orderClerk", roles=["read"])
    assert clerk.shop.secrets.find_one() == {"_id": 1}
    assert code_of(lambda: root.shop.command("updateRole", "orderClerk")) == 2
    assert code_of(lambda: root.shop.command("updateRole", "read", roles=[])) == 49
    # Roles live in admin.system.roles and survive a restart.
    ids = {d["_id"] for d in root.admin["system.roles"].find()}
    assert {"shop.orderReader", "shop.orderClerk"} <= ids
    assert root.admin["system.version"].find_one({"_id": "authSchema"})["currentVersion"] == 5
    authed.stop()
    authed.start()
    root = login(authed, "root", "rootpw")
    clerk = login(authed, "clerk", "c", "shop")
    assert clerk.shop.secrets.find_one() == {"_id": 1}
    # Dropping a role takes it from its users.
    root.shop.command("dropRole", "orderClerk")
    assert root.shop.command("usersInfo", "clerk")["users"][0]["roles"] == []
    assert code_of(lambda: clerk.shop.orders.find_one()) == 13
    assert root.shop.command("dropAllRolesFromDatabase")["n"] == 1
    assert root.shop.command("rolesInfo", 1)["roles"] == []


def test_merge_authz_collections_restores_users_and_roles(authed):
    """mongorestore's sequence: the dumped users and roles go into admin.tempusers and
    admin.temproles, then _mergeAuthzCollections merges them and the temporaries are dropped."""
    root = login(authed, "root", "rootpw")
    root.app.command("createRole", "appRole", privileges=[
        {"resource": {"db": "app", "collection": ""}, "actions": ["find"]}], roles=[])
    root.app.command("createUser", "appuser", pwd="secret", roles=["appRole"])
    # mongodump's reads: admin.system.users and system.roles with a db filter.
    users = list(root.admin["system.users"].find({"db": "app"}))
    roles = list(root.admin["system.roles"].find({"db": "app"}))
    assert [u["user"] for u in users] == ["appuser"] and [r["role"] for r in roles] == ["appRole"]
    assert "SCRAM-SHA-256" in users[0]["credentials"]
    root.app.command("dropAllUsersFromDatabase")
    root.app.command("dropAllRolesFromDatabase")
    assert code_of(lambda: login(authed, "appuser", "secret", "app").app.c.find_one()) == 18
    v = root.admin.command("getParameter", 1, authSchemaVersion=1)["authSchemaVersion"]
    assert v == 5
    root.admin.tempusers.insert_many(users)
    root.admin.temproles.insert_many(roles)
    root.admin.command("_mergeAuthzCollections", tempUsersCollection="admin.tempusers",
                       tempRolesCollection="admin.temproles", drop=False, db="app")
    root.admin.tempusers.drop()
    root.admin.temproles.drop()
    app = login(authed, "appuser", "secret", "app")
    root.app.c.insert_one({"_id": 1})
    assert app.app.c.find_one() == {"_id": 1}
    assert code_of(lambda: app.app.c.insert_one({})) == 13
    # With drop: true, what the dump lacks goes.
    root.app.command("createUser", "extra", pwd="x", roles=["read"])
    root.admin.tempusers.insert_many(users)
    root.admin.command("_mergeAuthzCollections", tempUsersCollection="admin.tempusers",
                       drop=True, db="app")
    assert [u["user"] for u in root.app.command("usersInfo", 1)["users"]] == ["appuser"]
    # Other databases' users are untouched.
    assert root.admin.command("usersInfo", "root")["users"]


def test_what_mongorestore_and_old_dumps_send(db):
    """Options of older servers that change no answer: accepted as mongod accepts them."""
    db.command("create", "a", autoIndexId=True, flags=1)
    assert "flags" not in db.a.options() and "autoIndexId" not in db.a.options()
    assert code_of(lambda: db.command("create", "b", autoIndexId=False)) == 50001
    # `{_id: 1}` in any numeric type is the plain `_id` index.
    db.command("create", "c", idIndex={"key": {"_id": 1.0}, "name": "_id_"})
    db.command("create", "d", idIndex={"key": {"_id": Int64(1)}, "name": "_id_", "v": 2})
    assert code_of(lambda: db.command("create", "e", idIndex={"key": {"_id": 1}, "name": "_id_", "x": 1})) == 197
    assert code_of(lambda: db.command("create", "e", idIndex={"key": {"_id": -1}, "name": "_id_"})) == 2
    # dropDups: accepted and dropped, as mongod does.
    db.command("createIndexes", "a", indexes=[{"key": {"k": 1}, "name": "k_1", "unique": True, "dropDups": True}])
    assert "dropDups" not in [i for i in db.a.list_indexes() if i["name"] == "k_1"][0]
    # Pre- and post-images are kept in the options (only change streams read them).
    db.command("create", "img", changeStreamPreAndPostImages={"enabled": True})
    assert db.img.options()["changeStreamPreAndPostImages"] == {"enabled": True}
    db.command("collMod", "img", changeStreamPreAndPostImages={"enabled": False})
    assert "changeStreamPreAndPostImages" not in db.img.options()
    db.command("collMod", "img", changeStreamPreAndPostImages={"enabled": True})
    assert db.img.options()["changeStreamPreAndPostImages"] == {"enabled": True}
    assert code_of(lambda: db.command("create", "x", changeStreamPreAndPostImages={"on": 1})) == 9
    # Internal arguments that change nothing on one node, and the inverted default.
    db.command("find", "a", mirrored=True, sampleId=bson_uuid(), readOnce=True)
    db.command("insert", "a", documents=[{"_id": 9}], allowImplicitCollectionCreation=True)
    assert code_of(lambda: db.command("insert", "zz", documents=[{}], allowImplicitCollectionCreation=False)) == 238
    db.command("listCollections", includePendingDrops=True)
    db.command("findAndModify", "a", query={"_id": 9}, update={"$set": {"x": 1}}, batchSize=1, singleBatch=True)
    # No plan cache: an empty one.
    assert list(db.a.aggregate([{"$planCacheStats": {}}])) == []
    assert code_of(lambda: list(db.a.aggregate([{"$match": {}}, {"$planCacheStats": {}}]))) == 40602
    # A background validate answers as the foreground one; with full, refused as by mongod.
    assert db.command("validate", "a", background=True)["valid"] is True
    assert code_of(lambda: db.command("validate", "a", background=True, full=True)) == 72
    # commitQuorum needs a replica set.
    assert code_of(lambda: db.command("createIndexes", "a", indexes=[{"key": {"q": 1}, "name": "q_1"}],
                                      commitQuorum="majority")) == 2


def bson_uuid():
    import uuid

    from bson.binary import Binary
    return Binary.from_uuid(uuid.uuid4())


def test_replica_set_quorums_and_linearizable_reads():
    s = Siltd(extra=["--replSet", "rs0"]).start()
    try:
        db = s.client(directConnection=True).t
        db.c.insert_one({"_id": 1})
        for q in ("votingMembers", "majority", 1, 0):
            db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1"}], commitQuorum=q)
        assert code_of(lambda: db.command("createIndexes", "c", indexes=[{"key": {"b": 1}, "name": "b_1"}],
                                          commitQuorum=2)) == 100
        r = db.command("find", "c", readConcern={"level": "linearizable"})
        assert r["cursor"]["firstBatch"] == [{"_id": 1}]
    finally:
        s.stop()
        s.cleanup()


def test_own_operations_and_effective_users(authed):
    root = login(authed, "root", "rootpw")
    root.ops.command("createUser", "worker", pwd="w", roles=["readWrite"])
    worker = login(authed, "worker", "w", "ops")
    # Without inprog, only one's own operations: $ownOps and $currentOp without allUsers.
    mine = worker.admin.command({"currentOp": 1, "$ownOps": True})["inprog"]
    assert mine and all(o["effectiveUsers"] == [{"user": "worker", "db": "ops"}] for o in mine)
    assert code_of(lambda: worker.admin.command("currentOp")) == 13
    agg = list(worker.admin.aggregate([{"$currentOp": {}}]))
    assert agg and all(o["effectiveUsers"] == [{"user": "worker", "db": "ops"}] for o in agg)
    assert code_of(lambda: list(worker.admin.aggregate([{"$currentOp": {"allUsers": True}}]))) == 13
    every = list(root.admin.aggregate([{"$currentOp": {"allUsers": True, "idleConnections": True}}]))
    assert {"user": "worker", "db": "ops"} in [u for o in every for u in o.get("effectiveUsers", [])]


def test_restricted_users_are_not_restored_unrestricted(authed):
    root = login(authed, "root", "rootpw")
    root.admin.tempusers.drop()
    root.admin.tempusers.insert_one({
        "_id": "r.restricted", "userId": bson_uuid(), "user": "restricted", "db": "r",
        "credentials": {}, "roles": [],
        "authenticationRestrictions": [{"clientSource": ["10.0.0.0/8"]}]})
    assert code_of(lambda: root.admin.command("_mergeAuthzCollections", tempUsersCollection="admin.tempusers",
                                              drop=False, db="")) == 238
    root.admin.tempusers.drop()
    assert root.r.command("usersInfo", "restricted")["users"] == []


def test_packaged_mongod_conf_settings_start():
    """Settings of the mongod.conf that MongoDB's packages install, and common tuning of
    another engine: accepted, they change nothing here."""
    s = Siltd()
    conf = os.path.join(s.dbpath, "mongod.conf")
    with open(conf, "w") as f:
        f.write("""
storage:
  wiredTiger:
    engineConfig:
      cacheSizeGB: 1
    collectionConfig:
      blockCompressor: zstd
net:
  ipv6: true
  compression:
    compressors: zstd,snappy
processManagement:
  timeZoneInfo: /usr/share/zoneinfo
replication:
  oplogSizeMB: 1024
security:
  javascriptEnabled: false
systemLog:
  timeStampFormat: iso8601-utc
setParameter:
  diagnosticDataCollectionEnabled: false
""")
    s.extra = ["--config", conf]
    s.start()
    try:
        assert s.client().admin.command("ping")["ok"] == 1
    finally:
        s.stop()
        s.cleanup()


def test_compass_connect_and_performance_sequence(client, db):
    """What Compass sends when it loads an instance, a database, a collection's stats and
    indexes, and each second of its performance tab (read from its data service)."""
    a = client.admin
    db.c.insert_many([{"_id": i, "k": i % 3} for i in range(10)])
    db.c.create_index("k")
    st = a.command({"connectionStatus": 1, "showPrivileges": True})
    assert isinstance(st["authInfo"]["authenticatedUsers"], list)
    h = a.command("hostInfo")
    assert isinstance(h["os"]["type"], str) and h["system"]["memSizeMB"] > 0 and h["system"]["numCores"] >= 1
    b = a.command("buildInfo")
    assert "ferretdb" not in b and len(b["versionArray"]) >= 3 and isinstance(b["modules"], list)
    assert a.command({"getParameter": 1, "featureCompatibilityVersion": 1})["featureCompatibilityVersion"]["version"] == "7.0"
    assert code_of(lambda: a.command("atlasVersion")) == 59
    assert list(a.atlascli.aggregate([{"$match": {"managedClusterType": "atlasCliLocalDevCluster"}},
                                      {"$group": {"_id": 1, "n": {"$sum": 1}}}])) == []
    with pytest.raises(OperationFailure) as e:
        a.command({"getParameter": "foo"})
    assert "documentdb_api" not in str(e.value)
    assert db.name in [d["name"] for d in a.command({"listDatabases": 1, "nameOnly": True})["databases"]]
    s = db.command("dbStats")
    for k in ("collections", "objects", "indexes", "storageSize", "dataSize", "indexSize"):
        assert k in s
    colls = db.command({"listCollections": 1, "filter": {}, "cursor": {}, "nameOnly": False,
                        "authorizedCollections": False})["cursor"]["firstBatch"]
    assert colls[0]["info"]["readOnly"] is False
    stats = list(db.c.aggregate([
        {"$collStats": {"storageStats": {}}},
        {"$group": {"_id": None, "capped": {"$first": "$storageStats.capped"},
                    "count": {"$sum": "$storageStats.count"},
                    "size": {"$sum": {"$toDouble": "$storageStats.size"}},
                    "storageSize": {"$sum": {"$toDouble": "$storageStats.storageSize"}},
                    "totalIndexSize": {"$sum": {"$toDouble": "$storageStats.totalIndexSize"}},
                    "freeStorageSize": {"$sum": {"$toDouble": "$storageStats.freeStorageSize"}},
                    "unscaledCollSize": {"$sum": {"$multiply": [{"$toDouble": "$storageStats.avgObjSize"},
                                                                {"$toDouble": "$storageStats.count"}]}},
                    "nindexes": {"$max": "$storageStats.nindexes"}}},
        {"$addFields": {"avgObjSize": {"$cond": {"if": {"$ne": ["$count", 0]},
                                                 "then": {"$divide": ["$unscaledCollSize", {"$toDouble": "$count"}]},
                                                 "else": 0}}}}]))
    assert len(stats) == 1 and stats[0]["count"] == 10 and stats[0]["nindexes"] == 2
    sizes = list(db.c.aggregate([{"$collStats": {"storageStats": {}}},
                                 {"$project": {"indexSizes": {"$objectToArray": "$storageStats.indexSizes"}}},
                                 {"$unwind": "$indexSizes"},
                                 {"$group": {"_id": "$indexSizes.k", "size": {"$sum": {"$toDouble": "$indexSizes.v"}}}}]))
    assert sorted(x["_id"] for x in sizes) == ["_id_", "k_1"]
    usage = list(db.c.aggregate([{"$indexStats": {}},
                                 {"$project": {"name": 1, "usageHost": "$host", "usageCount": "$accesses.ops",
                                               "usageSince": "$accesses.since", "building": 1}}]))
    assert {u["name"] for u in usage} == {"_id_", "k_1"}
    list(a.aggregate([{"$currentOp": {"allUsers": True, "localOps": False}},
                      {"$match": {"ns": f"{db.name}.c", "active": True, "command.createIndexes": {"$exists": True}}}]))
    # The performance tab, each second.
    ss = a.command("serverStatus")
    assert isinstance(ss["localTime"], datetime.datetime)
    for k in ("insert", "query", "update", "delete", "command", "getmore"):
        assert k in ss["opcounters"]
    assert "bytesIn" in ss["network"] and "bytesOut" in ss["network"] and "current" in ss["connections"]
    assert "virtual" in ss["mem"] and "resident" in ss["mem"]
    for part in ("activeClients", "currentQueue"):
        assert {"readers", "writers"} <= set(ss["globalLock"][part])
    top = a.command("top")["totals"]
    for ns, v in top.items():
        if ns != "note":
            assert {"time"} <= set(v["readLock"]) and "time" in v["writeLock"] and "time" in v["total"]
    ops = list(a.aggregate([{"$currentOp": {"allUsers": True, "idleConnections": False, "truncateOps": False}}]))
    for o in ops:
        for k in ("op", "microsecs_running", "active", "waitingForLock", "opid", "client"):
            assert k in o, k
    # Compass kills with `comment: null`.
    assert a.command({"killOp": 1, "op": 2**30, "comment": None})["ok"] == 1


def test_client_digested_passwords(authed):
    """mongosh's `passwordDigestor: "client"`: `digestPassword: false` with a password the
    client already digested, for SCRAM-SHA-1 only (as mongod)."""
    import hashlib
    root = login(authed, "root", "rootpw")
    digest = hashlib.md5(b"dig:mongo:secret1").hexdigest()
    root.dg.command("createUser", "dig", pwd=digest, digestPassword=False, roles=["read"],
                    mechanisms=["SCRAM-SHA-1"])
    c = authed.client(username="dig", password="secret1", authSource="dg", authMechanism="SCRAM-SHA-1")
    assert c.dg.command("ping")["ok"] == 1
    assert code_of(lambda: root.dg.command("createUser", "dig2", pwd=digest, digestPassword=False,
                                           roles=[])) == 2
    digest2 = hashlib.md5(b"dig:mongo:secret2").hexdigest()
    root.dg.command("updateUser", "dig", pwd=digest2, digestPassword=False)
    c = authed.client(username="dig", password="secret2", authSource="dg", authMechanism="SCRAM-SHA-1")
    assert c.dg.command("ping")["ok"] == 1


def test_localhost_exception_can_be_closed():
    s = Siltd(extra=["--auth", "--setParameter", "enableLocalhostAuthBypass=false"]).start()
    try:
        c = s.client()
        assert code_of(lambda: c.admin.command("createUser", "root", pwd="pw", roles=["root"])) == 13
    finally:
        s.stop()
        s.cleanup()
