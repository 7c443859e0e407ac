"""envbuild bundle + provision --bundle onto chroot nodes that have no route out.

One bundle of cpu-reference is built for the session (torch from /opt/wheels, the rest
downloaded once with hashes checked). Two isolated chroot nodes, each in a network namespace
without a default route (``envbuild.testbed.offline``), are provisioned from it and smoked; a
bundle with one byte of one wheel changed, and one with a wheel removed (manifest intact), are
refused before anything is installed.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from envbuild.bundle.manifest import MANIFEST, Manifest
from envbuild.testbed import chroot
from support.paths import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WHEELS = Path("/opt/wheels")
PREFIX = "/opt/envs/offline"


def _envbuild(*argv: str, home: Path, timeout: int = 1500) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENVBUILD_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "envbuild", *argv], capture_output=True, text=True,
                          env=env, timeout=timeout)


def _result(stdout: str) -> dict:
    """The result object of ``provision --json`` (JSON Lines, or events then one JSON object)."""
    lines = stdout.strip().splitlines()
    for line in reversed(lines):
        if line.startswith("{") and '"type": "result"' in line:
            return json.loads(line)
    start = max(i for i, line in enumerate(lines) if line == "{")
    return json.loads("\n".join(lines[start:]))


@pytest.fixture(scope="session")
def bundle(tmp_path_factory):
    """(bundle file, its JSON summary): cpu-reference for --target local, built once."""
    if not any(WHEELS.glob("torch-2.13.0*cp311*.whl")):
        pytest.skip(f"no torch 2.13.0 cp311 wheel in {WHEELS}")
    folder = tmp_path_factory.mktemp("bundle")
    out = folder / "cpu-reference.tar"
    key = folder / "maker"  # the maker's key: its provenance is signed (issue 41)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "maker", "-f", str(key)], check=True)
    p = _envbuild("bundle", "cpu-reference", "--target", "local", "--wheelhouse", str(WHEELS),
                  "-o", str(out), "--sign-key", str(key), "--json", home=folder / "home", timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return out, json.loads(p.stdout)


@pytest.fixture(scope="module")
def offline(module_tmp):
    why = chroot.why_unavailable()
    if why:
        pytest.skip(why)
    from envbuild.testbed.offline import OfflineCluster

    base = module_tmp("offline")
    cluster = OfflineCluster(base / "nodes", 2, tag=f"ebo{os.getpid() % 10000}", base=10)
    nodes = cluster.__enter__()
    try:
        yield {"cluster": cluster, "nodes": nodes, "home": base / "home", "base": base}
    finally:
        cluster.stop()


def provision(offline, bundle_file: Path, *extra: str, prefix: str = PREFIX):
    c = offline["cluster"]
    t = time.time()
    p = _envbuild("provision", "--target", "local", "--bundle", str(bundle_file), "--hosts", c.hosts,
                  "--identity", str(c.key), "--known-hosts", str(c.known_hosts), "--prefix", prefix,
                  "--json", *extra, home=offline["home"])
    return p, time.time() - t


def test_bundle_holds_what_the_lock_names_and_nothing_else(bundle):
    out, summary = bundle
    with tarfile.open(out) as tar:
        members = tar.getmembers()
        assert members[0].name == MANIFEST
        manifest = Manifest.model_validate_json(tar.extractfile(members[0]).read())
        names = {m.name for m in members if m.isfile()}
    assert names == {MANIFEST} | {f.path for f in manifest.files}
    from envbuild.lock.serialize import read_lock

    lock = read_lock(ROOT / "lockfiles" / "cpu-reference" / "local.lock")
    dists = {(f.name, f.version): f for f in manifest.dists()}
    for entry in [*lock.packages, *lock.tooling]:
        f = dists[(entry.name, entry.version)]
        assert f.sha256 == entry.dist.sha256 and f.path.endswith(entry.dist.filename)
    assert len(dists) == len(lock.packages) + len(lock.tooling)
    kinds = {f.kind for f in manifest.files}
    assert {"lock", "recipe", "plan", "playbook", "dist"} <= kinds
    assert "playbooks/provision.yml" in names and "playbooks/ansible.cfg" in names
    for name in ("__init__", "actions", "effects", "state", "textpatch"):
        assert f"playbooks/ansible_collections/envbuild/node/plugins/module_utils/envbuild_node/{name}.py" in names
    assert summary["sha256"] and summary["bytes"] == out.stat().st_size
    assert manifest.git == [] and manifest.needs_network == []


def test_offline_nodes_have_no_route_out(offline):
    c = offline["cluster"]
    assert "default" not in c.routes(0)
    probe = "import socket; socket.create_connection(('pypi.org', 443), 5)"
    r = offline["nodes"][0].ssh(f"python3 -c \"{probe}\"", check=False)
    assert r.returncode != 0, r.stdout


def test_provision_from_bundle_offline_then_smoke(offline, bundle):
    out, _ = bundle
    p, took = provision(offline, out)
    res = _result(p.stdout)
    assert p.returncode == 0, (p.stderr[-2000:], json.dumps(res.get("results"), indent=1)[-3000:])
    run = Path(res["run_dir"])
    data = json.loads((run / "run.json").read_text())
    assert data["bundle"]["offline"] is True
    assert data["bundle"]["digest"] == _sha256(out)
    for node in offline["nodes"]:
        assert res["results"][node.addr]["status"] == "ok"
        smoke = json.loads((run / "nodes" / node.addr / "smoke.json").read_text())
        assert smoke, "the smoke ran"
        log = (run / "nodes" / node.addr / "log.txt").read_text()
        assert "--no-index" in log and "pypi.org" not in log
        r = node.ssh(f"{PREFIX}/bin/python -c 'import torch, numpy; print(torch.__version__)'")
        assert r.stdout.strip().splitlines()[-1] == "2.13.0+cpu"
    report = _envbuild("report", str(run), "--format", "json", home=offline["home"])
    rep = json.loads(report.stdout)
    assert rep["verdict"]["status"] == "PASS", rep["verdict"]
    assert rep["run"]["bundle"]["digest"] == data["bundle"]["digest"]
    md = _envbuild("report", str(run), home=offline["home"]).stdout
    assert "offline bundle" in md
    offline["cold_s"] = took


def test_second_provision_from_bundle_changes_nothing(offline, bundle):
    out, _ = bundle
    p, took = provision(offline, out)
    res = _result(p.stdout)
    assert p.returncode == 0, p.stderr[-2000:]
    for host, r in res["results"].items():
        assert r["changed"] == [], (host, r["changed"])
    assert took < offline.get("cold_s", float("inf"))


def _sha256(path: Path) -> str:
    from envbuild.fsio import sha256_file

    return sha256_file(path)


def _rewrite(src: Path, dest: Path, *, flip: str | None = None, drop: str | None = None) -> None:
    """A copy of the tar ``src`` with one byte of member ``flip`` changed or member ``drop`` left out."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tout:
        for m in tin.getmembers():
            if m.name == drop:
                continue
            data = tin.extractfile(m).read() if m.isfile() else None
            if m.name == flip:
                data = data[:1000] + bytes([data[1000] ^ 0xFF]) + data[1001:]
            tout.addfile(m, None if data is None else __import__("io").BytesIO(data))


