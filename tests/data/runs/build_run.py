"""Rebuild the sample run directory used by the report golden tests.

    python tests/data/runs/build_run.py

The run: recipe alpa-megatron on two H100 nodes (facts shaped like the captured node in
tests/fixtures/nodes/h100-ubuntu2404-cuda13). gpu-a is clean; gpu-b has a package that moved
and a native benchmark over its threshold, so the verdict is FAIL with two reasons. The
benchmark numbers (and the recipe's "published" figure) are illustrative inputs for the
renderer, not measurements; gpu-b's gpt smoke was repeated 3 times (a spread).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

RUN_ID = "20261122-073000-alpa-megatron-h100-ubuntu2404"
HERE = Path(__file__).parent
MEGATRON_SHA = "c28bbd208d16ffea61fa3c545e66b3a9d87f9d84"
APEX_SHA = "265b451de8ba9bfcb67edc7360f3d8772d0a8bea"
PREFIX = "/opt/envbuild/alpa-megatron"
PACKAGES = {"torch": "2.11.0", "nvidia-nccl-cu13": "2.28.9", "six": "1.17.0", "regex": "2024.11.6",
            "pybind11": "2.13.6", "ninja": "1.11.1.4"}
APEX_DIFF = """--- a/setup.py
+++ b/setup.py
@@ -38,6 +38,7 @@
     if bare_metal_version != torch_binary_version:
