"""Every shipped recipe states its expected resource use per experiment (issue 39: artifact
checklists ask for it), each figure with its basis; a measured one names a record that exists;
`show` prints them and `check` holds the memory against the node."""

from __future__ import annotations

import re

import pytest

from envbuild.compat.check import preflight
from envbuild.facts.profile import from_target
from envbuild.recipes import all_recipes, load_recipe
from envbuild.targets import load_target
from support.paths import ROOT



@pytest.mark.parametrize("recipe", all_recipes(), ids=lambda r: r.name)
def test_each_recipe_states_provision_and_its_benchmark(recipe):
    kinds = {r.experiment: r for r in recipe.resources}
    assert "provision" in kinds and kinds["provision"].gpus == 0
    bench = recipe.benchmark
    if bench is not None and bench.needs_gpus:
        assert kinds["benchmark"].gpus == bench.needs_gpus
    for r in recipe.resources:
        for path in re.findall(r"docs/results/[\w./-]+\w", r.source):
            assert (ROOT / path).exists(), f"{recipe.name} {r.experiment}: {path} does not exist"
        if r.basis == "measured":
            assert "docs/results/" in r.source or "envbuild provision" in r.source, r.source


def test_show_prints_each_experiment_with_its_basis(capsys):
    from envbuild.cli import main

    assert main(["show", "h100-megatron-deepspeed"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "benchmark: 1 GPU(s) x 67 GiB, host memory 32 GiB, disk 1 GiB, about 5 min; network: none" in out
    assert "measured: docs/results/h100-offline-run5/native.out: Megatron's max allocated 67,754 MB" in out


def test_check_warns_when_the_node_has_less_gpu_memory_than_the_benchmark_used():
    """h100-megatron-deepspeed's benchmark used 67 GiB per GPU; on a 40 GB A100 node (Polaris's
    profile) preflight says so, as a warning beside its verdict."""
    recipe, polaris = load_recipe("h100-megatron-deepspeed"), load_target("polaris")
    target = load_target("h100-venv")
    facts = from_target(polaris)
    v = preflight(recipe, target, facts)
    (warn,) = [w for w in v.warnings if w.rule == "resources-exceed-node"]
    assert "benchmark: 67 GiB per GPU expected, 40 GiB on" in warn.message
