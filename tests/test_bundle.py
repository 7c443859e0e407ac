"""envbuild bundle + provision --bundle onto chroot nodes that have no route out.

One bundle of cpu-reference is built for the session (torch from /opt/wheels, the rest
downloaded once with hashes checked). Two isolated chroot nodes, each in a network namespace
without a default route (``envbuild.testbed.offline``), are provisioned from it and smoked; a
bundle with one byte of one wheel changed, and one with a wheel removed (manifest intact), are
refused before anything is installed.
"""

from __future__ import annotations

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
    p = _envbuild("bundle", "cpu-reference", "--target", "local", "--wheelhouse", str(WHEELS),
                  "-o", str(out), "--json", home=folder / "home", timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return out, json.loads(p.stdout)


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    why = chroot.why_unavailable()
    if why:
        pytest.skip(why)
    from envbuild.testbed.offline import OfflineCluster

    base = tmp_path_factory.mktemp("offline")
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

    lock = read_lock(Path(__file__).resolve().parents[1] / "envbuild" / "lockfiles" / "cpu-reference" / "local.lock")
    dists = {(f.name, f.version): f for f in manifest.dists()}
    for entry in [*lock.packages, *lock.tooling]:
        f = dists[(entry.name, entry.version)]
        assert f.sha256 == entry.dist.sha256 and f.path.endswith(entry.dist.filename)
    assert len(dists) == len(lock.packages) + len(lock.tooling)
    kinds = {f.kind for f in manifest.files}
    assert {"lock", "recipe", "plan", "playbook", "dist"} <= kinds
    assert "playbooks/provision.yml" in names and "playbooks/ansible.cfg" in names
    for name in ("envbuild_onnode", "envbuild_onnode_effects", "envbuild_onnode_steps"):
        assert f"playbooks/ansible_collections/envbuild/node/plugins/module_utils/{name}.py" in names
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
    from envbuild.bundle.manifest import sha256_file

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
    step = next(s for s in plan.steps if s.kind == "pip_install")
    extra = step.params.requirements[0].model_copy(update={"name": "six", "version": "1.16.0",
                                                            "requirement": "six==1.16.0"})
    params = step.params.model_copy(update={"requirements": [*step.params.requirements, extra]})
    steps = [s if s is not step else s.model_copy(update={"params": params}) for s in plan.steps]
    with pytest.raises(CheckFailed) as err:
        opened.check_plan(plan.model_copy(update={"steps": steps}))
    assert "six 1.16.0" in str(err.value) and err.value.exit_code == 1
    shutil.rmtree(tmp_path / "bundles", ignore_errors=True)
