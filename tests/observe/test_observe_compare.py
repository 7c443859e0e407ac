"""Pure parts of observe: reading expectations from a lock + plan, and compare() on data."""

from __future__ import annotations

import json

from envbuild.observe import Observed, compare, expected_state, read_lock
from envbuild.observe.expected import lock_git, lock_packages
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from support.paths import DATA

RUN = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def load(node: str, name: str) -> dict:
    return json.loads((RUN / "nodes" / node / name).read_text())


def plan_of(*steps: Step, prefix: str = "/p") -> Plan:
    return Plan(recipe="r", target="t", host="h", prefix=prefix, backend="venv", steps=list(steps))


def patch_step(decision: str | None, pid: str = "p1", kind: str = "replace") -> Step:
    return Step(id=f"patch:{pid}", title=pid, params=P.PatchParams(
        id=pid, component="apex", dest="/p/src/apex", patch_kind=kind, file="setup.py", decision=decision))


def test_expected_state_from_a_real_lockfile_and_plan():
    exp = expected_state(read_lock(RUN / "lock.lock"), load("gpu-a", "plan.json"))
    assert exp.packages["torch"] == "2.11.0" and exp.packages["nvidia-nccl-cu13"] == "2.28.9"
    assert set(exp.git) == {"megatron", "apex"}
    assert exp.sources["apex"].endswith("/src/apex")
    assert exp.patches == {"apex-cuda-check": "apex"}
    assert exp.env == {"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert exp.python == "/opt/envbuild/alpa-megatron/bin/python"


def test_lock_written_by_the_lock_module_is_read(tmp_path):
    from envbuild.lock.schema import Dist, Lock, LockedGit, LockedPackage, Named, PlatformInfo
    from envbuild.lock.serialize import dump_lock

    lock = Lock(recipe=Named(name="r", digest="d"), target=Named(name="t", digest="d"), python="3.11",
                platform=PlatformInfo(python_platform="x86_64-manylinux_2_36", tags=["cp311"]), envbuild_version="0.1.0",
                packages=[LockedPackage(name="Six", version="1.17.0", source="pypi", verified=True,
                                        dist=Dist(kind="wheel", filename="six.whl", url="u", sha256="0" * 64))],
                git=[LockedGit(name="nanogpt", url="u", ref="main", sha="a" * 40, verified=False, reason="x"),
                     LockedGit(name="floating", url="u", ref="main", verified=False)])
    path = tmp_path / "lock.lock"
    path.write_text(dump_lock(lock, "envbuild lock r --target t"))
    data = read_lock(path)
    assert lock_packages(data) == {"six": "1.17.0"}
    assert lock_git(data) == {"nanogpt": "a" * 40}


def test_recorded_state_of_the_sample_run():
    lock, plan = read_lock(RUN / "lock.lock"), load("gpu-b", "plan.json")
    assert compare(lock, plan, Observed.model_validate(load("gpu-a", "observed.json"))) == []
    [d] = compare(lock, plan, Observed.model_validate(load("gpu-b", "observed.json")))
    assert (d.kind, d.subject, d.expected, d.observed, d.host) == ("package-version", "regex", "2024.11.6", "2025.9.1", "gpu-b")


def test_names_are_compared_normalized_and_unplanned_patches_not_required():
    lock = {"packages": {"Typing_Extensions": "4.12.2"}}
    plan = plan_of(patch_step("unchanged", kind="apex-cuda-check"))
    assert compare(lock, plan, Observed(packages={"typing-extensions": "4.12.2"})) == []


def test_extension_gone_since_provision_is_so_hash_changed():
    base = Observed(extensions=[{"path": "/p/amp_C.so", "sha256": "1" * 64}])
    [d] = compare(None, None, Observed(), baseline=base)
    assert (d.kind, d.subject, d.observed) == ("so-hash-changed", "/p/amp_C.so", None)


def test_patch_record_lost_since_provision_is_missing_but_never_recorded_is_not():
    plan = plan_of(patch_step(None))
    base = Observed(patches=[{"id": "p1", "component": "apex", "status": "applied", "diff": "--- a/x\n"}])
    [d] = compare(None, plan, Observed(), baseline=base)
    assert (d.kind, d.subject, d.observed) == ("patch-missing", "p1", "not recorded")
    assert compare(None, plan, Observed(), baseline=Observed()) == []  # tree already had it
    reverted = Observed(patches=[{"id": "p1", "component": "apex", "status": "reverted"}])
    assert [d.kind for d in compare(None, plan, reverted)] == ["patch-missing"]


def test_local_version_label_satisfies_a_plain_pin():
    lock = {"packages": [{"name": "torch", "version": "2.13.0"}, {"name": "cupy", "version": "14.0.0+cu13"}]}
    assert compare(lock, None, Observed(packages={"torch": "2.13.0+cpu", "cupy": "14.0.0+cu13"})) == []
    [d] = compare(lock, None, Observed(packages={"torch": "2.13.0", "cupy": "14.0.0+cu12"}))
    assert (d.kind, d.subject) == ("package-version", "cupy")


def test_env_python_is_the_prefix_not_the_base_interpreter():
    plan = plan_of(Step(id="environment", title="venv", params=P.EnvironmentParams(
        backend="venv", prefix="/opt/env", python="3.11", interpreter="/usr/bin/python3.11")),
        prefix="/opt/env")
    assert expected_state(None, plan).python == "/opt/env/bin/python"
