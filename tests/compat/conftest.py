"""Fixtures: a real siltd on a free port with a temporary data directory."""
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time

import pymongo
import pytest

# 1,000 idle connections need more descriptors than some machines allow by default; siltd
# inherits the raised limit.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if _soft != resource.RLIM_INFINITY and _soft < 8192:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(8192, _hard), _hard))

# `SILT_LOG_LEVEL` sets the servers' `--log-level` (for example `info,openraft=info` to see
# elections); `SILT_KEEP=1` keeps their directories and logs.
SILTD = os.environ.get("SILTD_BIN", os.path.join(os.path.dirname(__file__), "../../target/release/siltd"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rs_client(server, **kw):
    """A client of `server` (started with `--replSet rs0`) through a replica-set connection."""
    kw.setdefault("serverSelectionTimeoutMS", 10000)
    return pymongo.MongoClient(f"mongodb://127.0.0.1:{server.port}/?replicaSet=rs0", **kw)


class Siltd:
    """One siltd process."""

    def __init__(self, dbpath=None, extra=()):
        self.own_dir = dbpath is None
        self.dbpath = dbpath or tempfile.mkdtemp(prefix="silt-compat-")
        self.extra = list(extra)
        self.port = None
        self.proc = None
        self.log = None

    def start(self, port=None):
        self.port = port or free_port()
        self.log = open(os.path.join(self.dbpath, "siltd.log"), "ab")
        self.proc = subprocess.Popen(
            [SILTD, "--port", str(self.port), "--dbpath", self.dbpath, "--cache-size", "64MB",
             "--log-level", os.environ.get("SILT_LOG_LEVEL","info"), *self.extra],
            stdout=self.log, stderr=self.log)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("siltd exited early: " + self.read_log())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("siltd did not start listening")

    def read_log(self):
        with open(os.path.join(self.dbpath, "siltd.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def client(self, **kw):
        kw.setdefault("serverSelectionTimeoutMS", 10000)
        return pymongo.MongoClient("127.0.0.1", self.port, **kw)

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()

    def cleanup(self):
        self.stop()
        if self.own_dir and not os.environ.get("SILT_KEEP"):
            shutil.rmtree(self.dbpath, ignore_errors=True)


# Modules whose tests run twice: against a standalone siltd and against `siltd --replSet rs0`
# through a replica-set connection, where pymongo's retryable writes put every write in a
# session with a `txnNumber` (so siltd runs it in a transaction of its own). Each write rule
# (validators, caps, TTL, partitions, unique indexes, fast updates) must hold on both paths.
BOTH_TOPOLOGIES = {
    "test_capped", "test_validation", "test_ttl_collmod", "test_partitions",
    "test_fast_updates", "test_indexes", "test_write_rules", "test_subtree_counts",
}


def pytest_generate_tests(metafunc):
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if module in BOTH_TOPOLOGIES and {"db", "client", "server"} & set(metafunc.fixturenames):
        metafunc.parametrize("topology", ["standalone", "replset"], indirect=True)


@pytest.fixture()
def topology(request):
    """Which server a test talks to: `standalone` unless its module runs on both."""
    return getattr(request, "param", "standalone")


def _stop_checked(s):
    s.stop()
    assert s.proc.returncode == 0, "siltd did not shut down cleanly: " + s.read_log()[-2000:]
    s.cleanup()


@pytest.fixture(scope="session")
def standalone_server():
    s = Siltd().start()
    yield s
    _stop_checked(s)


@pytest.fixture(scope="session")
def replset_server():
    s = Siltd(extra=["--replSet", "rs0"]).start()
    yield s
    _stop_checked(s)


@pytest.fixture()
def rs(replset_server):
    """The session's `siltd --replSet rs0` (a module may define its own)."""
    return replset_server


@pytest.fixture()
def rc(replset_client):
    """A replica-set client of [`rs`] (a module may define its own)."""
    return replset_client


@pytest.fixture(scope="session")
def standalone_client(standalone_server):
    c = standalone_server.client()
    yield c
    c.close()


@pytest.fixture(scope="session")
def replset_client(replset_server):
    c = rs_client(replset_server, retryWrites=True)
    yield c
    c.close()


@pytest.fixture()
def server(topology, request):
    return request.getfixturevalue(f"{topology}_server")


@pytest.fixture()
def client(topology, request):
    return request.getfixturevalue(f"{topology}_client")


@pytest.fixture()
def db(client, request):
    name = "t_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:50]
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)
