"""The smoke role's runs and the smoke.json read back from them (pure, plus real script output)."""

from __future__ import annotations

import sys

import pytest

from envbuild.recipes import load_recipe
from envbuild.smoke import SMOKE_SCRIPTS, local_runner
from envbuild.plan.smoke import native_run, node_runs
from envbuild.smoke.onnode import collect_node
from support.paths import ROOT


def bench(name: str) -> dict:
    return load_recipe(name).benchmark.model_dump(mode="json")


def model(name: str):
    return load_recipe(name).benchmark


def test_each_script_gets_its_own_flags():
    runs = node_runs("/opt/env", {"kinds": ["gpt", "collective", "apex"], "preset": "350m"})
    argv = {r["name"]: r["argv"] for r in runs}
    assert argv["gpt"] == ["/opt/env/bin/python", "/opt/env/.envbuild/smoke/gpt.py", "--json", "--preset", "350m"]
    assert "--preset" not in argv["collective"]  # collective.py has no --preset
    assert argv["apex"][-1] == "--require"  # the recipe builds Apex: its absence is a failure
    assert [r["script"] for r in runs] == ["gpt.py", "collective.py", "apex_check.py"]
    tiny = node_runs("/opt/env", {"kinds": ["collective"], "preset": "tiny"})
    assert tiny[0]["argv"][2:] == ["--json", "--device", "cpu", "--nproc", "2"]


def test_the_smoke_uses_every_gpu_of_the_node_and_the_cpu_without_one():
    """A GPU node: gpt trains on a GPU, collective is NCCL with one rank per GPU (2, 8...); a
    node without GPUs, or a plan whose torch is the CPU build, keeps the CPU path (2 gloo ranks)."""
    kinds = {"kinds": ["gpt", "collective"], "preset": "tiny"}
    for gpus in (1, 2, 8):
        argv = {r["name"]: r["argv"][2:] for r in node_runs("/e", kinds, gpus=gpus, torch="cu121")}
        assert argv["gpt"] == ["--json", "--preset", "tiny", "--device", "cuda"]
        assert argv["collective"] == ["--json", "--device", "cuda", "--node-gpus", str(gpus)]
    on_node = {r["name"]: r["argv"][2:] for r in node_runs("/e", {**kinds, "preset": "350m"}, gpus=2)}
    assert on_node["gpt"][-2:] == ["--device", "cuda"] and on_node["collective"][-1] == "2"
    for cpu in (node_runs("/e", kinds, gpus=0), node_runs("/e", kinds, gpus=2, torch="cpu"),
                node_runs("/e", {**kinds, "preset": "350m"}, gpus=0)):
        argv = {r["name"]: r["argv"][2:] for r in cpu}
        assert "cuda" not in argv["gpt"]
        assert argv["collective"] == ["--json", "--device", "cpu", "--nproc", "2"]


def test_native_benchmark_runs_only_where_it_can():
    assert native_run(bench("cpu-reference"), gpus=0, sources={}, cwd="/x") == {"skip": "measured by the gpt smoke"}
    # a program of the recipe's own that prints the smoke's record runs: it is not the gpt smoke
    own = {**bench("cpu-reference"), "command": "python tally.py --json"}
    assert native_run(own, gpus=0, sources={}, cwd="/x")["argv"][-1].endswith("python tally.py --json")
    alpa = bench("alpa-megatron")
    assert native_run(alpa, gpus=0, sources={"alpa": "/e/src/alpa"}, cwd="/x")["skip"].startswith("needs 1 GPUs")
    assert "alpa" in native_run(alpa, gpus=1, sources={}, cwd="/x")["skip"]
    run = native_run(alpa, gpus=1, sources={"alpa": "/e/src/alpa"}, cwd="/x")
    assert run["cwd"] == "/e/src/alpa/osdi22_artifact/megatron"
    assert run["env"] == {"PYTHONPATH": "/e/src/alpa"} and run["argv"][:2] == ["bash", "-c"]
    # deviation efs-cluster-driver: the script's single-node branch, no ips file, no ssh, no ~/efs
    assert run["argv"][-1].startswith("python benchmark_gpt.py ") and "run_megatron_benchmark" not in run["argv"][-1]
    runs = node_runs("/e", {"kinds": ["gpt"], "preset": "350m"}, alpa, gpus=1, sources={"alpa": "/e/src/alpa"})
    assert [r["name"] for r in runs] == ["gpt", "native"]


