"""envbuild provision of cpu-reference onto an isolated chroot node, installing with uv.

The node has its own /usr and Python (Debian 12); the controller's uv is pushed to it as a
plan step and checked by sha256; every package of the lock is installed by uv (each
distribution's INSTALLER says so); a second provision finds every step done, the pushed uv
included, and starts no Ansible; ``--installer pip`` on a fresh prefix installs with pip.
torch 2.13.0 CPU comes from /opt/wheels (bind-mounted read-only).

The cold uv provision is the run's reference node (``reference_node`` in tests/conftest.py:
made once per run, its layer shared by the chroot and e2e modules and the image equivalence
test); this module asserts that run and its result on a node started over the reference layer.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.facts.uvbin import controller_uv
from envbuild.testbed import chroot

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WHEELS = Path("/opt/wheels")


@pytest.fixture(scope="module")
def bed(module_tmp, reference_node):
    if controller_uv()[1] is None:
        pytest.skip("no uv binary on this controller")
    base = module_tmp("uvnode")
    cluster = chroot.wheel_cluster(base, 1, base=190, wheels=WHEELS, prefix="uvn",
                                   layers=[Path(reference_node["layer"])])
    nodes = cluster.__enter__()
    try:
        yield {"node": nodes[0], "cluster": cluster, "base": base, "lock": Path(reference_node["lock"])}
    finally:
        cluster.stop()


def provision(bed, prefix: str, *extra: str) -> tuple[int, dict]:
    argv = [sys.executable, "-m", "envbuild", "provision", "cpu-reference", "--target", "local",
            "--hosts", bed["cluster"].hosts, "--identity", str(bed["cluster"].key), "--insecure",
            "--prefix", prefix, "--wheelhouse", str(WHEELS), "--lock", str(bed["lock"]),
            "--no-smoke", "--json", *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1500,
                       env={**os.environ, "ENVBUILD_HOME": str(bed["base"] / "home")})
    lines = p.stdout.strip().split("\n")
    assert lines and '"type": "result"' in lines[-1], p.stdout[-2000:] + p.stderr[-2000:]
    return p.returncode, json.loads(lines[-1])


def installers(node, prefix: str) -> dict[str, str]:
    out = node.ssh(f"cd {prefix}/lib/python3*/site-packages && for d in *.dist-info; do "
                   "printf '%s %s\\n' \"$d\" \"$(cat $d/INSTALLER)\"; done").stdout
    return {line.split()[0].split("-")[0].lower(): line.split()[1] for line in out.splitlines()}


def test_cold_provision_installs_every_locked_package_with_uv(bed, reference_node):
    node, prefix = bed["node"], reference_node["prefix"]
    rc, out = reference_node["rc"], reference_node["result"]  # the cold run, onto a node of its own
    res = next(iter(out["results"].values()))
    assert rc == 5 and res["status"] == "ok", res  # no smoke: nothing judged (NOT JUDGED, exit 5)
    assert "pip:torch" in res["changed"] and not res["skipped"], res  # cold: every step ran
    run = Path(out["run_dir"])
    plan = json.loads(next(run.glob("nodes/*/plan.json")).read_text())
    ids = [s["id"] for s in plan["steps"]]
    assert "uv" in ids and ids.index("uv") == ids.index("environment") + 1
    assert next(d for d in plan["decisions"] if d["subject"] == "installer")["outcome"].startswith("uv ")
    # uv really ran: every distribution of the lock says INSTALLER uv (on this node, started over
    # the reference node's layer)
    got = installers(node, prefix)
    for name in ("torch", "numpy", "einops", "regex", "tqdm", "pip", "filelock", "jinja2"):
        assert got.get(name) == "uv", (name, got)
    path, uv = controller_uv()
    tool = next(s for s in plan["steps"] if s["id"] == "uv")["params"]["dest"]
    assert tool == f"/root/.cache/envbuild/uv/{uv.sha256[:16]}/uv"  # one copy per node, in $HOME
    pushed = node.ssh(f"sha256sum {tool}").stdout.split()[0]
    assert pushed == uv.sha256 == hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert node.ssh(f"{prefix}/bin/python -c 'import torch, numpy; print(torch.__version__)'").stdout.startswith("2.13.0")
    # the venv was made --without-pip: its pip is the lock's, put in by uv, and it runs
    assert next(s for s in plan["steps"] if s["id"] == "environment")["params"]["with_pip"] is False
    pip_version = node.ssh(f"{prefix}/bin/python -m pip --version").stdout
    assert pip_version.startswith("pip ") and f"{prefix}/lib/" in pip_version, pip_version
    log = node.ssh(f"head -1 {prefix}/.envbuild/logs/pip-torch.log").stdout
    assert log.startswith(f"$ {tool} pip install") and "--require-hashes" in log

    # nothing to do the second time, from another controller home onto another node with the
    # same layer: every effect holds (uv's sha256 and the uv-installed RECORDs)
    rc, out = provision(bed, prefix)
    res = next(iter(out["results"].values()))
    assert rc == 5 and res["status"] == "ok" and not res["changed"], res
    assert json.loads((Path(out["run_dir"]) / "run.json").read_text())["ansible"].startswith("not started")


def test_installer_pip_installs_with_pip(bed):
    node, prefix = bed["node"], "/opt/envs/pipref"
    rc, out = provision(bed, prefix, "--installer", "pip")
    res = next(iter(out["results"].values()))
    assert rc == 5 and res["status"] == "ok", res
    got = installers(node, prefix)
    assert got.get("torch") == "pip" and got.get("numpy") == "pip", got
    run = Path(out["run_dir"])
    plan = json.loads(next(run.glob("nodes/*/plan.json")).read_text())
    assert "uv" not in [s["id"] for s in plan["steps"]]
    assert next(d for d in plan["decisions"] if d["subject"] == "installer")["outcome"] == "pip"


def test_the_resolvers_uv_cache_does_not_hold_the_pushed_uv(monkeypatch, tmp_path) -> None:
    """On a node that is also the controller, pruning the resolver's uv cache must not delete
    the uv binary provision pushed there (uv prunes folders it does not know)."""
    from envbuild.facts.model import NodeFacts, UvBinary
    from envbuild.lock.location import cache_dir
    from envbuild.plan.build import uv_dest

    monkeypatch.delenv("ENVBUILD_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    uv = UvBinary(version="0.13.9", sha256="ab" * 32, os="linux", arch="x86_64", libc="glibc",
                  glibc_min="2.17")
    pushed = Path(uv_dest(NodeFacts(host="n1", home=str(tmp_path)), "/opt/env", uv))
    assert pushed.is_relative_to(tmp_path / ".cache" / "envbuild")
    assert not pushed.is_relative_to(cache_dir()), (pushed, cache_dir())