def _first_wheel(manifest_tar: Path) -> str:
    with tarfile.open(manifest_tar) as tar:
        manifest = Manifest.model_validate_json(tar.extractfile(MANIFEST).read())
    return next(f.path for f in manifest.dists() if f.name == "tqdm")


@pytest.mark.parametrize("how", ["tampered", "incomplete"])
def test_damaged_bundle_is_refused_before_anything_is_installed(offline, bundle, tmp_path, how):
    out, _ = bundle
    wheel = _first_wheel(out)
    bad = tmp_path / f"{how}.tar"
    _rewrite(out, bad, **({"flip": wheel} if how == "tampered" else {"drop": wheel}))
    prefix = f"/opt/envs/{how}"
    p, _ = provision(offline, bad, prefix=prefix)
    assert p.returncode == 2, (p.stdout[-1500:], p.stderr[-1500:])
    assert wheel in p.stderr
    assert ("sha256" in p.stderr) if how == "tampered" else ("missing from the bundle" in p.stderr)
    assert "nothing was installed" in p.stderr
    for node in offline["nodes"]:
        assert node.ssh(f"test -e {prefix}", check=False).returncode != 0  # nothing on the node
    assert not list((offline["home"] / "bundles").glob("*.partial"))


def test_bundle_lacking_what_the_plan_needs_is_refused(bundle, tmp_path):
    """A consistent bundle, a plan that needs one more package: exit 1 naming it."""
    from envbuild.bundle.unpack import open_bundle
    from envbuild.errors import CheckFailed
    from envbuild.plan.model import Plan

    out, _ = bundle
    opened = open_bundle(out, home=tmp_path)
    plan = Plan.model_validate_json((opened.root / "plan.json").read_text())
    opened.check_plan(plan)  # the plan it was made for: complete
    step = plan.pip_installs()[0]
    extra = step.params.requirements[0].model_copy(update={"name": "six", "version": "1.16.0",
                                                            "requirement": "six==1.16.0"})
    params = step.params.model_copy(update={"requirements": [*step.params.requirements, extra]})
    steps = [s if s is not step else s.model_copy(update={"params": params}) for s in plan.steps]
    with pytest.raises(CheckFailed) as err:
        opened.check_plan(plan.model_copy(update={"steps": steps}))
    assert "six 1.16.0" in str(err.value) and err.value.exit_code == 1
    shutil.rmtree(tmp_path / "bundles", ignore_errors=True)


