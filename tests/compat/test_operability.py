"""Operability: siltd started from a mongod.conf-style YAML file (and refusing one with an
unknown key), MongoDB's JSON log lines, the Prometheus endpoint, the pid file, and the
free-space red zone (simulated through a fail point)."""
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request

import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import SILTD, Siltd, free_port


def _wait_port(proc, port, log):
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("siltd exited: " + open(log).read())
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("siltd did not listen")


def _scrape(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        assert r.status == 200
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return text, values


def test_yaml_config_json_log_metrics_and_pid_file():
    d = tempfile.mkdtemp(prefix="silt-conf-")
    port, mport = free_port(), free_port()
    log = os.path.join(d, "siltd.log")
    pid = os.path.join(d, "siltd.pid")
    conf = os.path.join(d, "mongod.conf")
    with open(conf, "w") as f:
        f.write(f"""# a mongod.conf as MongoDB users write them
net:
  port: {port}
  bindIp: 127.0.0.1
  maxIncomingConnections: 500
storage:
  dbPath: {d}/data
  directoryPerDB: false
  journal:
    enabled: true
    commitIntervalMs: 50
systemLog:
  destination: file
  path: {log}
  logAppend: true
  format: json
operationProfiling:
  slowOpThresholdMs: 250
security:
  authorization: disabled
processManagement:
  pidFilePath: {pid}
setParameter:
  ttlMonitorSleepSecs: 5
silt:
  cacheSize: 64MB
  metricsAddr: 127.0.0.1:{mport}
""")
    os.makedirs(os.path.join(d, "data"))
    proc = subprocess.Popen([SILTD, "--config", conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_port(proc, port, log)
        c = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=10000)
        opts = c.admin.command("getCmdLineOpts")
        assert "--config" in opts["argv"]
        st = c.admin.command("serverStatus")
        assert st["connections"]["current"] + st["connections"]["available"] == 500
        assert c.admin.command("getParameter", ttlMonitorSleepSecs=1)["ttlMonitorSleepSecs"] == 5
        assert c.test.command("profile", -1)["slowms"] == 250
        assert int(open(pid).read()) == proc.pid

        _, before = _scrape(f"127.0.0.1:{mport}")
        c.test.m.insert_many([{"i": i} for i in range(7)])
        text, after = _scrape(f"127.0.0.1:{mport}")
        assert "# TYPE silt_opcounters_insert counter" in text
        assert after["silt_opcounters_insert"] - before["silt_opcounters_insert"] == 7
        for name in ["silt_connections_current", "silt_cache_used_bytes", "silt_checkpoints",
                     "silt_log_bytes_written", "silt_metrics_fast_updates_performed_primary_key"]:
            assert any(k.startswith(name) for k in after), name
        c.close()

        lines = [json.loads(l) for l in open(log) if l.strip()]
        assert lines, "the log is empty"
        for l in lines:
            assert set(l) >= {"t", "s", "c", "id", "ctx", "msg"}
            assert "$date" in l["t"] and l["s"] in {"I", "W", "E", "D1", "D2"}
        accepted = [l for l in lines if l["msg"] == "connection accepted"]
        assert accepted and accepted[0]["c"] == "NETWORK"
        assert accepted[0]["ctx"].startswith("conn") and "remote" in accepted[0]["attr"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert not os.path.exists(pid), "the pid file is removed at a clean exit"


@pytest.mark.parametrize("body,named", [
    ("net:\n  prot: 1\n", "net.prot"),
    ("storage:\n  directoryPerDB: true\n", "storage.directoryPerDB"),
    ("silt:\n  cacheSise: 64MB\n", "silt.cacheSise"),
    ("systemLog:\n  destination: syslog\n", "systemLog.destination"),
    ("processManagement:\n  fork: true\n", "processManagement.fork"),
    ("silt:\n  compression: snappy\n", "snappy"),
])
def test_config_refuses_what_it_does_not_know(tmp_path, body, named):
    conf = tmp_path / "mongod.conf"
    conf.write_text("replication:\n  replSetName: rs0\n" + body)
    r = subprocess.run([SILTD, "--config", str(conf), "--dbpath", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert named in r.stderr, r.stderr


def test_red_zone_refuses_writes_and_recovers():
    s = Siltd(extra=["--enable-test-commands"]).start()
    try:
        c = s.client()
        c.test.z.insert_one({"_id": 1})
        c.test.gone.insert_one({})
        c.admin.command("configureFailPoint", "siltDiskFreeSpace", mode="alwaysOn",
                        data={"freeBytes": 10 << 20, "totalBytes": 100 << 30})
        with pytest.raises(OperationFailure) as e:
            c.test.z.insert_one({"_id": 2})
        assert e.value.code == 14031 and "red zone" in str(e.value)
        for write in [lambda: c.test.z.update_one({"_id": 1}, {"$set": {"a": 1}}),
                      lambda: c.test.z.delete_one({"_id": 1}),
                      lambda: c.test.z.create_index("a")]:
            with pytest.raises(OperationFailure) as e:
                write()
            assert e.value.code == 14031
        # Reads go on, and dropping gives space back.
        assert c.test.z.find_one({"_id": 1}) == {"_id": 1}
        assert c.test.z.count_documents({}) == 1
        c.test.gone.drop()
        st = c.admin.command("serverStatus")["silt"]["redZone"]
        assert st["inRedZone"] is True
        # The percentage counts too: 4% free of a small disk.
        c.admin.command("configureFailPoint", "siltDiskFreeSpace", mode="alwaysOn",
                        data={"freeBytes": 400 << 20, "totalBytes": 10 << 30})
        with pytest.raises(OperationFailure):
            c.test.z.insert_one({"_id": 3})
        # Space returns: writes resume by themselves.
        c.admin.command("configureFailPoint", "siltDiskFreeSpace", mode="alwaysOn",
                        data={"freeBytes": 50 << 30, "totalBytes": 100 << 30})
        c.test.z.insert_one({"_id": 2})
        c.admin.command("configureFailPoint", "siltDiskFreeSpace", mode="off")
        c.test.z.insert_one({"_id": 4})
        assert c.test.z.count_documents({}) == 3
        assert "entering the free-space red zone" in s.read_log()
    finally:
        s.stop()
        s.cleanup()


def test_compression_setting_changes_and_old_nodes_stay_readable():
    """`--compression` picks how nodes are written; nodes written under another setting
    keep their own and are read back after a restart with a different one."""
    docs = [{"_id": i, "pad": "abc" * 200} for i in range(3000)]
    s = Siltd(extra=["--compression", "none"]).start()
    try:
        c = s.client()
        c.test.t.insert_many(docs)
        c.admin.command("fsync")
        plain = c.admin.command("serverStatus")["silt"]["bytesOnDisk"]
        c.close()
        s.stop()
        for comp in ["lz4", "zstd:3"]:
            s.extra = ["--compression", comp]
            s.start()
            c = s.client()
            assert list(c.test.t.find({"_id": {"$type": "int"}}).sort("_id", 1)) == docs
            c.test.t.insert_many([{"_id": f"{comp}{i}", "pad": "xyz" * 200} for i in range(3000)])
            c.close()
            s.stop()
        s.extra = []
        s.start()
        c = s.client()
        assert c.test.t.count_documents({}) == 9000
        c.test.t.update_many({}, {"$set": {"touched": 1}})
        c.admin.command("fsync")
        packed = c.admin.command("serverStatus")["silt"]["bytesOnDisk"]
        assert packed < plain * 3, (plain, packed)
    finally:
        s.cleanup()
