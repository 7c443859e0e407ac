"""No rollback of a signed bundle (issue 54, item 1). Two bundles of a small recipe of one's own
(an empty venv, locked in its own lockdir), signed a second apart by the same key, as
`envbuild bundle --sign-key` writes them; `provision --bundle --trusted-key --dry-run` run as
a user runs it:

* the older one served under the newer one's name is refused once the newer was accepted
  (the record is per ENVBUILD_HOME), whatever pin is given;
* a valid signature never switches off the comparison with the lock envbuild holds;
* a statement binds its subject's name and the bundle's lock digest: a renamed bundle, or a
  statement of another lock, is refused; `attest` shows the subject's name and refuses the
  renamed file;
* a statement binds its expiry (`bundle --valid-days`): an expired one is refused (exit 1),
  nothing unpacked nor recorded as accepted."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from envbuild.bundle import provenance

pytestmark = pytest.mark.integration

RECIPE = {"schema": 1, "name": "tiny-signed", "title": "a signed bundle", "description": "v1",
          "published": {"url": "https://example.invalid/tiny"}, "python": "3.11", "targets": ["local"],
          "environment": {"kind": "venv"}}


def envbuild(*args: str, home: Path, lockdir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENVBUILD_HOME": str(home), "ENVBUILD_LOCKDIR": str(lockdir),
           "ENVBUILD_CACHE_DIR": str(home.parent / "cache")}
    return subprocess.run([sys.executable, "-m", "envbuild", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two signed bundles named alike, v1 made before v2 (another recipe text, so another lock)."""
    base = tmp_path_factory.mktemp("rollback")
    key = base / "maker"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    lockdir, home = base / "locks", base / "maker-home"
    out = {}
    for version in ("v1", "v2"):
        recipe = base / version / "tiny-signed.yaml"
        recipe.parent.mkdir()
        recipe.write_text(yaml.safe_dump({**RECIPE, "description": version}, sort_keys=False))
        for args in (("lock", str(recipe), "--target", "local"),
                     ("bundle", str(recipe), "--target", "local", "-o", str(base / version / "tiny.tar"),
                      "--sign-key", str(key))):
            p = envbuild(*args, home=home, lockdir=lockdir)
            assert p.returncode == 0, p.stderr[-2000:]
        out[version] = base / version / "tiny.tar"
        if version == "v1":
            time.sleep(1.2)  # creation times are to the second
    return {"base": base, "key": Path(f"{key}.pub"), "lockdir": lockdir, **out}


def provision(made, bundle: Path, home: Path, *extra: str) -> subprocess.CompletedProcess:
    return envbuild("provision", "--target", "local", "--bundle", str(bundle), "--trusted-key", str(made["key"]),
                    "--prefix", str(made["base"] / "env"), "--dry-run", *extra, home=home, lockdir=made["lockdir"])


def serve(made, version: str, folder: str, name: str = "tiny.tar") -> Path:
    """The bundle and its envelope copied, as a mirror or a share serves them, under ``name``."""
    dest = made["base"] / folder / name
    dest.parent.mkdir(exist_ok=True)
    shutil.copyfile(made[version], dest)
    shutil.copyfile(provenance.envelope_path(made[version]), provenance.envelope_path(dest))
    return dest


def test_an_older_signed_bundle_under_the_newer_ones_name_is_refused(made):
    home = made["base"] / "client"
    p = provision(made, made["v2"], home)
    assert p.returncode == 0, p.stderr[-2000:]
    accepted = json.loads((home / "trust" / "accepted.json").read_text())["bundle"]["tiny-signed/local"]
    assert accepted["sha256"] == hashlib.sha256(made["v2"].read_bytes()).hexdigest()
    old = serve(made, "v1", "mirror")  # v1's bytes and v1's genuine envelope, named as v2 is
    p = provision(made, old, home)
    assert p.returncode == 1 and "a rollback" in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "not after the newest one accepted here" in p.stderr
    v1_sha = hashlib.sha256(old.read_bytes()).hexdigest()
    p = provision(made, old, home, "--bundle-sha256", v1_sha)  # a pin does not make it newer
    assert p.returncode == 1 and "a rollback" in p.stderr
    assert provision(made, made["v2"], home).returncode == 0  # the same newest bundle again
    # the record is this ENVBUILD_HOME's: another client that never saw v2 takes v1 when pinned
    assert provision(made, old, made["base"] / "other-client", "--bundle-sha256", v1_sha).returncode == 0


