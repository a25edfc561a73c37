"""Bad bytes on the wire get an error reply or a closed connection, never a dead server."""
import socket
import struct
import time

import bson


def raw(server, payload, expect_reply=False):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may already have closed the connection
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
        return data
    finally:
        s.close()


def op_msg(body_bytes, flags=0, request_id=1):
    payload = struct.pack("<I", flags) + b"\x00" + body_bytes
    return struct.pack("<iiii", 16 + len(payload), request_id, 0, 2013) + payload


def read_reply(s):
    """One whole reply from a socket."""
    data = b""
    while len(data) < 4 or len(data) < struct.unpack("<i", data[:4])[0]:
        chunk = s.recv(65536)
        assert chunk, "connection closed before the reply"
        data += chunk
    return data


def reply_doc(data):
    assert len(data) >= 21
    length, _, _, opcode = struct.unpack("<iiii", data[:16])
    assert opcode == 2013
    return bson.decode(data[21:length])


def test_garbage_bytes(server, client):
    raw(server, b"\xde\xad\xbe\xef" * 100)
    assert client.admin.command("ping")["ok"] == 1.0


def test_length_larger_than_data(server, client):
    msg = struct.pack("<iiii", 1000, 1, 0, 2013) + b"\x00" * 10
    raw(server, msg)
    assert client.admin.command("ping")["ok"] == 1.0


def test_huge_and_negative_lengths(server, client):
    raw(server, struct.pack("<iiii", 2_000_000_000, 1, 0, 2013))
    raw(server, struct.pack("<iiii", -5, 1, 0, 2013))
    assert client.admin.command("ping")["ok"] == 1.0


def test_truncated_op_msg(server, client):
    good = op_msg(bson.encode({"ping": 1, "$db": "admin"}))
    # Header says the full length, the section is cut short inside the BSON.
    cut = good[:-5]
    cut = struct.pack("<i", len(cut)) + cut[4:]
    data = raw(server, cut)
    if data:
        assert reply_doc(data)["ok"] == 0
    assert client.admin.command("ping")["ok"] == 1.0


def test_invalid_bson(server, client):
    body = bytearray(bson.encode({"ping": 1, "$db": "admin"}))
    body[4] = 0x7F  # an unknown element type
    data = raw(server, op_msg(bytes(body)))
    d = reply_doc(data)
    assert d["ok"] == 0 and d["code"] in (22, 9)
    assert client.admin.command("ping")["ok"] == 1.0


def test_unknown_opcode(server, client):
    raw(server, struct.pack("<iiii", 20, 1, 0, 9999) + b"\x00" * 4)
    assert client.admin.command("ping")["ok"] == 1.0


def test_valid_raw_ping(server):
    d = reply_doc(raw(server, op_msg(bson.encode({"ping": 1, "$db": "admin"}))))
    assert d["ok"] == 1.0


def test_many_idle_connections(server, client):
    socks = []
    try:
        for _ in range(1000):
            socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        assert client.admin.command("ping")["ok"] == 1.0
        # A connect returns once the kernel has the connection queued; the server accepts it
        # a moment later.
        deadline = time.time() + 10
        while client.admin.command("serverStatus")["connections"]["current"] < 1000:
            assert time.time() < deadline, "the server did not accept 1,000 connections"
            time.sleep(0.05)
        # Every one of them is served.
        for s in socks[::100]:
            s.sendall(op_msg(bson.encode({"ping": 1, "$db": "admin"})))
            assert reply_doc(read_reply(s))["ok"] == 1.0
    finally:
        for s in socks:
            s.close()