def _fetched(folder, name, rc, out, err=""):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.out").write_text(out)
    (folder / f"{name}.err").write_text(err)
    (folder / f"{name}.rc").write_text(f"{rc}\n")


@pytest.mark.integration
def test_smoke_json_from_real_gpt_output_has_the_native_section(tmp_path):
    rc, out, err = local_runner([sys.executable, str(SMOKE_SCRIPTS["gpt"]), "--preset", "tiny", "--json"])
    assert rc == 0, err
    _fetched(tmp_path, "gpt", rc, out, err)
    smoke = collect_node(tmp_path, ["gpt"], "cpu-reference", model("cpu-reference"))
    assert smoke["gpt"]["ok"] is True and smoke["gpt"]["tokens_per_s"] > 0
    native = smoke["native"]
    assert native["ran"] and native["parser"] == "envbuild-smoke"
    assert native["metrics"]["tokens_per_second"] == smoke["gpt"]["tokens_per_s"]
    # completed (the smoke record says ok, its loss finite) and judged by cpu-reference's floor:
    # MFU of the matmul peak the same script measured
    verdict = native["verdict"]
    assert (verdict["metric"], verdict["compared"]["value"], verdict["value"]) == ("mfu", 0.10, smoke["gpt"]["mfu"])
    assert verdict["compared"]["gpu"] is None  # a same-hardware ratio: it holds on any hardware
    assert verdict["verdict"] == ("PASS" if smoke["gpt"]["mfu"] >= 0.10 else "FAIL")
    assert verdict["completion"]["state"] == "complete"


def collect_node_with(folder, native_log: str, recipe: str) -> dict:
    _fetched(folder, "native", 0, native_log)
    return collect_node(folder, ["native"], recipe, model(recipe))


def test_failed_script_and_native_log_parsed_from_fetched_files(tmp_path):
    _fetched(tmp_path, "gpt", 1, "", "Traceback ...\nModuleNotFoundError: No module named 'torch'\n")
    smoke = collect_node(tmp_path, ["gpt", "collective"], "cpu-reference", model("cpu-reference"))
    assert smoke["gpt"]["ok"] is False and "No module named 'torch'" in smoke["gpt"]["error"]
    assert "collective" not in smoke  # never fetched: nothing claimed
    assert smoke["native"]["verdict"]["verdict"] in ("FAIL", "NOTHING FOUND")
    log = (" iteration        2/       3 | elapsed time per iteration (ms): 900.0 | global batch size:    16 |\n"
           " iteration        3/       3 | elapsed time per iteration (ms): 800.0 | global batch size:    16 |\n")
    _fetched(tmp_path, "native", 0, log)
    smoke = collect_node(tmp_path, ["native"], "megatronapp", model("megatronapp"))
    assert smoke["native"]["metrics"]["iteration_time_ms"] == 800.0
    assert smoke["native"]["verdict"]["verdict"] == "NOT JUDGED"  # iteration 3 of 3; no threshold
    cut = collect_node_with(tmp_path, log.splitlines(keepends=True)[0], "megatronapp")
    # its one iteration line is the warm-up: nothing measured, and the reason says it stopped early
    assert cut["native"]["verdict"]["verdict"] == "NOTHING FOUND" and "2 of 3" in cut["native"]["verdict"]["reason"]
    skipped = collect_node(tmp_path, ["gpt"], "megatronapp", model("megatronapp"), skip="needs 4 GPUs, the node has 0")
    assert skipped["native"] == {"parser": "megatronapp", "metric": "iteration_time_ms", "unit": "ms per iteration",
                                 "ran": False, "reason": "needs 4 GPUs, the node has 0"}


