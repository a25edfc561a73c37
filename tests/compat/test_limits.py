"""Limits that protect the server (issue 14): the connection limit (`--maxConns`,
`net.maxIncomingConnections`): one connection more is closed at once with a log line, the
others are served, and room comes back when a connection closes."""
import socket
import time

from conftest import Siltd


def hello_works(port):
    """A fresh raw connection answers an OP_MSG ping (False when the server closed it)."""
    import bson
    body = bson.encode({"ping": 1, "$db": "admin"})
    msg = (0).to_bytes(4, "little") + b"\x00" + body
    header = (16 + len(msg)).to_bytes(4, "little") + (1).to_bytes(4, "little") + (0).to_bytes(4, "little") + (2013).to_bytes(4, "little")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(header + msg)
            data = s.recv(4)
            return len(data) == 4
    except OSError:
        return False


def test_max_connections():
    s = Siltd(extra=["--maxConns", "3"]).start()
    held = []
    try:
        # The start-up probe's connection is closed already; wait until the server sees it.
        time.sleep(0.3)
        for _ in range(3):
            held.append(socket.create_connection(("127.0.0.1", s.port), timeout=5))
        time.sleep(0.3)
        assert not hello_works(s.port)
        assert "too many open connections" in s.read_log()
        held.pop().close()
        deadline = time.time() + 5
        while not hello_works(s.port) and time.time() < deadline:
            time.sleep(0.1)
        assert hello_works(s.port)
    finally:
        for h in held:
            h.close()
        s.stop()
