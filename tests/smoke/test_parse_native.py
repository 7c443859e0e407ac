"""`envbuild parse RECIPE LOGFILE` on output printed by the setups' own code
(tests/data/native_logs/<recipe>/, see its README): the metric, the threshold, the published
figure and the verdict, with exit 0 (PASS), 1 (FAIL), 2 (nothing found) and 5 (NOT JUDGED);
tests/smoke/test_verdict_corpus.py holds every outcome of a run."""

from __future__ import annotations

import json

import pytest
import yaml

from envbuild.cli import main
from envbuild.smoke.parselog import ParseRequest, parse_log
from envbuild.recipes import load_recipe
from envbuild.smoke.native import parse, strip_task_labels
from support.paths import DATA

LOGS = DATA / "native_logs"
CASES = {  # recipe -> (file, metric value printed by the fixture's made-up numbers, verdict as shipped)
    "alpa-megatron": ("alpa-megatron/benchmark_gpt.out", 53.8934, "NOT JUDGED"),
    # on the 8 A100 80GB of OPT's threshold (test_cli_pass_with_threshold_and_published_figure)
    "opt-175b-azure": ("opt-175b-azure/opt-baselines-125m.log", 275524.0, "PASS"),
    # the first 20 of the script's 1000 iterations: a run that stopped early
    "megatron-deepspeed-slurm": ("megatron-deepspeed-slurm/megatron_ds_snmg-4242.out", 838.868, "FAIL"),
    "polaris-megatron-deepspeed": ("polaris-megatron-deepspeed/train-gpt3.log", 0.0841, "NOT JUDGED"),
    "megatronapp": ("megatronapp/trace_pipeline_4_model_chunks_4.txt", 2206.44, "NOT JUDGED"),
}
A100X8 = {"gpu": "NVIDIA A100-SXM4-80GB", "gpus": 8}


@pytest.mark.parametrize("recipe", sorted(CASES))
def test_each_setup_output_gives_its_metric(recipe) -> None:
    path, value, word = CASES[recipe]
    res = parse_log(ParseRequest(recipe=load_recipe(recipe), log=LOGS / path, **A100X8)).verdict
    assert res.verdict == word
    assert res.value == pytest.approx(value, rel=1e-3)


def test_alpa_result_line_and_tsv_agree() -> None:
    printed = parse("alpa-benchmark", (LOGS / "alpa-megatron" / "benchmark_gpt.out").read_text())
    tsv = parse("alpa-benchmark", (LOGS / "alpa-megatron" / "megatron_results_e2e.tsv").read_text())
    assert printed["tflops"] == tsv["tflops"] and printed["parameter_count_b"] == pytest.approx(0.3547, rel=1e-3)
    assert parse("megatron-pretrain", (LOGS / "alpa-megatron" / "benchmark_gpt.out").read_text()).get("tflops") is None


def test_opt_words_per_second_and_the_end_of_epoch_line() -> None:
    m = parse("opt-baselines", (LOGS / "opt-175b-azure" / "opt-baselines-125m.log").read_text())
    assert m["updates_logged"] == 10 and m["num_updates"] == 50
    assert m["wps_summary"] == 275727.0  # progress.print(tag="train") prefixes keys: train_wps


def test_slurm_output_labels_are_removed_and_the_shape_is_read() -> None:
    text = (LOGS / "megatron-deepspeed-slurm" / "megatron_ds_snmg-4242.out").read_text()
    assert "0:  iteration" in text and "+ srun -l" in text  # srun -l labels, set -x traces
    m = parse("megatron-deepspeed", text)
    assert m["iterations_logged"] == 20
    assert m["model"] == {"layers": 8, "hidden": 512, "seq": 1024, "vocab": 50304, "gpus": 8, "recompute": True}
    assert strip_task_labels("0: a\n0: b\n") == "a\nb"
    assert strip_task_labels("10: x\nplain\nplain\nplain\n") == "10: x\nplain\nplain\nplain\n"


def test_polaris_throughput_is_per_the_printed_shape() -> None:
    """GPT25B is 64 layers x 6144 hidden (~29B parameters): the TFLOP/s come from that shape,
    as Megatron prints it, and agree with the TFLOPs its own throughput_calculator printed."""
    m = parse("megatron-deepspeed", (LOGS / "polaris-megatron-deepspeed" / "train-gpt3.log").read_text())
    assert m["model"]["layers"] == 64 and m["model"]["hidden"] == 6144 and m["model"]["gpus"] == 4
    assert m["tflops_per_gpu"] == pytest.approx(m["tflops_printed"], rel=1e-3)
    assert m["tgs"] > 0 and m["samples_per_s"] == pytest.approx(m["samples_per_s_printed"], rel=1e-2)