@pytest.mark.integration
def test_smoke_record_says_which_of_the_nodes_gpus_the_collective_saw(tmp_path):
    """A real collective run (gloo ranks; the node's 4 GPUs are the facts' count, the one absent
    input) given CUDA_VISIBLE_DEVICES=2,3 is read back into a valid smoke record that says 2 of 4."""
    import os
    import subprocess

    from envbuild.record.smoke import SmokeRecord

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "2,3"}
    p = subprocess.run([sys.executable, str(SMOKE_SCRIPTS["collective"]), "--json", "--device", "cpu",
                        "--node-gpus", "4", "--sizes", "4096", "--iters", "2", "--warmup", "1"],
                       capture_output=True, text=True, timeout=240, env=env)
    _fetched(tmp_path, "collective", p.returncode, p.stdout, p.stderr)
    smoke = collect_node(tmp_path, ["collective"], "cpu-reference", None)
    got = SmokeRecord.model_validate(smoke).collective
    assert got.ok and got.world_size == 2, (got.error, p.stderr[-2000:])
    assert (got.gpus_visible, got.gpus_node, got.cuda_visible_devices) == (2, 4, "2,3")


@pytest.mark.process
def test_a_bounded_benchmark_that_hangs_ends_with_its_output_captured(tmp_path):
    """megatronapp-h100's first 4-GPU run (4 x H200) hung inside iteration 1 and ran until it was
    killed by hand (docs/results/megatronapp-h100.md). Its benchmark's ``timeout_s`` bounds the
    command inside the capture: the run is cut, fails with 124, and the trace written so far is
    still printed for the parser."""
    import subprocess

    recipe = load_recipe("megatronapp-h100")
    output = recipe.output_of(None)
    shipped = native_run(bench("megatronapp-h100"), gpus=4, sources={"megatronapp": "/e/src/m"}, cwd="/x",
                         output=output)
    assert recipe.benchmark.timeout_s == 900
    assert "timeout -k 60 900 bash -c 'bash run_single.sh --pipeline_parallel 4" in shipped["argv"][-1]
    assert shipped["timeout"] > recipe.benchmark.timeout_s  # the step's own bound comes after
    hang = {**bench("megatronapp-h100"), "cwd": str(tmp_path), "timeout_s": 1,
            "command": f"echo 'rank 0 iteration starts' > {output.file}; sleep 600"}
    run = native_run(hang, gpus=4, sources={}, cwd="/x", output=output)
    done = subprocess.run(run["argv"], cwd=run["cwd"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 124
    assert done.stdout.splitlines()[-1] == "rank 0 iteration starts"
    unbounded = native_run({**hang, "timeout_s": None}, gpus=4, sources={}, cwd="/x", output=output)
    assert "timeout -k" not in unbounded["argv"][-1]


def test_a_log_without_a_gpu_count_is_judged_for_the_gpus_the_collective_smoke_saw(tmp_path):
    """nanogpt-h100's bench.py prints no GPU count. Recorded on a 2-GPU H200 node with
    CUDA_VISIBLE_DEVICES=1 (docs/results/h200x2-run12/nano-run1), the run is judged as the 1 GPU
    its collective smoke saw, against the 1 x H200 reference; without the collective's record it
    would be judged as the node's 2 GPUs, for which no reference exists."""

    run = ROOT / "docs" / "results" / "h200x2-run12" / "nano-run1"
    for name in ("native.out", "native.err", "native.rc", "collective.out"):
        (tmp_path / name).write_bytes((run / name).read_bytes())
    (tmp_path / "collective.rc").write_text("0\n")
    seen = collect_node(tmp_path, ["collective", "native"], "nanogpt-h100", model("nanogpt-h100"),
                        gpu="NVIDIA H200", gpus=2)
    assert seen["collective"]["gpus_visible"] == 1
    verdict = seen["native"]["verdict"]
    assert (verdict["gpus"], verdict["verdict"]) == (1, "PASS"), verdict["reason"]
    for name in ("collective.out", "collective.rc"):
        (tmp_path / name).unlink()
    alone = collect_node(tmp_path, ["native"], "nanogpt-h100", model("nanogpt-h100"), gpu="NVIDIA H200", gpus=2)
    assert (alone["native"]["verdict"]["gpus"], alone["native"]["verdict"]["verdict"]) == (2, "NOT JUDGED")