def test_a_valid_signature_never_switches_off_the_held_lock_comparison(made):
    """v1 is signed by the trusted key, but the lock envbuild holds is v2's: refused, as an
    unsigned re-packed bundle is (exit 1, nothing unpacked), in a client that accepted nothing."""
    home = made["base"] / "fresh-client"
    p = provision(made, made["v1"], home)
    assert p.returncode == 1, p.stderr[-2000:]
    assert "not the lock envbuild holds for tiny-signed on local" in p.stderr
    assert not (home / "bundles").exists() and not (home / "trust" / "accepted.json").exists()


def test_a_statement_binds_the_name_and_the_lock_digest(made, tmp_path):
    home = tmp_path / "client"
    renamed = serve(made, "v2", "renamed", "tiny-v3.tar")
    p = provision(made, renamed, home)
    assert p.returncode == 1 and "the signed statement names another file, 'tiny.tar'" in p.stderr
    # attest shows the subject's name, and refuses the renamed file
    p = envbuild("attest", str(made["v2"]), "--trusted-key", str(made["key"]), "--kind", "bundle",
                 home=home, lockdir=made["lockdir"])
    assert p.returncode == 0 and "subject tiny.tar (the file's name)" in p.stdout, p.stderr
    p = envbuild("attest", str(renamed), "--trusted-key", str(made["key"]), "--kind", "bundle",
                 home=home, lockdir=made["lockdir"])
    assert p.returncode == 1 and "names another file" in p.stderr
    # a statement the maker's key signed for these very bytes, but of another lock digest
    other = serve(made, "v2", "other-lock")
    stmt = json.loads(base64.b64decode(json.loads(provenance.envelope_path(other).read_text())["payload"]))
    stmt["predicate"]["buildDefinition"]["externalParameters"]["lockDigest"] = "0" * 64
    provenance.write_envelope(other, provenance.sign(stmt, made["key"].with_suffix("")))
    p = provision(made, other, home)
    assert p.returncode == 1 and "signed statement's lock_digest differ" in p.stderr, p.stderr[-2000:]


def test_an_expired_signed_bundle_is_refused(made):
    """The newest bundle, signed by the trusted key with the lock envbuild holds, but its
    statement expired: refused before a byte is unpacked, and not recorded as accepted."""
    out = made["base"] / "expired" / "tiny.tar"
    p = envbuild("bundle", str(made["base"] / "v2" / "tiny-signed.yaml"), "--target", "local", "-o", str(out),
                 "--sign-key", str(made["key"]).removesuffix(".pub"), "--valid-days", "0.00001",
                 home=made["base"] / "maker-home", lockdir=made["lockdir"])
    assert p.returncode == 0, p.stderr[-2000:]
    time.sleep(1.2)  # 0.00001 days is 0.864 s after it was made
    home = made["base"] / "expired-client"
    p = provision(made, out, home)
    assert p.returncode == 1 and "the signed statement expired at" in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "nothing was unpacked" in p.stderr
    assert not (home / "bundles").exists() and not (home / "trust" / "accepted.json").exists()
    p = envbuild("bundle", str(made["base"] / "v2" / "tiny-signed.yaml"), "--target", "local", "-o", str(out),
                 "--valid-days", "1", home=made["base"] / "maker-home", lockdir=made["lockdir"])
    assert p.returncode == 2 and "goes with --sign-key" in p.stderr
