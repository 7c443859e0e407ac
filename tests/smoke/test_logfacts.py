"""The GPU count and model a log prints (envbuild.smoke.logfacts), read from real recorded runs
in docs/results and the corpus, and what the judge does with them: the log's count is used, a
count given by hand (envbuild parse --gpus) overrides it and the verdict says so; a node's count
only fills in. Also the run boundaries issue 51 found missing (a run killed before its arguments
block, runs with and without srun -l labels in one file, Alpa's patched torch.distributed.run
echo) and DeepSpeed's one overflow at the last step."""

from __future__ import annotations

import re
import time

import pytest

from envbuild.recipes import load_recipe
from envbuild.smoke.completion import completion
from envbuild.smoke.judge import Evidence, judge
from envbuild.smoke.logfacts import COUNTS, LINE_CAP, MODELS, log_gpus, taken
from envbuild.smoke.native import last_run, parse, split_runs
from support.paths import ROOT

RESULTS = ROOT / "docs" / "results"
CORPUS = ROOT / "tests" / "data" / "native_logs" / "corpus"
MDS = (RESULTS / "h200x4-run8" / "mds-run2" / "native.out").read_text()  # DeepSpeed 0.6.3, TP 2 on 2 of 4 H200
OPT = (RESULTS / "h200x4-run8" / "opt-run1" / "native.out").read_text()  # metaseq 4de251ff on 2 H200
ALPA = (RESULTS / "h100x4-run9" / "alpa-run1" / "native.out").read_text()  # the patched .run echo, 2 GPUs


def without(text: str, pattern: str) -> str:
    return "\n".join(line for line in text.splitlines() if not re.search(pattern, line))


def test_each_printed_count_of_a_recorded_run_is_read_in_order():
    """Megatron's arguments block first, then its 'using world size', then DeepSpeed's launcher;
    DeepSpeed's own config print (world_size 1: its data-parallel size) is never read."""
    assert "[config.py:1063:print]   world_size ................... 1" in MDS
    got = log_gpus("megatron-deepspeed", MDS)
    assert (got.count, got.said) == (2, "world_size ... 2") and "87476ced" in got.source
    no_block = without(MDS, r"^  world_size \.")
    got = log_gpus("megatron-deepspeed", no_block)
    assert (got.count, got.said) == (2, "using world size: 2, data-parallel-size:")
    launcher_only = without(no_block, r"^using world size")
    got = log_gpus("megatron-deepspeed", launcher_only)
    assert got.count == 2 and got.said == "dist_world_size=2" and "launch.py:123" in got.source
    assert log_gpus("megatron-deepspeed", without(launcher_only, r"dist_world_size=")) is None


def test_metaseq_prints_its_devices_and_their_model_not_fsdps_world_size():
    assert "world_size=1, flatten_parameters" in OPT  # FSDP's repr in the model print: not the GPU count
    got = log_gpus("opt-baselines", OPT)
    assert (got.count, got.model, got.said) == (2, "NVIDIA H200", "training on 2 devices")
    config_only = without(OPT, r"training on \d+ devices")
    assert log_gpus("opt-baselines", config_only).count == 2  # 'distributed_world_size': 2 in logger.info(cfg)
    assert log_gpus("megatron-deepspeed", OPT) is None  # rows apply to their own setups' output only


def test_alpa_counts_in_every_spelling_it_prints():
    assert log_gpus("alpa-benchmark", ALPA).said == "num_hosts: 1 num_devices_per_host: 2"
    tsv = "e2e\tp3.16\t2\t4\tgpt\tmegatron\t{'tflops': 152.5, 'parameter_count': 1.3}\t1700000000.1\n"
    assert log_gpus("alpa-benchmark", tsv).count == 8
    numpy2 = "exp_name: e2e  instance: p3.16  num_hosts: np.int64(1)  num_devices_per_host: np.int64(4)  x\n"
    assert log_gpus("alpa-benchmark", numpy2).count == 4
    echo = ("python3 -m torch.distributed.run --nproc_per_node 4 --nnodes 2 --node_rank 0 --master_addr h "
            "--master_port 1 benchmark_gpt_one_case.py \"('gpt',)\" megatron_results_e2e\n")
    assert log_gpus("alpa-benchmark", echo).count == 8  # a run killed before its result line
    assert log_gpus("alpa-benchmark", "python3 -m torch.distributed.launch --nproc_per_node 1 x.py\n").count == 1


def test_the_model_nvidia_smi_prints_but_never_its_count():
    """nvidia-smi lists the GPUs the node shows (4 H200 here), not those the run used."""
    node = (RESULTS / "h200x4-run8" / "node.txt").read_text()
    table = (RESULTS / "h200x4-run8" / "mapp-hung" / "stall" / "nvidia-smi.txt").read_text()
    for text in (node, table):
        got = log_gpus("megatronapp", text)
        assert (got.count, got.model) == (None, "NVIDIA H200")
    mixed = node + "GPU 4: NVIDIA H100 80GB HBM3 (UUID: GPU-0455bc8a-5ce1-cd8f-5588-eb467432d44b)\n"
    assert log_gpus("megatronapp", mixed) is None  # two models: none is the run's


def test_rows_are_bounded_and_cite_their_printing_code():
    for row in COUNTS + MODELS:
        assert re.search(r"[0-9a-f]{7}|docs/results/", row.source), row.name
        assert not re.search(r"\)[*+]|\][*+]\)[*+]", row.rx.pattern), row.name  # no nested quantifier
    huge = "x" * (4 * LINE_CAP) + "  world_size " + "." * 38 + " 8\n"
    started = time.perf_counter()
    assert log_gpus("megatron-pretrain", huge * 20) is None  # past the cap: not read
    assert time.perf_counter() - started < 2.0


