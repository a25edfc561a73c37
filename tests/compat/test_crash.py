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
