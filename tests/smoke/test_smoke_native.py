"""Native benchmark log parsers on excerpts in each tool's real format (tests/data/native_logs)."""


import pytest

from envbuild.errors import InputError
from envbuild.smoke import NATIVE_PARSERS
from envbuild.smoke.native import iteration_lines, megatron_model_flops, parse
from support.paths import DATA

LOGS = DATA / "native_logs"


def log(name: str) -> str:
    return (LOGS / name).read_text()


def test_every_recipe_parser_is_registered():
    assert set(NATIVE_PARSERS) == {"opt-baselines", "megatron-pretrain", "megatron-deepspeed",
                                   "megatronapp", "alpa-benchmark", "envbuild-smoke"}


def test_opt_baselines_drops_warmup_and_zero_wps_and_averages():
    m = parse("opt-baselines", log("opt_baselines_125m.log"))
    assert m["updates_logged"] == 6 and m["updates_used"] == 5
    assert m["wps"] == pytest.approx((201843 + 241097 + 243310 + 242764 + 244018) / 5)
    assert m["words_per_second"] == m["wps"]
    assert m["num_updates"] == 25 and m["wps_summary"] == 238113
    assert m["loss_last"] < m["loss_first"]


def test_megatron_pretrain_samples_and_tflops_from_printed_arguments():
    m = parse("megatron-pretrain", log("megatron_pretrain_alpa.log"))
    assert m["iterations_used"] == 4  # iteration 1 (4120 ms) excluded
    times = [402.5, 398.1, 401.4, 398.0]
    assert m["iteration_time_ms"] == pytest.approx(sum(times) / 4)
    assert m["samples_per_second"] == pytest.approx(sum(8 / (t / 1000) for t in times) / 4)
    assert m["model"] == {"layers": 24, "hidden": 1024, "seq": 1024, "vocab": 50304, "gpus": 1,
                          "recompute": False}
    expected = megatron_model_flops(8, 1024, 24, 1024, 50304) / (m["iteration_ms"] / 1000) / 1e12
    assert m["tflops"] == pytest.approx(expected)


def test_megatron_shape_options_override_the_log():
    m = parse("megatron-pretrain", log("megatron_pretrain_alpa.log"), gpus=2, recompute=True)
    base = parse("megatron-pretrain", log("megatron_pretrain_alpa.log"))
    assert m["tflops"] == pytest.approx(base["tflops"] * 96 / 72 / 2)


def test_model_flops_formula_matches_6n_for_large_hidden():
    # 72*B*s*l*h^2 is 6 * (12*l*h^2 params) * tokens: the same model FLOPs gpt.py counts
    assert megatron_model_flops(1, 1, 1, 4096, 0) == pytest.approx(6 * 12 * 4096 ** 2 * (1 + 1 / (6 * 4096)))


def test_megatron_deepspeed_printed_metrics_and_ds_timer():
    m = parse("megatron-deepspeed", log("megatron_deepspeed_slurm.log"))
    assert m["iterations_used"] == 3
    assert m["samples_per_s_printed"] == pytest.approx((97.501 + 97.904 + 97.852) / 3)
    assert m["tflops"] == pytest.approx((4.41 + 4.43 + 4.43) / 3)
    assert m["tgs"] == pytest.approx((12480.128 + 12531.712 + 12525.056) / 3)
    assert m["ds_samples_per_s"] == pytest.approx((97.52 + 97.90 + 97.85) / 3)
    # computed and printed samples/s agree
    assert m["samples_per_second"] == pytest.approx(m["samples_per_s_printed"], rel=1e-3)


def test_megatronapp_torchrun_prefixed_lines_and_recompute():
    m = parse("megatronapp", log("megatronapp_core_v040.log"))
    assert [r["iteration"] for r in iteration_lines(log("megatronapp_core_v040.log"))] == [1, 2, 3, 4]
    assert m["iteration_time_ms"] == pytest.approx((6512.4 + 6498.0 + 6501.6) / 3)
    assert m["model"]["recompute"] is True and m["model"]["gpus"] == 4


def test_envbuild_smoke_json_from_the_h100():
    m = parse("envbuild-smoke", log("envbuild_smoke_h100.log"))
    assert m["kind"] == "gpt" and m["ok"] is True
    assert 0 < m["mfu"] < 1 and m["tokens_per_second"] == m["tokens_per_s"] > 0
    assert m["tflops"] == pytest.approx(m["mfu"] * m["peak_tflops"])


def test_empty_and_unrelated_text_give_no_metrics():
    for name in NATIVE_PARSERS:
        m = parse(name, "nothing to see\n[INFO] starting\n")
        assert not any(k in m for k in ("tokens_per_s", "wps", "samples_per_s", "tflops_per_gpu", "iteration_ms"))


def test_unknown_parser_is_an_input_error():
    with pytest.raises(InputError) as exc:
        parse("fairseq", "")
    assert "megatron-pretrain" in exc.value.hint
