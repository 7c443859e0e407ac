"""One signing for every command that signs (issue 55: bundle, pack, report, image-provenance):
``envbuild.flows.signing`` checks the key before anything is made, removes a stale envelope
first, and writes the statement it builds from the stamp, signed. The commands' own signed
artifacts are tested in tests/bundle/test_bundle.py, tests/bundle/test_envpack.py, tests/report/test_report_provenance.py
and tests/bundle/test_image_provenance.py."""

from __future__ import annotations

import subprocess

import pytest

from envbuild import __version__
from envbuild.bundle import provenance as P
from envbuild.errors import InputError
from envbuild.flows.signing import Signed, beside, sign_provenance, signer
from envbuild.fsio import sha256_file


def _key(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t", "-f", str(path)], check=True)
    return path


def _artifact(tmp_path):
    out = tmp_path / "thing.tar"
    out.write_bytes(b"new bytes")
    beside(out).write_text("the envelope of the thing this one replaced\n")
    return out


def _statement(out):
    return lambda stamp: P.statement(out.name, sha256_file(out), recipe="r", target="t", lock_digest="", inputs={},
                                     git=[], **stamp.fields())


def test_a_signed_envelope_replaces_the_stale_one_and_carries_the_stamp(tmp_path):
    key = _key(tmp_path / "maker")
    out = _artifact(tmp_path)
    sig = signer(key, 2)
    signed = sign_provenance(beside(out), sig, _statement(out))
    assert signed.provenance == beside(out) == tmp_path / "thing.tar.intoto.jsonl" and signed.removed is None
    stmt = P.verify(out, beside(out), [tmp_path / "maker.pub"])
    assert stmt == signed.statement
    meta = stmt["predicate"]["runDetails"]["metadata"]
    assert meta["startedOn"] == sig.started and meta[P.EXPIRES] == P.valid_until(meta["finishedOn"], 2)
    assert stmt["predicate"]["buildDefinition"]["internalParameters"]["envbuildVersion"] == __version__


def test_without_a_key_the_stale_envelope_is_removed_and_nothing_signed(tmp_path):
    out = _artifact(tmp_path)

    def never(_stamp):
        raise AssertionError("no statement is made without a key")

    assert sign_provenance(beside(out), signer(None), never) == Signed(removed=beside(out))
    assert not beside(out).exists()
    assert sign_provenance(beside(out), signer(None), never) == Signed()  # nothing stale: nothing said


def test_the_stale_envelope_is_gone_before_the_statement_is_made(tmp_path):
    """A statement that cannot be made leaves no envelope of the replaced artifact beside the new one."""
    key = _key(tmp_path / "maker")
    out = _artifact(tmp_path)

    def broken(_stamp):
        raise InputError("no statement")

    with pytest.raises(InputError, match="no statement"):
        sign_provenance(beside(out), signer(key), broken)
    assert not beside(out).exists()


def test_an_unusable_key_is_refused_before_anything_is_made(tmp_path):
    _key(tmp_path / "maker")
    with pytest.raises(InputError, match="not an Ed25519 private key"):
        signer(tmp_path / "maker.pub", 1)
    assert signer(None).valid_days == P.DEFAULT_VALID_DAYS
