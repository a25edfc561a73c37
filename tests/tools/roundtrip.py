"""The MongoDB database tools against a real siltd: dump -> drop -> restore of a database with
every kind of index siltd builds, users and roles, then mongostat, mongotop, mongoexport,
mongoimport and mongofiles. Each tool must exit 0 and the restore must give back identical
documents, indexes, users and roles.

The tools are built from MongoDB's mongo-tools source (its Go module cannot come from the
module proxy, so `make test` cannot build them); see docs/tools.md for how. Run:

    target/compat-venv/bin/python tests/tools/roundtrip.py --tools DIR [--auth] [--replset] [--tls]

DIR holds the mongodump, mongorestore, mongostat, mongotop, mongoexport, mongoimport and
mongofiles binaries. Prints one line per tool run with its exit status, then the comparison.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "compat"))
from conftest import Siltd  # noqa: E402

DB = "ecotools"


def populate(c):
    db = c[DB]
    db.orders.insert_many([{"_id": i, "sku": f"s{i % 50}", "qty": i % 7, "email": f"u{i}@x",
                            "tags": ["a", "b"] if i % 2 else ["c"], "at": i * 1000,
                            "body": f"word{i % 13} other"} for i in range(2000)])
    db.orders.create_index("email", unique=True)
    db.orders.create_index([("sku", 1), ("qty", -1)])
    db.orders.create_index("tags")
    db.orders.create_index("opt", sparse=True)
    db.orders.create_index("qty", name="qty_partial", partialFilterExpression={"qty": {"$gt": 3}})
    db.orders.create_index("at", expireAfterSeconds=10**9)
    db.orders.create_index([("body", "text")])
    db.orders.create_index("hid", hidden=True)
    db.command("create", "capped", capped=True, size=65536, max=100)
    db.capped.insert_many([{"n": i} for i in range(150)])
    db.command("create", "coll", collation={"locale": "en", "strength": 2})
    db.coll.insert_many([{"s": "A"}, {"s": "a"}])
    db.coll.create_index("s")
    db.command("create", "v", viewOn="orders", pipeline=[{"$match": {"qty": 1}}])
    db.command("create", "clustered", clusteredIndex={"key": {"_id": 1}, "unique": True},
               changeStreamPreAndPostImages={"enabled": True},
               storageEngine={"wiredTiger": {"configString": "block_compressor=zstd"}})
    db.clustered.insert_many([{"_id": i} for i in range(10)])
    db.command("createRole", "ecoReader", privileges=[
        {"resource": {"db": DB, "collection": "orders"}, "actions": ["find"]}], roles=[])
    db.command("createUser", "eco", pwd="ecopw", roles=["ecoReader", "readWrite"])


def snapshot(c):
    db = c[DB]
    out = {}
    for name in sorted(db.list_collection_names()):
        info = next(db.list_collections(filter={"name": name}))
        out[name] = {
            "options": info.get("options"),
            "docs": list(db[name].find().sort("_id", 1)) if info["type"] == "collection" else None,
            "indexes": sorted((dict(i) for i in db[name].list_indexes()), key=lambda i: i["name"])
            if info["type"] == "collection" else None,
        }
    users = c.admin.command("usersInfo", {"forAllDBs": True}, showCredentials=True)["users"]
    users = sorted((u for u in users if u["db"] == DB), key=lambda u: u["user"])
    for u in users:
        u.pop("userId", None)
    roles = c[DB].command("rolesInfo", 1, showPrivileges=True)["roles"]
    return out, users, roles


def run(tool_dir, name, *args):
    p = subprocess.run([os.path.join(tool_dir, name), *args], capture_output=True, text=True)
    print(f"{name} {' '.join(args)}: exit {p.returncode}")
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:])
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("--auth", action="store_true")
    ap.add_argument("--replset", action="store_true")
    ap.add_argument("--tls", action="store_true")
    a = ap.parse_args()
    extra = (["--auth"] if a.auth else []) + (["--replSet", "rs0"] if a.replset else [])
    kw = {"directConnection": True}
    params = "directConnection=true"
    if a.tls:
        from test_tls import make_pki

        pki = make_pki("silt-tools-tls-")
        ca, server = pki["ca.pem"], pki["server.pem"]
        extra += ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", server]
        kw.update(tls=True, tlsCAFile=ca)
        params += f"&tls=true&tlsCAFile={ca}"
    s = Siltd(extra=extra).start()
    failures = 0
    try:
        uri = f"mongodb://127.0.0.1:{s.port}/?{params}"
        if a.auth:
            s.client(**kw).admin.command("createUser", "root", pwd="rootpw", roles=["root"])
            kw.update(username="root", password="rootpw", authSource="admin")
            uri = f"mongodb://root:rootpw@127.0.0.1:{s.port}/?authSource=admin&{params}"
        c = s.client(**kw)
        populate(c)
        before = snapshot(c)
        out = tempfile.mkdtemp(prefix="silt-dump-")
        steps = [
            ("mongodump", "--uri", uri, "--db", DB, "--dumpDbUsersAndRoles", "--out", out),
        ]
        for st in steps:
            failures += run(a.tools, *st).returncode != 0
        c[DB].command("dropAllUsersFromDatabase")
        c[DB].command("dropAllRolesFromDatabase")
        c.drop_database(DB)
        failures += run(a.tools, "mongorestore", "--uri", uri, "--db", DB, "--restoreDbUsersAndRoles",
                        os.path.join(out, DB)).returncode != 0
        after = snapshot(c)
        for what, x, y in zip(("collections", "users", "roles"), before, after):
            same = x == y
            print(f"{what} identical after dump/drop/restore: {same}")
            if not same:
                failures += 1
                print("before:", x if what != "collections" else {k: v["indexes"] for k, v in x.items()})
                print("after: ", y if what != "collections" else {k: v["indexes"] for k, v in y.items()})
        # A full dump (every database, admin's users and roles included) restored with --drop.
        full = tempfile.mkdtemp(prefix="silt-dump-all-")
        failures += run(a.tools, "mongodump", "--uri", uri, "--out", full).returncode != 0
        failures += run(a.tools, "mongorestore", "--uri", uri, "--drop", full).returncode != 0
        print(f"identical after a full dump and restore --drop: {snapshot(c) == before}")
        failures += snapshot(c) != before
        # Only the users and roles, from the full dump (what a migration of accounts runs).
        c[DB].command("dropAllUsersFromDatabase")
        c[DB].command("dropAllRolesFromDatabase")
        failures += run(a.tools, "mongorestore", "--uri", uri, "--nsInclude", "admin.*", full).returncode != 0
        same = snapshot(c)[1:] == before[1:]
        print(f"users and roles identical after mongorestore --nsInclude 'admin.*': {same}")
        failures += not same
        # Monitoring, for a few seconds each.
        failures += run(a.tools, "mongostat", "--uri", uri, "--rowcount", "3", "1").returncode != 0
        failures += run(a.tools, "mongostat", "--uri", uri, "--rowcount", "2", "--json", "1").returncode != 0
        failures += run(a.tools, "mongotop", "--uri", uri, "--rowcount", "2", "1").returncode != 0
        failures += run(a.tools, "mongotop", "--uri", uri, "--rowcount", "2", "--json", "1").returncode != 0
        # Export, import, GridFS.
        exp = os.path.join(out, "orders.json")
        failures += run(a.tools, "mongoexport", "--uri", uri, "--db", DB, "--collection", "orders",
                        "--out", exp).returncode != 0
        failures += run(a.tools, "mongoimport", "--uri", uri, "--db", DB, "--collection", "imported",
                        "--file", exp).returncode != 0
        n = c[DB].imported.count_documents({})
        print(f"mongoimport brought back {n} of 2000 documents")
        failures += n != 2000
        csv = os.path.join(out, "orders.csv")
        failures += run(a.tools, "mongoexport", "--uri", uri, "--db", DB, "--collection", "orders",
                        "--type", "csv", "--fields", "_id,sku,qty", "--out", csv).returncode != 0
        failures += run(a.tools, "mongoimport", "--uri", uri, "--db", DB, "--collection", "fromcsv",
                        "--type", "csv", "--headerline", "--file", csv).returncode != 0
        blob = os.path.join(out, "blob.bin")
        with open(blob, "wb") as f:
            f.write(os.urandom(600_000))
        failures += run(a.tools, "mongofiles", "--uri", uri, "--db", DB, "put", blob).returncode != 0
        failures += run(a.tools, "mongofiles", "--uri", uri, "--db", DB, "list").returncode != 0
        back = os.path.join(out, "blob.back")
        failures += run(a.tools, "mongofiles", "--uri", uri, "--db", DB, "get", blob,
                        "--local", back).returncode != 0
        same = open(blob, "rb").read() == open(back, "rb").read()
        print(f"mongofiles get returned the same bytes: {same}")
        failures += not same
        failures += run(a.tools, "mongofiles", "--uri", uri, "--db", DB, "delete", blob).returncode != 0
    finally:
        s.stop()
        s.cleanup()
    print(f"{failures} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
