"""Damaged files through a real siltd: a log whose tail is cut mid-record recovers up to the
last whole record, and flipped bytes in a data file are reported by `validate` and by the
reads that meet them (naming the file), never served as wrong data."""
import glob
import os
import subprocess

import pytest
from pymongo.errors import OperationFailure, PyMongoError

from conftest import SILTD, Siltd


def test_torn_log_tail_recovers_a_prefix():
    s = Siltd(extra=["--checkpoint-interval-s", "3600"]).start()
    try:
        c = s.client(journal=True)
        for i in range(600):
            c.test.t.insert_one({"_id": i, "pad": "y" * 100})
        c.close()
        s.kill9()
        logs = sorted(glob.glob(os.path.join(s.dbpath, "wal-*.log")))
        assert logs
        with open(logs[-1], "r+b") as f:
            f.seek(0, os.SEEK_END)
            f.truncate(f.tell() - 1000 - 37)     # through the middle of a record
        s.start()
        c = s.client()
        ids = sorted(d["_id"] for d in c.test.t.find({}, {"_id": 1}))
        assert 0 < len(ids) < 600
        assert ids == list(range(len(ids))), "what survives is a prefix of the writes"
        c.test.t.insert_one({"_id": "after"})
        assert c.test.command("validate", "t", full=True)["valid"] is True
    finally:
        s.cleanup()


SILTCTL = os.path.join(os.path.dirname(SILTD), "siltctl")


def _blocks(path):
    """(root block, [(block, offset, length)]) of a dictionary file, from siltctl."""
    shape = subprocess.run([SILTCTL, "shape", path], capture_output=True, text=True, check=True)
    root = int(shape.stdout.split()[1])
    table = subprocess.run([SILTCTL, "blocks", path], capture_output=True, text=True, check=True)
    rows = [l.split() for l in table.stdout.splitlines()[1:] if l.strip()]
    return root, [(int(b), int(o), int(n)) for b, o, n in rows]


def test_flipped_bytes_in_a_data_file_are_reported():
    s = Siltd().start()
    try:
        c = s.client()
        c.test.d.insert_many([{"_id": i, "pad": "z" * 2000} for i in range(6000)])
        c.test.command("compact", "d")
        c.close()
        s.stop()
        victim = max(glob.glob(os.path.join(s.dbpath, "*.silt")), key=os.path.getsize)
        root, blocks = _blocks(victim)
        leaves = [b for b in blocks if b[0] != root]
        assert len(leaves) >= 2, blocks
        # One byte flipped in the middle of every block but the root.
        with open(victim, "r+b") as f:
            for _, off, n in leaves:
                f.seek(off + n // 2)
                b = f.read(1)
                f.seek(off + n // 2)
                f.write(bytes([b[0] ^ 0x5A]))
        s.start()
        c = s.client()
        name = os.path.basename(victim)
        v = c.test.command("validate", "d", full=True)
        assert v["valid"] is False
        assert any(name in e for e in v["errors"]), v["errors"]
        with pytest.raises(PyMongoError) as e:
            list(c.test.d.find())
        assert name in str(e.value) and "block" in str(e.value)
        assert isinstance(e.value, OperationFailure) and e.value.code == 12, e.value  # DataCorruptionDetected
        # A damaged block is refused, never read as wrong data; the server goes on.
        for i in range(0, 6000, 500):
            try:
                d = c.test.d.find_one({"_id": i})
            except OperationFailure as e:
                assert name in str(e) and e.code == 12
                continue
            assert d == {"_id": i, "pad": "z" * 2000}
        assert c.admin.command("ping")["ok"] == 1
        c.other.x.insert_one({"_id": 1})
    finally:
        s.cleanup()
