"""The exactness corpus: commands and the replies mongod 7.0 gives them, one JSON file per
command in this folder. Each case names a command document (extended JSON, so types are
exact) and what must come back: an error's `code`, `codeName` and `errmsg`, or fields of a
successful reply. The expected values are mongod's, read from its source and from test
suites that run against it, so the same corpus can be replayed against a real mongod:

    python3 tests/corpus/corpus.py --uri mongodb://localhost:27017   # any server
    python3 tests/corpus/corpus.py --siltd target/release/siltd      # a fresh siltd

`tests/compat/test_corpus.py` runs every case against siltd in `make test`.

A case:
    {"name": "...", "setup": [<command>...], "run": <command>,
     "expect": {"code": 2, "codeName": "BadValue", "errmsg": "..."}   # or
     "expect": {"ok": 1, "reply": {<field or dotted path>: <value>...}}}   # null: absent

Documents with a repeated key (which JSON objects cannot hold) are written
{"$repeated": [["k", v], ["k", v]]} and sent as raw BSON with both elements.
"""
import argparse
import glob
import json
import os
import sys

import bson
from bson import json_util
from bson.raw_bson import RawBSONDocument
from bson.son import SON

HERE = os.path.dirname(os.path.abspath(__file__))
DB = "corpus"


def _pairs(pairs):
    return SON(pairs)


def build(v):
    """A JSON value as the BSON to send: extended JSON types, `$repeated` documents."""
    if isinstance(v, SON) or isinstance(v, dict):
        if list(v.keys()) == ["$repeated"]:
            elems = b"".join(bson.encode(SON([(k, build(x))]))[4:-1] for k, x in v["$repeated"])
            return RawBSONDocument((len(elems) + 5).to_bytes(4, "little") + elems + b"\x00")
        return SON((k, build(x)) for k, x in v.items())
    if isinstance(v, list):
        return [build(x) for x in v]
    return v


def load():
    """Every case: (file stem, case)."""
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "*.json"))):
        with open(path) as f:
            spec = json_util.loads(f.read(), json_options=json_util.JSONOptions(
                document_class=SON))
        for case in spec["cases"]:
            if "db" in spec:
                case.setdefault("db", spec["db"])
            out.append((os.path.basename(path)[:-5], case))
    return out


def run_case(client, case):
    """Run one case (on database `corpus`, or the case's or file's `db`); returns None if
    the reply is as expected, else what differed."""
    from pymongo.errors import OperationFailure
    client.drop_database(DB)
    db = client[case.get("db", DB)]
    for cmd in case.get("setup", []):
        db.command(build(cmd))
    expect = case["expect"]
    try:
        reply = db.command(build(case["run"]))
    except OperationFailure as e:
        got = {"code": e.code, "codeName": e.details.get("codeName"),
               "errmsg": e.details.get("errmsg")}
        want = {k: expect[k] for k in ("code", "codeName", "errmsg") if k in expect}
        if "code" not in expect:
            return f"failed: {got}"
        diff = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        return f"got {diff}" if diff else None
    if "code" in expect:
        return f"succeeded ({json_util.dumps(reply)[:200]}), expected error {expect}"
    for k, v in expect.get("reply", {}).items():
        got = reply
        for part in k.split("."):
            if isinstance(got, list) and part.isdigit():
                got = got[int(part)] if int(part) < len(got) else None
            else:
                got = got.get(part) if isinstance(got, dict) else None
        if got != v:
            return f"reply.{k} = {got!r}, expected {v!r}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uri", help="run against this server")
    ap.add_argument("--siltd", help="start this siltd binary and run against it")
    args = ap.parse_args()
    import pymongo
    server = None
    if args.uri:
        client = pymongo.MongoClient(args.uri)
    else:
        sys.path.insert(0, os.path.join(HERE, "..", "compat"))
        os.environ.setdefault("SILTD_BIN", args.siltd or "target/release/siltd")
        from conftest import Siltd
        server = Siltd().start()
        client = server.client()
    failed = 0
    cases = load()
    for stem, case in cases:
        why = run_case(client, case)
        status = "ok  " if why is None else "FAIL"
        failed += why is not None
        print(f"{status} {stem}: {case['name']}" + ("" if why is None else f": {why}"))
    print(f"{len(cases) - failed} passed, {failed} failed")
    if server:
        server.cleanup()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