def _repack(src: Path, dest: Path, wheel: str) -> None:
    """``src`` re-packed as an attacker would: the wheel ``wheel`` replaced by other bytes, and
    the lock's and the manifest's sha256 and size made to match (a consistent bundle)."""
    import hashlib
    import io

    with tarfile.open(src) as tin:
        members = {m.name: (m, tin.extractfile(m).read() if m.isfile() else None) for m in tin.getmembers()}
    old = members[wheel][1]
    new = old + b"\0added code"
    old_sha, new_sha = hashlib.sha256(old).hexdigest(), hashlib.sha256(new).hexdigest()
    lock = members["lock.lock"][1].replace(old_sha.encode(), new_sha.encode())
    manifest = json.loads(members[MANIFEST][1])
    for f in manifest["files"]:
        if f["path"] == wheel:
            f.update(sha256=new_sha, size=len(new))
        if f["path"] == "lock.lock":
            f.update(sha256=hashlib.sha256(lock).hexdigest(), size=len(lock))
    data = {wheel: new, "lock.lock": lock, MANIFEST: json.dumps(manifest).encode()}
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tout:
        for name, (m, body) in members.items():
            body = data.get(name, body)
            if body is not None:
                m.size = len(body)
            tout.addfile(m, None if body is None else io.BytesIO(body))


def test_a_repacked_bundle_is_refused_unless_its_file_is_pinned(bundle, tmp_path, monkeypatch):
    """A bundle whose wheel was replaced and whose lock and manifest were re-hashed is
    consistent with itself: its lock is not the lock envbuild holds for cpu-reference on
    local, so provision refuses it (exit 1) before any node is read. A user who made a bundle
    from a lock of their own pins the file (--bundle-sha256); a wrong pin is refused before a
    byte is unpacked."""
    import hashlib

    from envbuild.bundle import offline as bundle_offline
    from envbuild.errors import CheckFailed
    from envbuild.provision.options import ProvisionOptions

    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    out, _ = bundle
    bad = tmp_path / "repacked.tar"
    _repack(out, bad, _first_wheel(out))
    with pytest.raises(CheckFailed) as err:
        bundle_offline.prepare(ProvisionOptions(target="local", bundle=str(bad)))
    assert err.value.exit_code == 1 and "not the lock envbuild holds for cpu-reference on local" in err.value.message
    # refused from its lock read in memory: nothing of it was unpacked (issue 41)
    assert not (tmp_path / "home" / "bundles").exists()
    digest = hashlib.sha256(bad.read_bytes()).hexdigest()
    # the hint never offers the digest of the file it refused (pasting it would install it)
    assert digest not in err.value.hint and "--bundle-sha256 HEX" in err.value.hint
    # the shipped bundle passes; the re-packed one only when the user pins that very file
    bundle_offline.prepare(ProvisionOptions(target="local", bundle=str(out)))
    opts = ProvisionOptions(target="local", bundle=str(bad), bundle_sha256=digest)
    assert bundle_offline.prepare(opts).digest == digest and opts.locked
    wrong = ProvisionOptions(target="local", bundle=str(out), bundle_sha256="0" * 64)
    bundle_offline._OPENED.clear()
    with pytest.raises(CheckFailed) as err:
        bundle_offline.prepare(wrong)
    assert "not the pinned" in err.value.message and "nothing was unpacked" in err.value.hint


