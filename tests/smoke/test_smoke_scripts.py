"""The smoke scripts run with real CPU torch: GPT tiny preset, 2 gloo ranks, Apex absent."""

import json
import math
import os
import subprocess
import sys

import pytest

from envbuild.smoke import SMOKE_SCRIPTS, local_runner, run_smoke, smoke_command

pytestmark = pytest.mark.torch


def run_script(kind, *args, timeout=240):
    p = subprocess.run([sys.executable, str(SMOKE_SCRIPTS[kind]), *args], capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def gpt_tiny():
    rc, out, err = run_script("gpt", "--preset", "tiny", "--json")
    assert rc == 0, err
    return json.loads(out)


def test_gpt_tiny_numbers_are_sane(gpt_tiny):
    r = gpt_tiny
    assert r["schema"] == "envbuild.smoke/1" and r["kind"] == "gpt" and r["ok"] is True
    assert r["device"] == "cpu" and r["dtype"] == "float32"
    for key in ("tokens_per_s", "tflops", "peak_tflops", "mfu"):
        assert r[key] > 0 and math.isfinite(r[key]), key
    assert len(r["step_times_s"]) == r["config"]["steps"]
    assert r["tokens_per_s"] == pytest.approx(r["tokens_per_step"] / r["step_time_s"]["median"])
    assert r["tflops"] == pytest.approx(r["tokens_per_s"] * r["flops_per_token"] / 1e12)
    assert r["mfu"] == pytest.approx(r["tflops"] / r["peak_tflops"])


def test_gpt_tiny_runs_one_thread_unless_told(gpt_tiny):
    """One thread: on a shared CPU a team of threads waits for members the scheduler took away."""
    assert gpt_tiny["threads"] == 1
    rc, out, _ = run_script("gpt", "--preset", "tiny", "--threads", "2", "--steps", "2", "--warmup", "1", "--json")
    assert rc == 0 and json.loads(out)["threads"] == 2


def test_gpt_tiny_peak_is_sampled_beside_every_timed_step(gpt_tiny):
    # the judged peak is the median of matmul samples taken right after each step (2 per step),
    # not the before/after figures, which are only recorded
    peak = gpt_tiny["peak_matmul"]
    assert peak["samples"] == 2 * gpt_tiny["config"]["steps"]
    assert peak["tflops"] == gpt_tiny["peak_tflops"] == pytest.approx(2.0 * peak["n"] ** 3 / peak["median_s"] / 1e12)
    assert peak["before_tflops"] > 0 and peak["after_tflops"] > 0


def test_gpt_tiny_flops_formula_uses_the_counted_parameters(gpt_tiny):
    c = gpt_tiny["config"]
    assert gpt_tiny["params_matmul"] == gpt_tiny["params"] - c["seq"] * c["hidden"]
    assert gpt_tiny["flops_per_token"] == 6 * gpt_tiny["params_matmul"] + 12 * c["layers"] * c["hidden"] * c["seq"]


def test_gpt_tiny_loss_is_finite_and_falls(gpt_tiny):
    values = gpt_tiny["loss"]["values"]
    assert len(values) == gpt_tiny["config"]["steps"] + gpt_tiny["config"]["warmup"]
    assert all(math.isfinite(v) for v in values)
    assert values[-1] < values[0]


def test_gpt_bad_shape_reports_json_error_not_traceback():
    rc, out, err = run_script("gpt", "--preset", "tiny", "--hidden", "130", "--json")
    r = json.loads(out)
    assert rc == 1 and r["ok"] is False and "divisible" in r["error"]
    assert "Traceback" not in err


def test_collective_two_gloo_ranks_sum_right():
    rc, out, err = run_script("collective", "--device", "cpu", "--nproc", "2", "--json",
                              "--sizes", "4096,1048576", "--iters", "5")
    assert rc == 0, err
    r = json.loads(out)
    assert r["ok"] and r["backend"] == "gloo" and r["world_size"] == 2
    assert [row["bytes"] for row in r["results"]] == [4096, 1048576]
    for row in r["results"]:
        assert row["correct"] and row["algbw_gbps"] > 0
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * (2 - 1) / 2)
    # what ran (the floor's match) and what the sweep cost: every size 1 + warmup + iters times
    assert r["config"] == {"backend": "gloo", "world_size": 2, "min_bytes": 4096, "max_bytes": 1048576, "sizes": 2}
    sweep = r["sweep"]
    assert sweep["bytes_per_rank"] == (4096 + 1048576) * (1 + 5 + 5) and sweep["seconds"] > 0
    assert len(sweep["loadavg_before"]) == 3 and len(sweep["loadavg_after"]) == 3


