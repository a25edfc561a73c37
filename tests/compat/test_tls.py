"""TLS through pymongo, with an authority and certificates generated at test time:
requireTLS refuses plain clients, preferTLS serves both on one port, and --tlsCAFile asks
clients for a certificate signed by that authority."""
import datetime
import ipaddress
import os
import subprocess
import tempfile

import pymongo
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pymongo.errors import ServerSelectionTimeoutError

from conftest import SILTD, Siltd


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject_cn, key, issuer_cn, issuer_key, ca=False, san=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(_name(subject_cn)).issuer_name(_name(issuer_cn))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(days=1))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert, key=None):
    out = cert.public_bytes(serialization.Encoding.PEM)
    if key is not None:
        out += key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    return out


def make_pki(prefix="silt-tls-"):
    """A throwaway authority, a certificate for localhost and 127.0.0.1, and a client
    certificate, written as PEM files: their paths by name (`ca.pem`, `server.pem`,
    `client.pem`). tests/tools/roundtrip.py uses it too."""
    d = tempfile.mkdtemp(prefix=prefix)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("silt test CA", ca_key, "silt test CA", ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert("localhost", srv_key, "silt test CA", ca_key,
                san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert("client", cli_key, "silt test CA", ca_key)
    files = {}
    for name, data in [("ca.pem", _pem(ca)), ("server.pem", _pem(srv, srv_key)),
                       ("client.pem", _pem(cli, cli_key))]:
        files[name] = os.path.join(d, name)
        with open(files[name], "wb") as f:
            f.write(data)
    return files


@pytest.fixture(scope="module")
def pki():
    return make_pki()


def _serve(extra):
    return Siltd(extra=extra).start()


def _works(s, **kw):
    c = pymongo.MongoClient("127.0.0.1", s.port, serverSelectionTimeoutMS=3000, **kw)
    try:
        c.test.t.insert_one({"x": 1})
        return c.test.t.count_documents({}) >= 1
    finally:
        c.close()


def _refused(s, **kw):
    c = pymongo.MongoClient("127.0.0.1", s.port, serverSelectionTimeoutMS=1500, **kw)
    try:
        with pytest.raises(ServerSelectionTimeoutError):
            c.admin.command("ping")
    finally:
        c.close()


def test_require_tls(pki):
    s = _serve(["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", pki["server.pem"]])
    try:
        assert _works(s, tls=True, tlsCAFile=pki["ca.pem"])
        _refused(s)                                   # a plain client
        _refused(s, tls=True)                         # a client that does not trust our CA
        assert "TLS handshake failed" in s.read_log()
    finally:
        s.stop()
        s.cleanup()


def test_prefer_tls_serves_both(pki):
    s = _serve(["--tlsMode", "preferTLS", "--tlsCertificateKeyFile", pki["server.pem"]])
    try:
        assert _works(s, tls=True, tlsCAFile=pki["ca.pem"])
        assert _works(s)
    finally:
        s.stop()
        s.cleanup()


def test_client_certificates(pki):
    s = _serve(["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", pki["server.pem"],
                "--tlsCAFile", pki["ca.pem"]])
    try:
        assert _works(s, tls=True, tlsCAFile=pki["ca.pem"],
                      tlsCertificateKeyFile=pki["client.pem"])
        _refused(s, tls=True, tlsCAFile=pki["ca.pem"])   # no client certificate
    finally:
        s.stop()
        s.cleanup()
    s = _serve(["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", pki["server.pem"],
                "--tlsCAFile", pki["ca.pem"], "--tlsAllowConnectionsWithoutCertificates"])
    try:
        assert _works(s, tls=True, tlsCAFile=pki["ca.pem"])
    finally:
        s.stop()
        s.cleanup()


def test_bad_tls_settings_stop_the_start(pki, tmp_path):
    for args, words in [
        (["--tlsMode", "requireTLS"], "tlsCertificateKeyFile"),
        (["--tlsMode", "sometimes", "--tlsCertificateKeyFile", pki["server.pem"]], "sometimes"),
        (["--tlsCertificateKeyFile", pki["ca.pem"]], "private key"),
    ]:
        r = subprocess.run([SILTD, "--dbpath", str(tmp_path), "--port", "1", *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0
        assert words in r.stderr, r.stderr


def test_members_talk_tls_under_require_tls(pki):
    """Three requireTLS members with certificates of one authority form a set: their own
    traffic is TLS (a plain member connection would be refused), writes reach every member."""
    import time
    extra = ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", pki["server.pem"],
             "--tlsCAFile", pki["ca.pem"], "--replSet", "rs0", "--bind", "127.0.0.1"]
    ms = [Siltd(extra=extra).start() for _ in range(3)]
    tls = dict(tls=True, tlsCAFile=pki["ca.pem"], tlsCertificateKeyFile=pki["client.pem"])

    def direct(m):
        return pymongo.MongoClient("127.0.0.1", m.port, directConnection=True,
                                   serverSelectionTimeoutMS=3000, **tls)

    def roles():
        out = []
        for m in ms:
            with direct(m) as c:
                h = c.admin.command("hello")
            out.append("P" if h["isWritablePrimary"] else "S" if h.get("secondary") else "?")
        return sorted(out)

    try:
        with direct(ms[0]) as c:
            c.admin.command("replSetInitiate", {"_id": "rs0", "members": [
                {"_id": i, "host": f"127.0.0.1:{m.port}"} for i, m in enumerate(ms)]})
        deadline = time.time() + 20
        while time.time() < deadline and roles() != ["P", "S", "S"]:
            time.sleep(0.2)
        assert roles() == ["P", "S", "S"]
        uri = "mongodb://" + ",".join(f"127.0.0.1:{m.port}" for m in ms) + "/?replicaSet=rs0"
        with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000, **tls) as c:
            c.app.c.insert_many([{"_id": i} for i in range(100)])
            c.app.get_collection("c", write_concern=pymongo.WriteConcern(w=3, wtimeout=10000)) \
                .insert_one({"_id": "w3"})
        for m in ms:
            with direct(m) as c:
                assert c.app.c.count_documents({}) == 101
    finally:
        for m in ms:
            m.stop()
            m.cleanup()