@pytest.mark.parametrize("entry", [
    {"path": "prebuilt/x/a.whl", "kind": "prebuilt", "name": "../.."},
    {"path": "prebuilt/x/a.whl", "kind": "prebuilt", "name": "/etc"},
    {"path": "../outside.whl", "kind": "dist", "name": "six"},
    {"path": "node/wheels/a.whl", "kind": "dist", "name": "six/../../x"},
])
def test_a_manifest_entry_that_leaves_its_folder_is_refused_before_anything_is_written(bundle, tmp_path, entry):
    """A re-packed manifest naming a prebuilt cache key ``../..`` (or an absolute or climbing path)
    would write outside the build cache when its wheels are seeded: it is refused when the
    manifest is read, before a member is unpacked (so under --dry-run too)."""
    from envbuild.bundle.unpack import open_bundle
    from envbuild.errors import InputError

    out, _ = bundle
    bad = tmp_path / "hostile.tar"
    with tarfile.open(out) as tin:
        members = {m.name: (m, tin.extractfile(m).read() if m.isfile() else None) for m in tin.getmembers()}
    manifest = json.loads(members[MANIFEST][1])
    manifest["files"].append({"sha256": "0" * 64, "size": 0, **entry})
    body = json.dumps(manifest).encode()
    with tarfile.open(bad, "w", format=tarfile.PAX_FORMAT) as tout:
        for name, (m, data) in members.items():
            data = body if name == MANIFEST else data
            if data is not None:
                m.size = len(data)
            tout.addfile(m, None if data is None else io.BytesIO(data))
    with pytest.raises(InputError) as err:
        open_bundle(bad, home=tmp_path / "home")
    bad_value = entry["name"] if entry["path"].startswith(("prebuilt/", "node/")) else entry["path"]
    assert "not a bundle manifest: files." in err.value.message and repr(bad_value) in err.value.message
    assert not list((tmp_path / "home" / "bundles").glob("*/*")) and not (tmp_path / "etc").exists()


def test_a_member_larger_than_its_manifest_entry_is_refused_before_unpacking(bundle, tmp_path):
    """A member whose tar header says more bytes than the manifest (a small compressed file
    that would expand on disk) is refused before anything is written."""
    import io

    from envbuild.bundle.unpack import open_bundle
    from envbuild.errors import InputError

    out, _ = bundle
    wheel = _first_wheel(out)
    big = tmp_path / "big.tar.gz"
    with tarfile.open(out) as tin, tarfile.open(big, "w:gz", format=tarfile.PAX_FORMAT) as tout:
        for m in tin.getmembers():
            body = tin.extractfile(m).read() if m.isfile() else None
            if m.name == wheel:
                body = body + b"\0" * (64 * 2**20)  # 64 MiB of zeros: a few KiB compressed
                m.size = len(body)
            tout.addfile(m, None if body is None else io.BytesIO(body))
    assert big.stat().st_size < out.stat().st_size + 2**20
    with pytest.raises(InputError) as err:
        open_bundle(big, home=tmp_path / "home")
    assert f"{wheel}: {64 * 2**20 + len(tarfile.open(out).extractfile(wheel).read())} bytes" in err.value.message
    assert not list((tmp_path / "home" / "bundles").glob("*/*"))  # nothing unpacked


