"""A benchmark's figures carry the GPU they were measured on, and its measured window; both are
judging data, left out of the recipe digest a lock records (envbuild.catalog.digest)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from envbuild.catalog import digest
from envbuild.recipes import all_recipes, load_recipe
from envbuild.recipes.schema import Benchmark


@pytest.mark.parametrize("recipe", [r.name for r in all_recipes() if r.benchmark], ids=str)
def test_every_shipped_benchmark_declares_its_window(recipe):
    bench = load_recipe(recipe).benchmark
    assert bench.window is not None and bench.window.what.strip()


@pytest.mark.parametrize("recipe", [r.name for r in all_recipes() if r.benchmark], ids=str)
def test_every_published_figure_names_its_gpu_model_and_count(recipe):
    bench = load_recipe(recipe).benchmark
    if bench.published is not None:
        assert bench.published.gpu and bench.published.gpus
    if bench.threshold is not None and bench.threshold_gpu is None:
        # only a same-hardware ratio may hold on any hardware (cpu-reference's MFU)
        assert bench.needs_gpus == 0, f"{recipe}: a GPU benchmark's threshold must name its GPU"


def test_alpa_published_figure_is_a_v100_on_one_gpu():
    for name in ("alpa-megatron", "alpa-megatron-h100"):
        pub = load_recipe(name).benchmark.published
        assert (pub.value, pub.gpu, pub.gpus) == (47.53, "Tesla V100-SXM2-16GB", 1)


def test_opt_threshold_is_eight_a100s():
    bench = load_recipe("opt-175b-azure").benchmark
    assert (bench.threshold_gpu, bench.threshold_gpus) == ("NVIDIA A100-SXM4-80GB", 8)


def test_judging_data_leaves_the_digest_and_the_threshold_does_not():
    recipe = load_recipe("opt-175b-azure")
    bench = recipe.benchmark
    moved = recipe.model_copy(update={"benchmark": bench.model_copy(update={
        "threshold_gpu": "NVIDIA H100 80GB HBM3", "threshold_gpus": 1, "per_gpu": True,
        "window": bench.window.model_copy(update={"warmup": 3}),
        "published": bench.published.model_copy(update={"gpu": "Tesla V100-SXM2-16GB", "gpus": 2})})})
    assert digest(moved) == digest(recipe)
    raised = recipe.model_copy(update={"benchmark": bench.model_copy(update={"threshold": 1.0})})
    assert digest(raised) != digest(recipe)


@pytest.mark.parametrize(("fields", "words"), [
    ({"threshold_gpu": "NVIDIA A100-SXM4-80GB"}, "set threshold too"),
    ({"threshold": 1.0, "threshold_gpus": 8}, "threshold_gpus needs threshold_gpu"),
    ({"published": {"value": 1.0, "source": "x", "gpus": 2}}, "published.gpus needs published.gpu"),
    ({"window": {"warmup": -1, "what": "x"}}, "greater than or equal to 0"),
])
def test_bad_hardware_fields_are_refused(fields, words):
    with pytest.raises(ValidationError, match=words):
        Benchmark.model_validate({"command": "x", "parser": "opt-baselines", "metric": "wps", **fields})