def test_megatronapp_trace_gives_iteration_times_across_ranks() -> None:
    m = parse("megatronapp", (LOGS / "megatronapp" / "trace_pipeline_4_model_chunks_4.txt").read_text())
    assert m["trace_iterations"] == 20 and m["trace_ranks"] == 4
    assert m["trace_iteration_ms"] == pytest.approx(m["iteration_ms"], rel=1e-2)


def test_cli_pass_with_threshold_and_published_figure(capsys) -> None:
    rc = main(["parse", "opt-175b-azure", str(LOGS / "opt-175b-azure" / "opt-baselines-125m.log"),
               "--gpu", "NVIDIA A100-SXM4-80GB", "--gpus", "8"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "words_per_second = 275524 words/s" in out
    assert "threshold: >= 200000 words/s on 8 x NVIDIA A100-SXM4-80GB" in out
    assert "published: 200000 words/s on 8 x NVIDIA A100-SXM4-80GB" in out and "measured = 137.8 % of it" in out
    assert "verdict: PASS" in out and "(measured on 8 x NVIDIA A100-SXM4-80GB)" in out


def test_published_figure_is_compared_only_on_the_same_gpu_model(tmp_path, capsys) -> None:
    data = load_recipe("alpa-megatron").model_dump(mode="json", by_alias=True)
    assert data["benchmark"]["published"]["gpu"] == "Tesla V100-SXM2-16GB"
    recipe = tmp_path / "alpa-v100.yaml"
    recipe.write_text(yaml.safe_dump(data))
    log = str(LOGS / "alpa-megatron" / "benchmark_gpt.out")
    main(["parse", str(recipe), log, "--gpu", "Tesla V100-SXM2-16GB", "--json"])
    same = json.loads(capsys.readouterr().out)["published"]
    assert same["compared"] and same["percent"] == pytest.approx(113.4, rel=1e-3)
    for other in ("NVIDIA A100-SXM4-80GB", "Tesla V100-PCIE-32GB", None):
        main(["parse", str(recipe), log, "--json", *(["--gpu", other] if other else [])])
        got = json.loads(capsys.readouterr().out)["published"]
        assert got["percent"] is None and not got["compared"], other
    main(["parse", str(recipe), log, "--gpu", "NVIDIA A100-SXM4-80GB"])
    out = capsys.readouterr().out
    assert "% of it" not in out and "different GPU models" in out


def test_cli_json_with_a_published_figure(capsys) -> None:
    rc = main(["parse", "alpa-megatron", str(LOGS / "alpa-megatron" / "megatron_results_e2e.tsv"), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert rc == 5 and res["verdict"] == "NOT JUDGED" and res["threshold"] is None
    assert res["published"]["value"] == 47.53 and res["published"]["percent"] is None  # which GPU: unknown


def test_cli_below_threshold_exits_1(tmp_path, capsys) -> None:
    data = load_recipe("opt-175b-azure").model_dump(mode="json", by_alias=True)
    data["benchmark"]["threshold"] = 300000
    recipe = tmp_path / "opt-strict.yaml"
    recipe.write_text(yaml.safe_dump(data))
    rc = main(["parse", str(recipe), str(LOGS / "opt-175b-azure" / "opt-baselines-125m.log"),
               "--gpu", "NVIDIA A100-SXM4-80GB", "--gpus", "8"])
    assert rc == 1
    assert "verdict: FAIL: words_per_second = 275524 words/s misses the threshold >= 300000" in capsys.readouterr().out


def test_cli_nothing_found_exits_2(capsys) -> None:
    rc = main(["parse", "opt-175b-azure", str(LOGS / "megatronapp" / "trace_pipeline_4_model_chunks_4.txt")])
    out = capsys.readouterr().out
    assert rc == 2 and "verdict: NOTHING FOUND" in out and "metrics found:" in out


def test_cli_unreadable_file_is_bad_input(tmp_path, capsys) -> None:
    assert main(["parse", "opt-175b-azure", str(tmp_path / "absent.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
