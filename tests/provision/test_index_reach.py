"""A node that cannot reach a package index its plan names is refused before anything installs,
with the URL and the flag that fixes it (``envbuild.facts.reach``).

download.pytorch.org is not reachable from this machine: the embedded default (torch from the
CPU index) is refused for real in a second, instead of pip's retries; with ``--wheelhouse`` the
torch step installs from the wheelhouse alone and names no index, so nothing is probed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envbuild.facts import reach
from envbuild.inputs import find_lock, node_facts
from envbuild.plan import indexes
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import default_recipe
from envbuild.targets import load_target

TORCH_CPU = "https://download.pytorch.org/whl/cpu"
# the probe's output on this machine (no route to download.pytorch.org, PyPI reachable)
CAPTURED = ("fail\thttps://download.pytorch.org/whl/cpu\t<urlopen error [Errno -2] Name or service not known>\n"
            "ok\thttps://pypi.org/simple/six/\n")


def test_parser_reads_the_captured_probe():
    urls = [TORCH_CPU, "https://pypi.org/simple/six/"]
    assert reach.unreachable(urls, 0, CAPTURED, "") == {TORCH_CPU: "<urlopen error [Errno -2] Name or service not known>"}
    # a URL the probe never answered for is unreachable, with the probe's own error
    assert reach.unreachable(urls, 127, "", "sh: 1: python3: not found\n") == {
        u: "sh: 1: python3: not found" for u in urls}


def _plan(wheelhouse: str | None):
    rec = default_recipe()
    tgt = load_target(rec.targets[0])
    facts = node_facts(tgt)[0]
    return resolve(rec, tgt, facts, find_lock(rec, tgt), PlanOptions(prefix="/tmp/x", wheelhouse=wheelhouse)).plan


def test_the_default_plan_names_the_torch_index_unless_a_wheelhouse_serves_it():
    assert TORCH_CPU in indexes.remote_indexes(_plan(None))
    assert indexes.remote_indexes(_plan("/opt/wheels")) == []


@pytest.mark.integration
def test_an_unreachable_index_is_refused_before_anything_installs(tmp_path):
    prefix = tmp_path / "prefix"
    # a fresh machine: no pip config or PIP_FIND_LINKS that would serve torch from a local folder
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local", "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**env, "ENVBUILD_HOME": str(tmp_path / "home"), "PIP_CONFIG_FILE": os.devnull})
    assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"local cannot reach {TORCH_CPU}" in p.stderr and "--wheelhouse" in p.stderr, p.stderr
    assert not prefix.exists()  # not even the venv
    assert not list((tmp_path / "home").rglob("job_events"))  # ansible never started


def test_the_wheels_the_plan_takes_from_the_index_are_named():
    assert "torch-2.13.0" in indexes.wheels_from(_plan(None), TORCH_CPU)


def test_a_local_find_links_answer_is_not_unreachable():
    out = f"local\t{TORCH_CPU}\t/opt/wheels\n"
    assert reach.parse(out) == {TORCH_CPU: None}
    assert reach.unreachable([TORCH_CPU], 0, out, "") == {}


@pytest.mark.integration
@pytest.mark.parametrize("has_wheel", [True, False])
def test_the_nodes_pip_find_links_serve_an_unreachable_index(tmp_path, has_wheel):
    """The real probe against the real (unreachable) torch index: a node whose pip finds the
    planned torch wheel in a find-links folder (PIP_FIND_LINKS, or find-links in pip.conf) is
    served locally, as pip itself would be after its retries; an empty folder is not."""
    links = tmp_path / "wheels"
    links.mkdir()
    if has_wheel:
        (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    env = {**os.environ, "PIP_FIND_LINKS": str(links), "PIP_CONFIG_FILE": os.devnull}
    cmd = reach.probe_command([TORCH_CPU], sys.executable, {TORCH_CPU: ["torch-2.13.0"]})
    p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60, env=env)
    got = reach.unreachable([TORCH_CPU], p.returncode, p.stdout, p.stderr)
    if has_wheel:
        assert got == {} and p.stdout.startswith("local\t"), p.stdout + p.stderr
    else:
        assert TORCH_CPU in got, p.stdout + p.stderr


@pytest.mark.integration
def test_an_index_served_by_the_nodes_find_links_installs_from_them_with_uv(tmp_path):
    """uv does not fall back to pip's find-links as pip does: the provision plans the steps of
    an unreachable index that the node's find-links serve as a wheelhouse of that folder."""
    prefix = tmp_path / "prefix"
    env = {**os.environ, "PIP_FIND_LINKS": "/opt/wheels", "PIP_CONFIG_FILE": os.devnull,
           "ENVBUILD_HOME": str(tmp_path / "home")}
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local", "--prefix", str(prefix),
                        "--installer", "uv", "--no-smoke"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    # --no-smoke: every node ok, nothing judged (NOT JUDGED, exit 5)
    assert p.returncode == 5, p.stdout[-3000:] + p.stderr[-2000:]
    assert "find-links folder /opt/wheels holds every wheel" in p.stdout + p.stderr
    run = sorted((tmp_path / "home" / "runs").glob("2*"))[-1]
    plan = json.loads((run / "nodes" / "local" / "plan.json").read_text())
    torch = next(s for s in plan["steps"] if s["id"] == "pip:torch")
    assert torch["params"]["no_index"] is True and "/opt/wheels" in torch["params"]["find_links"]
    installer = (next(prefix.glob("lib/python3*/site-packages/torch-*.dist-info")) / "INSTALLER").read_text()
    assert installer.strip() == "uv"
