"""Signed provenance of a bundle (envbuild.bundle.provenance, issue 41) on a small file: the
DSSE signature over the pre-authentication encoding, PEM and OpenSSH keys, a key of another
kind refused by name, and the command line's refusals (exit codes, no traceback). The real
bundle signed by `envbuild bundle --sign-key` is tested in tests/bundle/test_bundle.py."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from envbuild.bundle import provenance
from envbuild.errors import CheckFailed, InputError
from support.clirun import envbuild


def _statement(path, **kw):
    now = provenance.utc_now()  # made now: a statement expires (provenance.DEFAULT_VALID_DAYS after)
    return provenance.statement(path.name, hashlib.sha256(path.read_bytes()).hexdigest(), recipe="r", target="t",
                                lock_digest="0" * 64, inputs={"lock:x.lock": "1" * 64},
                                git=[("https://example.org/a", "2" * 40)], envbuild_version="0.1.0",
                                envbuild_commit="3" * 40, started=kw.pop("started", now),
                                finished=kw.pop("finished", now), **kw)


@pytest.fixture
def pem_keys(tmp_path):
    key = ed25519.Ed25519PrivateKey.generate()
    priv, pub = tmp_path / "k.pem", tmp_path / "k.pub.pem"
    priv.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    return priv, pub, key


def test_a_pem_signature_verifies_and_covers_the_encoding(tmp_path, pem_keys):
    priv, pub, key = pem_keys
    bundle = tmp_path / "b.tar"
    bundle.write_bytes(b"bundle bytes")
    env = provenance.sign(_statement(bundle), priv)
    provenance.write_envelope(bundle, env)
    stmt = provenance.verify(bundle, provenance.envelope_path(bundle), [pub])
    assert stmt["predicate"]["runDetails"]["builder"]["version"] == {"envbuild": "0.1.0 (" + "3" * 40 + ")"}
    assert {"uri": "git+https://example.org/a", "digest": {"gitCommit": "2" * 40}} in \
        stmt["predicate"]["buildDefinition"]["resolvedDependencies"]
    payload = base64.b64decode(env["payload"])
    sig = base64.b64decode(env["signatures"][0]["sig"])
    key.public_key().verify(sig, b"DSSEv1 28 application/vnd.in-toto+json %d %s" % (len(payload), payload))
    # the signature covers the payload type: another type with the same payload does not verify
    (tmp_path / "typed.jsonl").write_text(json.dumps({**env, "payloadType": "text/plain"}))
    with pytest.raises(CheckFailed, match="not by a trusted key"):
        provenance.verify(bundle, tmp_path / "typed.jsonl", [pub])
    bundle.write_bytes(b"bundle bytes, changed")
    with pytest.raises(CheckFailed, match="not the signed statement's"):
        provenance.verify(bundle, provenance.envelope_path(bundle), [pub])


def test_keys_of_another_kind_and_damaged_envelopes_are_named(tmp_path, pem_keys):
    priv, pub, _ = pem_keys
    rsa_key = tmp_path / "rsa.pem"
    rsa_key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(InputError, match="not an Ed25519 private key"):
        provenance.sign({}, rsa_key)
    with pytest.raises(InputError, match="not an Ed25519 public key"):
        provenance.verify(tmp_path / "x", tmp_path / "y", [priv])
    bundle = tmp_path / "b.tar"
    bundle.write_bytes(b"x")
    (tmp_path / "env.jsonl").write_text("{not json\n")
    with pytest.raises(CheckFailed, match="not a DSSE envelope"):
        provenance.verify(bundle, tmp_path / "env.jsonl", [pub])


def test_the_command_line_refuses_with_its_exit_codes(tmp_path):
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    r = envbuild("provision", "--target", "local", "--trusted-key", f"{key}.pub", "--dry-run")
    assert r.returncode == 2 and "--bundle" in r.stderr and "Traceback" not in r.stderr
    bundle = tmp_path / "b.tar"
    bundle.write_bytes(b"not signed")
    r = envbuild("provision", "--target", "local", "--bundle", str(bundle), "--trusted-key", f"{key}.pub",
                 "--dry-run", env={"ENVBUILD_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1 and "no provenance for b.tar" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "home" / "bundles").exists()


def test_a_statement_binds_its_expiry_and_an_expired_one_is_refused(tmp_path, pem_keys):
    """Issue 54: a statement states when it expires (DEFAULT_VALID_DAYS after it was made, or as
    its signer says); past it, or without one, a valid signature vouches for nothing (exit 1)."""
    priv, pub, _ = pem_keys
    bundle = tmp_path / "b.tar"
    bundle.write_bytes(b"bundle bytes")
    made = "2026-01-01T00:00:00Z"
    stmt = _statement(bundle, started=made, finished=made, valid_days=30)
    meta = stmt["predicate"]["runDetails"]["metadata"]
    assert meta[provenance.EXPIRES] == "2026-01-31T00:00:00Z" and meta["finishedOn"] == made
    provenance.write_envelope(bundle, provenance.sign(stmt, priv))
    envelope = provenance.envelope_path(bundle)
    before = datetime(2026, 1, 30, tzinfo=timezone.utc)
    assert provenance.verify(bundle, envelope, [pub], now=before)["subject"][0]["name"] == "b.tar"
    with pytest.raises(CheckFailed, match=r"b\.tar: the signed statement expired at 2026-01-31T00:00:00Z") as exc:
        provenance.verify(bundle, envelope, [pub], now=datetime(2026, 1, 31, tzinfo=timezone.utc))
    assert exc.value.exit_code == 1 and "nothing was unpacked" in exc.value.hint
    with pytest.raises(CheckFailed, match="expired"):  # the clock's now, by default
        provenance.verify(bundle, envelope, [pub])
    # the default: DEFAULT_VALID_DAYS after it was made
    fresh = _statement(bundle)
    made_on = datetime.strptime(fresh["predicate"]["runDetails"]["metadata"]["finishedOn"], provenance.STAMP)
    assert datetime.strptime(fresh["predicate"]["runDetails"]["metadata"][provenance.EXPIRES], provenance.STAMP) \
        - made_on == timedelta(days=provenance.DEFAULT_VALID_DAYS)
    # a statement that states no expiry (signed by the same trusted key) is refused too
    del fresh["predicate"]["runDetails"]["metadata"][provenance.EXPIRES]
    provenance.write_envelope(bundle, provenance.sign(fresh, priv))
    with pytest.raises(CheckFailed, match="states no expiry"):
        provenance.verify(bundle, envelope, [pub])