-        raise RuntimeError("CUDA mismatch")
+        # envbuild apex-cuda-check: nvcc 13.0 and torch cu130 share a major version
+        print("envbuild: accepted CUDA minor mismatch")
"""


def dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def facts(host: str) -> dict:
    return {"schema": "envbuild.facts/1", "host": host, "origin": "collected", "collected_at": "2026-11-22T07:29:10Z",
            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "memory_mib": 81559,
                      "uuid": None, "pci_bus_id": "00000000:00:06.0"}],
            "driver_version": "580.159.04", "driver_cuda": "13.0", "nvcc": "13.0", "nvcc_path": "/usr/local/cuda/bin/nvcc",
            "cuda_home": "/usr/local/cuda", "os_id": "ubuntu", "os_version": "24.04", "os_pretty": "Ubuntu 24.04.3 LTS",
            "glibc": "2.39", "arch": "x86_64", "cpu_cores": 16, "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
            "memory_gib": 125.7, "pythons": [{"path": "/usr/bin/python3.12", "version": "3.12.3"}], "pip_packages": {},
            "conda": [], "modules": [], "infiniband": [], "nccl_version": "2.28.9", "container_engines": {},
            "topology": None, "missing": {}}


def plan(host: str) -> dict:
    """The node's plan, built from the plan model's typed step params (the shapes the planner
    writes: a plan.json that does not validate as ``envbuild.plan.model.Plan`` fails here)."""
    from envbuild.plan import params as P
    from envbuild.plan.model import Decision, Plan, Step

    steps = [
        Step(id="preflight", title="check the node", params=P.PreflightParams(feasible=True, summary="feasible")),
        Step(id="environment", title="create venv", params=P.EnvironmentParams(
            backend="venv", prefix=PREFIX, python="3.12", interpreter="/usr/bin/python3.12")),
        Step(id="pip:packages", title="install locked packages", params=P.PipInstallParams(
            requirements=[P.Requirement(name=k, version=v, requirement=f"{k}=={v}") for k, v in PACKAGES.items()],
            unverified=list(PACKAGES))),
        Step(id="git:megatron", title="Megatron-LM at the Alpa benchmark commit", params=P.GitSourceParams(
            name="megatron", url="https://github.com/zhisbug/Megatron-LM", fetch_url="https://github.com/zhisbug/Megatron-LM",
            ref="main", sha=MEGATRON_SHA, dest=f"{PREFIX}/src/megatron")),
        Step(id="git:apex", title="Apex", params=P.GitSourceParams(
            name="apex", url="https://github.com/NVIDIA/apex", fetch_url="https://github.com/NVIDIA/apex",
            ref="master", sha=APEX_SHA, dest=f"{PREFIX}/src/apex")),
        Step(id="patch:apex-cuda-check", title="relax Apex CUDA check", params=P.PatchParams(
            id="apex-cuda-check", component="apex", dest=f"{PREFIX}/src/apex", patch_kind="apex-cuda-check",
            file="setup.py", decision="patched", nvcc="13.0", torch_cuda="13.0",
            why="Apex refuses any CUDA mismatch between nvcc and torch"),
            reason="patched: nvcc 13.0 and torch cu130 have the same major version"),
        Step(id="env-file", title="write env.sh", params=P.EnvFileParams(
            path=f"{PREFIX}/.envbuild/env.sh", vars={"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"})),
    ]
    model = Plan(recipe="alpa-megatron", target="h100-ubuntu2404", host=host, prefix=PREFIX, backend="venv",
                 facts_origin="collected", steps=steps,
                 decisions=[Decision(subject="patch:apex-cuda-check", outcome="patched",
                                     reason="nvcc 13.0 and torch cu130 have the same major version")])
    return json.loads(model.to_json())


def observed(host: str, packages: dict) -> dict:
    return {"schema": "envbuild.observed/1", "host": host, "prefix": PREFIX, "python": "3.12.3",
            "python_path": f"{PREFIX}/bin/python", "packages": dict(sorted(packages.items())),
            "git": {"apex": APEX_SHA, "megatron": MEGATRON_SHA},
            "patches": [{"id": "apex-cuda-check", "component": "apex", "status": "applied", "diff": APEX_DIFF,
                         "reason": "nvcc 13.0 and torch cu130 have the same major version"}],
            "extensions": [{"path": f"{PREFIX}/lib/python3.12/site-packages/amp_C.cpython-312-x86_64-linux-gnu.so",
                            "sha256": "5f0c7c2d9b1e4a6f8d3b2a1c0e9f8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f10"}],
            "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_DEBUG": "WARN"},
            "env_file": f"{PREFIX}/.envbuild/env.sh", "process_env": {}}


def smoke(iter_ms: float, repeat: bool = False) -> dict:
    gpt = {"schema": "envbuild.smoke/1", "kind": "gpt", "ok": True, "tokens_per_s": 183000.0,
           "tflops": 301.5, "peak_tflops": 702.0, "mfu": 0.4295}
    if repeat:  # envbuild smoke --repeat 3: the median as the value, every run's numbers
        gpt["repeat"] = {"n": 3, "values": {"tokens_per_s": [179500.0, 183000.0, 184200.0],
                                            "tflops": [295.7, 301.5, 303.5], "mfu": [0.4212, 0.4295, 0.4323]}}
    return {"gpt": gpt,
            "collective": {"schema": "envbuild.smoke/1", "kind": "collective", "ok": True, "world_size": 2,
                           "max_busbw_gbps": 21.3, "max_algbw_gbps": 42.6},
            "apex": {"schema": "envbuild.smoke/1", "kind": "apex", "ok": True},
            "native": {"schema": "envbuild.smoke/1", "kind": "native", "metrics": {"elapsed_time_per_iteration_ms": iter_ms}}}


def main() -> None:
    run = HERE / RUN_ID
    shutil.rmtree(run, ignore_errors=True)
    hosts = ["gpu-a", "gpu-b"]
    dump(run / "run.json", {"schema": "envbuild.run/1", "run_id": RUN_ID, "recipe": "alpa-megatron",
                            "target": "h100-ubuntu2404", "envbuild_version": "0.1.0",
                            "argv": ["envbuild", "provision", "alpa-megatron", "--target", "h100-ubuntu2404"],
                            "started": "2026-11-22T07:30:00Z", "finished": "2026-11-22T07:52:41Z", "status": "ok",
                            "lock_path": "lock.lock",
                            "lock_digest": "9b1d6c1f0a2e7d3c5b4a69788f7e6d5c4b3a2918f7e6d5c4b3a29180f7e6d5c4",
                            "hosts": hosts, "options": {"jobs": 2}})
    dump(run / "recipe.json", {
        "schema": 1, "name": "alpa-megatron", "title": "Alpa OSDI'22 Megatron-LM baseline",
        "description": "Megatron-LM at the Alpa benchmark branch with Apex.",
        "published": {"url": "https://github.com/alpa-projects/alpa/tree/main/benchmark/megatron"},
        "python": "3.12", "targets": ["h100-ubuntu2404"],
        "deviations": [{"id": "apex-unpinned", "published": "git clone NVIDIA/apex at whatever master is",
                        "problem": "master moves and drops build flags the benchmark relies on",
                        "instead": f"pin Apex {APEX_SHA[:12]} and record its SHA in the lock", "source": None},
                       {"id": "megatron-pythonpath", "published": "export PYTHONPATH=~/efs/Megatron-LM",
                        "problem": "a shell variable is lost outside the login shell",
                        "instead": "a .pth file in the venv points at the pinned tree", "source": None}],
        "benchmark": {"command": "bash benchmark/megatron/run.sh", "parser": "megatron_log",
                      "metric": "elapsed_time_per_iteration_ms", "threshold": 900.0, "unit": "ms",
                      "higher_is_better": False, "env": {}, "needs_gpus": 1, "why": "Alpa's GPT-1.3B setting",
                      "published": {"value": 850.0, "source": "illustrative figure for the report tests",
                                    "gpu": "NVIDIA H100 80GB HBM3"}}})
    lock = ["# DO NOT EDIT: generated by envbuild; edit the recipe and regenerate with:",
            "#   envbuild lock alpa-megatron --target h100-ubuntu2404", "schema: envbuild.lock/1",
            "recipe: {name: alpa-megatron, digest: 0c1d}", "target: {name: h100-ubuntu2404, digest: 7e2f}",
            "python: '3.12'", "platform: {python_platform: x86_64-manylinux_2_39, tags: [cp312, manylinux_2_39_x86_64]}",
            "envbuild_version: 0.1.0", "packages:"]
    for name, version in PACKAGES.items():
        lock += [f"  - name: {name}", f"    version: {version}", "    source: pypi", "    verified: true"]
    lock += ["git:", "  - name: megatron", "    url: https://github.com/zhisbug/Megatron-LM",
             "    ref: alpa-osdi22-benchmark", f"    sha: {MEGATRON_SHA}", "    verified: true",
             "  - name: apex", "    url: https://github.com/NVIDIA/apex", "    ref: master", f"    sha: {APEX_SHA}",
             "    verified: true"]
    (run / "lock.lock").write_text("\n".join(lock) + "\n")
    (run / "events.jsonl").write_text("".join(json.dumps({"ts": "2026-11-22T07:30:01Z", "host": h, "step": "preflight",
                                                         "kind": "ok", "msg": "feasible"}) + "\n" for h in hosts))
    for host, iter_ms, regex in (("gpu-a", 812.4, PACKAGES["regex"]), ("gpu-b", 1032.7, "2025.9.1")):
        node = run / "nodes" / host
        dump(node / "facts.json", facts(host))
        dump(node / "preflight.json", {"verdict": "feasible", "feasible": True, "violations": []})
        dump(node / "plan.json", plan(host))
        (node / "log.txt").write_text("preflight ok\n")
        dump(node / "result.json", {"status": "ok", "failed_step": None, "command": None, "rc": 0,
                                    "log_tail": "", "changed": [s["id"] for s in plan(host)["steps"]], "skipped": [],
                                    "duration_s": 1361.0})
        dump(node / "observed.json", observed(host, {**PACKAGES, "regex": regex, "pip": "24.0"}))
        dump(node / "smoke.json", smoke(iter_ms, repeat=host == "gpu-b"))


if __name__ == "__main__":
    main()
