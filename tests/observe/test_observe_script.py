"""The node-side observe script against a real venv, a real git tree, a real built .so and patch
(made by ``tests/support/observed.py``, which the verify tests build their environments with too).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envbuild.observe import compare, parse_observed
from support.nodefloor import FLOOR, floor_python
from support.observed import build_so, make_env, observe_local, sh, write_env_file

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("observe")
    lock, plan = make_env(root, {"six": "1.16.0"})
    return root, lock, plan


def test_observes_packages_git_patch_so_and_env(env):
    root, lock, plan = env
    obs = observe_local(plan, extra_env={"NCCL_SOCKET_IFNAME": "lo"})
    assert obs.python == ".".join(map(str, sys.version_info[:3]))
    assert obs.packages["six"] == "1.16.0"
    assert obs.git == {"megatron": lock["git"][0]["sha"]}
    [patch] = obs.patches
    assert (patch.id, patch.component, patch.status, patch.reason) == (
        "untie-embeddings", "megatron", "applied", "as benchmarked")
    assert "-TIE_EMBEDDINGS = True" in patch.diff
    so = [e for e in obs.extensions if e.path.endswith("fused_kernels.so")]
    assert len(so) == 1 and len(so[0].sha256) == 64
    assert {k: obs.env[k] for k in ("NCCL_DEBUG", "CUDA_DEVICE_MAX_CONNECTIONS")} == {
        "NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert obs.process_env.get("NCCL_SOCKET_IFNAME") == "lo"
    assert compare(lock, plan, obs, baseline=obs) == []


def test_each_kind_of_drift_is_seen(tmp_path):
    lock, plan = make_env(tmp_path, {"six": "1.16.0"})
    baseline = observe_local(plan)
    prefix, tree = Path(plan["prefix"]), Path(plan["steps"][0]["params"]["dest"])
    sh(sys.executable, "-m", "uv", "pip", "install", "-q", "--python", prefix / "bin" / "python", "six==1.17.0")
    sh("git", "checkout", "-q", "--", ".", cwd=tree)  # reverts the patch
    (tree / "NOTES").write_text("x\n")
    sh("git", "add", "NOTES", cwd=tree)
    sh("git", "commit", "-q", "-m", "moved", cwd=tree)
    build_so(tree / "megatron" / "fused_kernels.so", 7)
    write_env_file(prefix, {"NCCL_DEBUG": "INFO"})
    drift = compare(lock, plan, observe_local(plan), baseline=baseline)
    assert sorted(d.kind for d in drift) == ["commit-moved", "env-changed", "env-missing", "package-version",
                                             "patch-missing", "so-hash-changed"]
    by_kind = {d.kind: d for d in drift}
    assert (by_kind["package-version"].expected, by_kind["package-version"].observed) == ("1.16.0", "1.17.0")
    assert by_kind["patch-missing"].observed == "reverted"
    assert by_kind["env-missing"].subject == "CUDA_DEVICE_MAX_CONNECTIONS"


def test_removed_package_is_package_missing(tmp_path):
    lock, plan = make_env(tmp_path, {"six": "1.16.0"})
    sh(sys.executable, "-m", "uv", "pip", "uninstall", "-q", "--python", Path(plan["prefix"]) / "bin" / "python", "six")
    drift = compare(lock, plan, observe_local(plan))
    assert [(d.kind, d.subject) for d in drift] == [("package-missing", "six")]


def test_script_runs_on_the_node_packages_floor(env):
    """The script runs under the oldest Python the node package supports (envbuild.node.PYTHON_FLOOR)."""
    python = floor_python()
    if python is None:
        pytest.skip(f"no Python {FLOOR} on this machine")
    root, lock, plan = env
    obs = observe_local(plan, python=python)
    assert obs.python.rsplit(".", 1)[0] == FLOOR
    assert obs.git == {"megatron": lock["git"][0]["sha"]}
    assert obs.patches[0].status == "applied"
    assert obs.packages  # pip itself, at least


def test_garbage_output_is_a_clear_error():
    from envbuild.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="did not print JSON.*command not found"):
        parse_observed("bash: /opt/env/bin/python: command not found\n", "gpu-a")