def test_a_given_count_overrides_and_is_said_a_nodes_count_only_fills_in():
    printed = log_gpus("opt-baselines", OPT)
    given = taken(printed, "NVIDIA H200", 4, override=True)
    assert (given.gpus, given.note) == (4, "the log prints 2 GPUs (training on 2 devices), --gpus says 4: judged as 4")
    node = taken(printed, "NVIDIA H200", 4)  # a node's facts: 4 GPUs on it, the run used 2
    assert (node.gpu, node.gpus, node.note) == ("NVIDIA H200", 2, None)
    assert taken(None, None, 4).gpus == 4 and taken(printed, None, None).gpu == "NVIDIA H200"
    other = taken(printed, "NVIDIA H100 80GB HBM3", None, override=True)
    assert other.gpu == "NVIDIA H100 80GB HBM3" and "prints the GPU model NVIDIA H200" in other.note


def test_the_judge_uses_the_logs_count_where_none_is_given():
    """opt-175b-azure's threshold is a whole 8 x A100 80GB job's: a log printing 'training on 8
    devices' and its workers' A100s is judged against it without --gpu/--gpus."""
    bench = load_recipe("opt-175b-azure").benchmark
    text = (CORPUS / "opt-175b-azure" / "gpus-from-the-log.log").read_text()
    got = judge(Evidence(recipe="opt-175b-azure", benchmark=bench, text=text))
    assert (got.verdict, got.gpus, got.gpu) == ("PASS", 8, "NVIDIA A100-SXM4-80GB")
    node = judge(Evidence(recipe="opt-175b-azure", benchmark=bench, text=text, gpu="NVIDIA A100-SXM4-80GB", gpus=16))
    assert (node.verdict, node.gpus) == ("PASS", 8) and "--gpus" not in node.reason
    hand = judge(Evidence(recipe="opt-175b-azure", benchmark=bench, text=text, gpus=16, override=True))
    assert hand.verdict == "FAIL" and hand.gpus == 16
    assert "the log prints 8 GPUs (training on 8 devices), --gpus says 16: judged as 16" in hand.reason


def test_a_run_killed_before_its_arguments_is_a_run_of_its_own():
    """A completed run, then one that printed only its launch lines (srun's set -x trace, or
    DeepSpeed's launcher): two runs, the second judged, never the first one's figure."""
    for name in ("megatron-deepspeed-slurm/two-runs-second-killed-before-its-arguments.log",
                 "megatron-deepspeed-slurm-h100/two-runs-second-killed-while-launching.log"):
        text = (CORPUS / name).read_text()
        run, runs = last_run("megatron-deepspeed", text)
        assert runs == 2 and "iteration" not in run and "arguments ---" not in run, name
        assert "samples_per_second" not in parse("megatron-deepspeed", text)
    complete = (CORPUS / "megatron-deepspeed-slurm" / "completed.log").read_text()
    assert len(split_runs("megatron-deepspeed", complete)) == 1  # its own srun line comes before its header
    assert len(split_runs("megatron-deepspeed", MDS)) == 1  # runner, launcher, 'using world size', header


def test_a_labelled_run_and_an_unlabelled_one_in_one_file_are_two_runs():
    """srun -l labels only half the file's lines: each run is read with its own labels removed."""
    labelled = (CORPUS / "megatron-deepspeed-slurm" / "completed.log").read_text()
    killed = (CORPUS / "megatron-deepspeed-slurm" / "two-runs-second-killed-at-5.log").read_text()
    second = killed[killed.rindex("0: ------------------------ arguments"):]
    plain = "".join(line.removeprefix("0: ") for line in second.splitlines(keepends=True))
    plain = plain.replace("slurmstepd", "#")
    for text, last in ((labelled + plain, plain), (plain + labelled, labelled)):
        got = parse("megatron-deepspeed", text)
        assert got["runs"] == 2
        assert got["samples_per_second"] == pytest.approx(parse("megatron-deepspeed", last)["samples_per_second"])
        assert completion("megatron-deepspeed", text).runs == 2


def test_alpas_patched_echo_and_torchrun_start_runs():
    run_echo = ALPA.splitlines()[0]
    assert run_echo.startswith("python3 -m torch.distributed.run ")
    crash = "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access\n"
    assert len(split_runs("alpa-benchmark", run_echo + "\n" + crash + ALPA)) == 2
    torchrun = run_echo.replace("python3 -m torch.distributed.run", "torchrun")
    assert len(split_runs("alpa-benchmark", torchrun + "\n" + crash + ALPA)) == 2
    assert completion("alpa-benchmark", run_echo + "\n" + crash + ALPA).complete


def test_one_overflow_at_the_last_step_is_not_divergence_more_is():
    """steps_per_print 1: one skipped step at the end is the loss scaler's hysteresis; skips on
    every step over more than one step to the end are DeepSpeed's trace of divergence."""
    text = (CORPUS / "megatron-deepspeed-slurm" / "overflow-at-the-last-step.log").read_text()
    assert "step=20, skipped=1," in text and "step=19, skipped=0," in text
    assert completion("megatron-deepspeed", text).complete
    two = text.replace("step=19, skipped=0,", "step=19, skipped=1,")
    two = two.replace("step=20, skipped=1,", "step=20, skipped=2,")
    assert completion("megatron-deepspeed", two).state == "diverged"
    assert completion("megatron-deepspeed",
                      (CORPUS / "megatron-deepspeed-slurm" / "diverged-overflow-to-the-end.log").read_text()
                      ).state == "diverged"