def test_an_unsigned_bundle_over_a_signed_one_removes_its_envelope(bundle, tmp_path):
    """Re-bundling to the path of a signed bundle without --sign-key: the old envelope (it
    names the old file) is removed and said, not left beside the new bundle."""
    from envbuild.bundle import provenance

    out, _ = bundle
    again = tmp_path / out.name
    shutil.copy(provenance.envelope_path(out), provenance.envelope_path(again))
    p = _envbuild("bundle", "cpu-reference", "--target", "local", "--wheelhouse", str(WHEELS), "-o", str(again),
                  "--json", home=tmp_path / "home", timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout)["removed"] == [str(provenance.envelope_path(again))]
    assert again.is_file() and not provenance.envelope_path(again).exists()


def test_a_signed_bundle_is_verified_before_anything_is_unpacked(bundle, tmp_path, monkeypatch):
    """Issue 41: `envbuild bundle --sign-key` wrote an in-toto statement (SLSA provenance) in a
    DSSE envelope beside the bundle, naming the bundle's sha256 and what it was made from.
    `provision --bundle --trusted-key` verifies it before a byte is unpacked: the maker's key
    passes (and pins the file); another key's signature, a re-packed bundle under the maker's
    genuine envelope, a missing envelope and a forged payload are refused, nothing unpacked."""
    import base64
    import hashlib

    from envbuild.bundle import offline as bundle_offline
    from envbuild.bundle import provenance
    from envbuild.errors import CheckFailed
    from envbuild.provision.options import ProvisionOptions

    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    out, summary = bundle
    envelope = provenance.envelope_path(out)
    assert summary["provenance"] == str(envelope)
    env = json.loads(envelope.read_text())
    stmt = json.loads(base64.b64decode(env["payload"]))
    assert stmt["_type"] == "https://in-toto.io/Statement/v1"
    assert stmt["predicateType"] == "https://slsa.dev/provenance/v1"
    assert stmt["subject"] == [{"name": out.name, "digest": {"sha256": summary["sha256"]}}]
    build = stmt["predicate"]["buildDefinition"]
    assert build["externalParameters"]["recipe"] == "cpu-reference"
    assert {d["name"].split(":")[0] for d in build["resolvedDependencies"] if "name" in d} == {"recipe", "lock", "target"}
    maker = out.parent / "maker.pub"
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)

    def prepare(bundle_file, *keys, envelope_file=None):
        bundle_offline._OPENED.clear()
        return bundle_offline.prepare(ProvisionOptions(target="local", bundle=str(bundle_file),
                                                       trusted_keys=tuple(map(str, keys)),
                                                       provenance=str(envelope_file) if envelope_file else None))

    def refused(*args, **kw) -> str:
        with pytest.raises(CheckFailed) as err:
            prepare(*args, **kw)
        assert err.value.exit_code == 1 and "nothing was unpacked" in err.value.hint
        assert not (tmp_path / "home" / "bundles").exists()
        return err.value.message

    assert "not by a trusted key" in refused(out, f"{other}.pub")
    bad = tmp_path / "repacked.tar"
    _repack(out, bad, _first_wheel(out))
    assert "not the signed statement's" in refused(bad, maker, envelope_file=envelope)
    assert "no provenance" in refused(bad, maker)
    forged = dict(env, payload=base64.b64encode(json.dumps(
        {**stmt, "subject": [{"name": bad.name, "digest": {"sha256": hashlib.sha256(bad.read_bytes()).hexdigest()}}]},
        sort_keys=True, separators=(",", ":")).encode()).decode())
    (tmp_path / "forged.jsonl").write_text(json.dumps(forged) + "\n")
    assert "not by a trusted key" in refused(bad, maker, envelope_file=tmp_path / "forged.jsonl")
    # the maker's key: verified, and the signed digest pins the file (a lock of the maker's own
    # would be accepted as --bundle-sha256 accepts it)
    assert prepare(out, f"{other}.pub", maker).digest == summary["sha256"]
