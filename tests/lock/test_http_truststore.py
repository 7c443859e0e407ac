"""envbuild's own downloads verify TLS against the system's trust store (issue 40: one client,
the same trust as pip, uv and the node's Python behind a TLS-inspecting proxy). A local HTTPS
server whose certificate comes from a CA of the test's own: trusted through the store OpenSSL
reads (SSL_CERT_FILE stands for the site's installed CA), envbuild's index probe, page fetch and
data download all succeed; plain requests (certifi's bundle) refuses the same server, and
without the CA envbuild refuses it too."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import subprocess
import sys
import threading
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _cert(subject: str, key, issuer_key, issuer: str, *, ca: bool):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
         .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)
    else:
        b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


@pytest.fixture
def server(tmp_path):
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _cert("envbuild test CA", ca_key, ca_key, "envbuild test CA", ca=True)
    leaf = _cert("127.0.0.1", leaf_key, ca_key, "envbuild test CA", ca=False)
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)  # noqa: E731
    (tmp_path / "ca.pem").write_bytes(pem(ca))
    (tmp_path / "leaf.pem").write_bytes(pem(leaf) + leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    www = tmp_path / "www"
    (www / "simple" / "six").mkdir(parents=True)
    (www / "simple" / "six" / "index.html").write_text('<a href="six-1.16.0-py2.py3-none-any.whl">x</a>\n')
    (www / "data.bin").write_bytes(b"data " * 1000)

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(www), **kw)

        def log_message(self, *a):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Quiet)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "leaf.pem")
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", tmp_path / "ca.pem"
    httpd.shutdown()


PROBE = """
import hashlib, sys
from pathlib import Path
from envbuild.lock.indexes import unreachable
from envbuild.bundle.fetch import fetch_data_file
base, out = sys.argv[1], Path(sys.argv[2])
print("probe", unreachable(base + "/simple/six/"))
want = hashlib.sha256(b"data " * 1000).hexdigest()
try:
    print("data", fetch_data_file("d", base + "/data.bin", want, out, None)[1] == want)
except Exception as exc:
    print("data failed", type(exc).__name__, str(exc)[:300])
"""
# requests as envbuild used it before, in a process envbuild never touched: certifi's bundle
PLAIN = """
import sys, requests
try:
    requests.get(sys.argv[1] + "/simple/six/", timeout=10)
    print("certifi ok")
except requests.exceptions.SSLError:
    print("certifi refused")
"""


def _run(base: str, out: Path, env: dict, code: str = PROBE) -> str:
    p = subprocess.run([sys.executable, "-c", code, base, str(out)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_the_system_store_decides_for_every_download(server, tmp_path):
    base, ca = server
    clean = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
                                                              "CURL_CA_BUNDLE")}
    trusted = _run(base, tmp_path / "a.bin", {**clean, "SSL_CERT_FILE": str(ca)})
    assert "probe None" in trusted and "data True" in trusted, trusted
    # what envbuild did before: certifi's bundle knows no site CA
    assert "certifi refused" in _run(base, tmp_path / "c.bin", {**clean, "SSL_CERT_FILE": str(ca)}, PLAIN)
    untrusted = _run(base, tmp_path / "b.bin", clean)
    assert "probe index 127.0.0.1 unreachable" in untrusted and "data failed EnvironmentProblem" in untrusted
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted or "certificate verify failed" in untrusted, untrusted
