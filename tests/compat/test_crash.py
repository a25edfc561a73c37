"""kill -9 of siltd loses no acknowledged write."""
import random
import threading
import time

import pymongo
from pymongo.errors import PyMongoError

from conftest import Siltd


def test_kill9_keeps_acknowledged_writes():
    s = Siltd().start()
    try:
        acked = []
        for rnd in range(3):
            c = s.client(w=1, journal=True, retryWrites=False)
            coll = c.crash.docs
            coll.create_index("k")
            stop = threading.Event()

            def writer(tid):
                i = 0
                while not stop.is_set():
                    doc = {"_id": f"{rnd}-{tid}-{i}", "k": i, "pad": "x" * 200}
                    try:
                        coll.insert_one(doc)
                        if i % 3 == 0:
                            # Moves the document's index entry.
                            coll.update_one({"_id": doc["_id"]}, {"$inc": {"k": 1000}})
                    except PyMongoError:
                        return
                    acked.append(doc["_id"])
                    i += 1

            threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
            for t in threads:
                t.start()
            time.sleep(random.uniform(0.5, 2.0))
            s.kill9()
            stop.set()
            for t in threads:
                t.join()
            c.close()
            s.start()
            c = s.client()
            have = set(d["_id"] for d in c.crash.docs.find({}, {"_id": 1}))
            missing = [a for a in acked if a not in have]
            assert not missing, f"round {rnd}: {len(missing)} acknowledged documents lost"
            assert c.crash.docs.count_documents({}) >= len(acked)
            # A document and its index entries are written as one: after the crash the
            # index holds exactly the documents present, acknowledged or not.
            by_index = [d["_id"] for d in c.crash.docs.find({"k": {"$gte": 0}}, {"_id": 1}).hint("k_1")]
            assert len(by_index) == len(set(by_index)) == len(have)
            assert set(by_index) == have
            assert c.crash.docs.estimated_document_count() == len(have)
            c.close()
        assert len(acked) > 100
    finally:
        s.cleanup()


def test_second_server_on_same_dbpath_is_refused(server):
    import subprocess
    from conftest import SILTD, free_port
    p = subprocess.run([SILTD, "--port", str(free_port()), "--dbpath", server.dbpath],
                       capture_output=True, timeout=30)
    assert p.returncode != 0
    assert b"in use" in p.stderr


def test_random_writes_with_kill9_at_random_points():
    """Fault injection: 24 cycles of random inserts, updates and deletes from three clients
    (journaled), each ended by kill -9 at a random moment. After every restart each
    acknowledged write is there in its acknowledged state (the one write in flight per client
    may or may not be), the index agrees with the documents, and `validate` is clean."""
    rng = random.Random(1414)
    s = Siltd().start()
    model = {}          # _id -> document as last acknowledged (None: deleted)
    try:
        c = s.client()
        c.fault.d.create_index("k")
        c.close()
        for cycle in range(24):
            # A write started after the kill waits for server selection: keep that short.
            c = s.client(w=1, journal=True, retryWrites=False, serverSelectionTimeoutMS=300)
            coll = c.fault.d
            stop = threading.Event()
            pending = {}    # thread -> (_id, state if its in-flight write went in)

            def writer(tid, seed):
                r = random.Random(seed)
                mine = [k for k, v in model.items() if v is not None and k.startswith(f"{tid}-")]
                n = 0
                while not stop.is_set():
                    op = r.random()
                    try:
                        if op < 0.5 or not mine:
                            _id = f"{tid}-{cycle}-{n}"
                            doc = {"_id": _id, "k": r.randrange(1000), "v": 0}
                            pending[tid] = (_id, doc)
                            coll.insert_one(dict(doc))
                            model[_id] = doc
                            mine.append(_id)
                        elif op < 0.85:
                            _id = r.choice(mine)
                            new = dict(model[_id], v=model[_id]["v"] + 1, k=r.randrange(1000))
                            pending[tid] = (_id, new)
                            coll.update_one({"_id": _id}, {"$inc": {"v": 1}, "$set": {"k": new["k"]}})
                            model[_id] = new
                        else:
                            _id = mine.pop(r.randrange(len(mine)))
                            pending[tid] = (_id, None)
                            coll.delete_one({"_id": _id})
                            model[_id] = None
                        pending.pop(tid, None)
                    except PyMongoError:
                        return
                    n += 1

            threads = [threading.Thread(target=writer, args=(t, rng.random())) for t in range(3)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.05, 0.6))
            s.kill9()
            stop.set()
            for t in threads:
                t.join()
            c.close()
            s.start()
            c = s.client()
            coll = c.fault.d
            have = {d["_id"]: d for d in coll.find()}
            in_flight = dict(pending.values())
            for _id, want in model.items():
                got = have.get(_id)
                ok = [want]
                if _id in in_flight:
                    ok.append(in_flight[_id])
                assert got in ok, f"cycle {cycle}: {_id} is {got}, acknowledged {want}"
                if _id in in_flight and got != want:
                    model[_id] = got      # the in-flight write went in: it is the state now
            extra = set(have) - set(model)
            assert extra <= set(in_flight), f"cycle {cycle}: unexpected documents {extra}"
            for _id in extra:
                model[_id] = have[_id]
            by_index = [d["_id"] for d in coll.find({"k": {"$gte": 0}}, {"_id": 1}).hint("k_1")]
            assert sorted(by_index) == sorted(have)
            v = c.fault.command("validate", "d", full=True)
            assert v["valid"] is True, v
            c.close()
        assert sum(1 for v in model.values() if v is not None) > 50
    finally:
        s.cleanup()
