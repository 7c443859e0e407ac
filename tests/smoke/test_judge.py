"""The one judge (envbuild.smoke.judge): a threshold applies only on its GPU model (per GPU when
counts differ, the normalisation said), the verdict words are spelled one way, and a stored
verdict reads back as it was written."""

from __future__ import annotations


import pytest

from envbuild.recipes import load_recipe
from envbuild.smoke.judge import VERDICTS, Evidence, Verdict, floor_verdicts, judge
from support.paths import DATA

LOGS = DATA / "native_logs"
OPT_LOG = (LOGS / "opt-175b-azure" / "opt-baselines-125m.log").read_text()
A100 = "NVIDIA A100-SXM4-80GB"


def opt(gpu: str | None, gpus: int | None, threshold: float | None = None) -> Verdict:
    bench = load_recipe("opt-175b-azure").benchmark
    if threshold is not None:
        bench = bench.model_copy(update={"threshold": threshold})
    return judge(Evidence(recipe="opt-175b-azure", benchmark=bench, text=OPT_LOG, gpu=gpu, gpus=gpus))


@pytest.mark.parametrize("gpu", ["NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-40GB", None])
def test_opts_a100_threshold_does_not_judge_another_gpu(gpu):
    """The 8 x A100 80GB figure neither PASSes an H100 run nor FAILs a V100 one."""
    got = opt(gpu, 8)
    assert got.verdict == "NOT JUDGED" and got.compared is None
    assert "applies only on its GPU" in got.reason and A100 in got.reason


def test_on_its_gpu_the_threshold_judges_and_other_counts_are_compared_per_gpu():
    same = opt(A100, 8)
    assert same.verdict == "PASS" and same.compared.required == 200000 and same.compared.normalisation is None
    half = opt(A100, 4, threshold=600000)  # 75 000 words/s per GPU: 300 000 for 4 GPUs
    assert half.compared.required == pytest.approx(300000) and half.verdict == "FAIL"
    assert half.compared.normalisation.startswith("per GPU: the threshold's 600000 on 8 GPU(s) is 75000 per GPU")
    unknown = opt(A100, None)
    assert unknown.verdict == "NOT JUDGED" and "GPU count is not known" in unknown.reason


def test_a_same_hardware_ratio_holds_on_any_hardware():
    bench = load_recipe("cpu-reference").benchmark
    assert bench.threshold_gpu is None
    record = '{"schema": "envbuild.smoke/1", "kind": "gpt", "ok": true, "mfu": 0.3, "loss": {"last": 2.0}}\n'
    got = judge(Evidence(recipe="cpu-reference", benchmark=bench, text=record, gpu=None))
    assert got.verdict == "PASS" and got.compared.gpu is None and "(any hardware)" in got.reason


def test_one_spelling_of_each_verdict_and_a_stored_verdict_reads_back():
    assert VERDICTS == ("PASS", "NOT JUDGED", "FAIL", "NOTHING FOUND")
    for v in (opt(A100, 8), opt(None, 8), opt(A100, 8, threshold=1e9)):
        assert v.verdict in VERDICTS and Verdict.model_validate(v.to_dict()) == v
    assert (opt(A100, 8).passed, opt(None, 8).passed, opt(A100, 8, threshold=1e9).passed) == (True, None, False)
    empty = judge(Evidence(recipe="opt-175b-azure", benchmark=load_recipe("opt-175b-azure").benchmark, text="", gpu=A100))
    assert empty.verdict == "NOTHING FOUND" and empty.passed is False


def test_the_window_is_the_recipes_and_the_spread_is_given():
    got = opt(A100, 8)
    assert got.window.warmup == load_recipe("opt-175b-azure").benchmark.window.warmup == 1
    assert got.window.n >= 1 and got.window.min <= got.window.median <= got.window.max


def test_floors_are_judged_on_the_median_of_repeats():
    section = {"mfu": 0.5, "thresholds": {"mfu": 0.4, "loss_last": 3.0}, "loss": {"last": 2.5},
               "repeat": {"values": {"mfu": [0.3, 0.35, 0.9]}}}
    assert floor_verdicts(section) == {"mfu": False, "loss_last": True}


def test_the_gpu_count_is_the_one_the_run_printed_not_the_nodes():
    """A run on 2 of a node's 4 GPUs (CUDA_VISIBLE_DEVICES) is a 2-GPU run: metaseq's config line
    (metaseq/cli/train.py:115 logs cfg, distributed_world_size among it) says so, and the judge
    takes it over the node's count, as it does Megatron's world_size."""
    cfg = ("2026-11-26 05:00:00 | INFO | metaseq.cli.train | {'_name': None, 'distributed_training': "
           "{'_name': None, 'distributed_world_size': 2, 'distributed_rank': 0}}\n")
    bench = load_recipe("opt-175b-azure-h100").benchmark
    got = judge(Evidence(recipe="opt-175b-azure-h100", benchmark=bench, text=cfg + OPT_LOG,
                         gpu="NVIDIA H100 80GB HBM3", gpus=4))
    assert got.gpus == 2
    assert judge(Evidence(recipe="opt-175b-azure-h100", benchmark=bench, text=OPT_LOG,
                          gpu="NVIDIA H100 80GB HBM3", gpus=4)).gpus == 4


def test_only_a_named_handled_traceback_is_not_an_error():
    """metaseq's logged S3 handler traceback (its message on the line before, ModuleNotFoundError
    for boto3 last) is dropped before the error scan; the same traceback after another line, or
    ending in another exception, stays an error."""
    from envbuild.smoke.completion import _errors, without_handled_tracebacks

    block = ("Traceback (most recent call last):\n"
             '  File "/x/metaseq/file_io/__init__.py", line 24, in <module>\n'
             "    from .s3 import S3PathHandler  # noqa: E402\n"
             "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
             "ModuleNotFoundError: No module named 'boto3'\n")
    msg = "Failed to register S3PathHandler. Try pip install boto3\n"
    assert without_handled_tracebacks("a\n" + msg + block + "b\n") == "a\n" + msg + "b\n"
    assert _errors(msg + block) == []
    assert _errors(msg + "[rank1] another line\n" + block) == ["a Python traceback"]
    assert _errors(msg + block.replace("No module named 'boto3'", "No module named 'iopath'")) == ["a Python traceback"]
    assert _errors("Some other message\n" + block) == ["a Python traceback"]
    assert _errors(msg + block + "Traceback (most recent call last):\nValueError: x\n") == ["a Python traceback"]
