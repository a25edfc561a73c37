"""Throughput through pymongo: batched inserts and point finds by _id against a fresh siltd.

Run with `make bench-pymongo` (or `target/compat-venv/bin/python tests/compat/throughput.py
[--docs N] [--finds M] [--json FILE]`). It is a measurement, not a test: nothing is asserted.
"""
import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Siltd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--finds", type=int, default=20_000)
    ap.add_argument("--json")
    a = ap.parse_args()
    s = Siltd().start()
    try:
        c = s.client()
        coll = c.bench.docs
        pad = "x" * 100
        t = time.perf_counter()
        for start in range(0, a.docs, a.batch):
            coll.insert_many([{"_id": i, "n": i, "pad": pad} for i in range(start, min(a.docs, start + a.batch))],
                             ordered=False)
        ins = a.docs / (time.perf_counter() - t)
        rng = random.Random(1)
        t = time.perf_counter()
        for _ in range(a.finds):
            i = rng.randrange(a.docs)
            assert coll.find_one({"_id": i})["n"] == i
        finds = a.finds / (time.perf_counter() - t)
        c.close()
    finally:
        s.cleanup()
    print(f"{'workload':<40}{'result':>14}")
    print(f"{'batched inserts (insert_many of %d)' % a.batch:<40}{ins:>12.0f}/s")
    print(f"{'point finds by _id (find_one)':<40}{finds:>12.0f}/s")
    print(f"documents: {a.docs}, finds: {a.finds}, one client thread")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"insert_many_docs_per_s": ins, "find_one_by_id_per_s": finds,
                       "docs": a.docs, "batch": a.batch, "finds": a.finds}, f, indent=1)


if __name__ == "__main__":
    main()