def test_the_gpu_sweep_reaches_1_gib_doubling_from_1_mib():
    """NCCL's bus bandwidth still climbs past 256 MiB: the GPU sweep goes on to 1 GiB."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("collective", SMOKE_SCRIPTS["collective"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.GPU_SIZES[0] == 1 << 20 and mod.GPU_SIZES[-1] == 1 << 30
    assert all(b == 2 * a for a, b in zip(mod.GPU_SIZES, mod.GPU_SIZES[1:]))


@pytest.mark.parametrize("kind", ["gpt", "collective"])
def test_asked_for_a_gpu_torch_cannot_see_the_script_says_so(kind):
    """A GPU node whose environment's torch sees no GPU fails the smoke, naming it; it does not
    fall back to the CPU (the plan asks for cuda only where the node has GPUs)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    args = ["--preset", "tiny"] if kind == "gpt" else ["--nproc", "2"]
    rc, out, err = run_script(kind, "--device", "cuda", "--json", *args)
    r = json.loads(out)
    assert rc == 1 and r["ok"] is False and "sees no GPU" in r["error"] and "Traceback" not in err


def test_apex_check_skips_clearly_without_apex():
    rc, out, _ = run_script("apex", "--json")
    r = json.loads(out)
    assert rc == 0 and r["status"] == "skipped" and r["ok"] is True
    assert r["reason"].startswith("skipped: apex not installed")
    rc, out, _ = run_script("apex", "--json", "--require")
    assert rc == 1 and json.loads(out)["status"] == "failed"


def test_run_smoke_with_a_runner_collects_results_by_kind():
    seen = []

    def runner(argv):
        seen.append(list(argv))
        return local_runner(argv)

    res = run_smoke(sys.executable, ["apex"], "tiny", runner)
    assert set(res) == {"apex"} and res["apex"]["status"] == "skipped" and res["apex"]["rc"] == 0
    assert seen == [smoke_command(sys.executable, "apex", "tiny")]
    assert smoke_command("/env/bin/python", "gpt", "350m", "/tmp/s") == [
        "/env/bin/python", "/tmp/s/gpt.py", "--json", "--preset", "350m"]


def test_run_smoke_reports_a_script_that_printed_nothing():
    res = run_smoke(sys.executable, ["gpt"], "tiny", lambda argv: (1, "", "ImportError: No module named 'torch'"))
    assert res["gpt"]["ok"] is False and "torch" in res["gpt"]["error"]


def test_a_rendezvous_that_cannot_connect_fails_within_its_timeout_naming_the_address():
    """No silent wait until the smoke's 30-minute limit: a rank whose group cannot form (here a
    TCP store on a port nothing serves) fails within --timeout, saying where it waited."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); import collective; t = time.time()\n"
            "try:\n    collective.worker(1, 2, 'tcp://127.0.0.1:9', 'gloo', 'cpu', [1024], 1, 0, None, 5.0)\n"
            "except RuntimeError as exc:\n    print(round(time.time() - t), exc)\n")
    p = subprocess.run([sys.executable, "-c", code, str(SMOKE_SCRIPTS["collective"].parent)],
                       capture_output=True, text=True, timeout=240)
    took, _, message = p.stdout.strip().partition(" ")
    assert took.isdigit() and int(took) < 60, p.stdout + p.stderr
    assert "could not join the process group at tcp://127.0.0.1:9 within 5 s" in message


def _collective_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("collective", SMOKE_SCRIPTS["collective"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("value, node, seen", [
    (None, 4, 4),            # unset: every GPU of the node
    ("2,3", 4, 2),           # two of the node's four (a 2-GPU job beside another)
    ("", 4, 0),              # empty: none
    (" 1 ", 4, 1),
    ("0,1,2,3,4,5", 4, 4),   # never more than the node has
    ("0,-1,2", 4, 1),        # CUDA stops at the first invalid entry
    ("-1", 2, 0),
    ("GPU-3f1c,GPU-77aa", 4, 2),  # UUIDs count as entries
    ("0,1,", 4, 2),          # a trailing comma ends the list
])
def test_visible_gpus_counts_cuda_visible_devices(value, node, seen):
    assert _collective_module().visible_gpus(node, value) == seen


def test_collective_ranks_follow_the_gpus_this_process_sees():
    """The node's facts say 4 GPUs (nvidia-smi ignores CUDA_VISIBLE_DEVICES); a job given 2 of
    them spawns 2 ranks, not 4, and the record says which. Ranks run on the CPU (gloo): only the
    GPUs are absent here, so the node's count is the one doubled input."""
    for value, world in (("2,3", 2), ("1,2,3", 3)):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": value}
        p = subprocess.run([sys.executable, str(SMOKE_SCRIPTS["collective"]), "--device", "cpu",
                            "--node-gpus", "4", "--json", "--sizes", "4096", "--iters", "2", "--warmup", "1"],
                           capture_output=True, text=True, timeout=240, env=env)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["ok"] and r["world_size"] == world and r["config"]["world_size"] == world
        assert r["gpus_node"] == 4 and r["gpus_visible"] == world and r["cuda_visible_devices"] == value
        assert r["results"][0]["busbw_gbps"] == pytest.approx(
            r["results"][0]["algbw_gbps"] * 2 * (world - 1) / world)


def test_collective_with_no_visible_gpu_fails_naming_why():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, str(SMOKE_SCRIPTS["collective"]), "--device", "cpu",
                        "--node-gpus", "4", "--json"], capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 1
    r = json.loads(p.stdout)
    assert r["ok"] is False and "none of the node's 4 GPUs is visible" in r["error"]
    assert r["gpus_node"] == 4 and r["gpus_visible"] == 0 and r["cuda_visible_devices"] == ""
