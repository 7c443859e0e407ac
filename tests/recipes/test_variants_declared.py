"""Every GPU variant of a published setup says what it is a variant of (issue 36).

A shipped recipe locked for the lent GPU node's profile (h100-venv) that is not itself a
published setup is a variant: it names the recipe it moves (``variant_of``), that recipe is a
shipped published setup, and `envbuild check` of that recipe on h100-venv refuses it and names
the variant with the command that checks it. Read from the shipped recipes, so a new variant
that forgets ``variant_of`` fails here.
"""

from __future__ import annotations

import json

import pytest

from envbuild.cli import main
from envbuild.compat.check import preflight
from envbuild.facts.profile import from_target
from envbuild.recipes import all_recipes, load_recipe
from envbuild.targets import load_target

NODE = "h100-venv"


def gpu_variants():
    return [r for r in all_recipes() if NODE in r.targets]


def test_there_are_gpu_variants_to_check():
    names = {r.name for r in gpu_variants()}
    assert {"alpa-megatron-h100", "h100-megatron-deepspeed"} <= names, names


@pytest.mark.parametrize("name", sorted(r.name for r in gpu_variants()))
def test_each_gpu_variant_names_its_published_setup_and_check_of_that_names_it(name, capsys):
    recipe = load_recipe(name)
    assert recipe.variant_of, f"{name} is locked for {NODE} but declares no variant_of"
    original = load_recipe(recipe.variant_of)  # a shipped recipe (InputError otherwise)
    # the original is a published setup: not locked for the node, not itself a variant
    assert NODE not in original.targets and original.variant_of is None, original.name
    target = load_target(NODE)
    verdict = preflight(original, target, from_target(target))
    assert not verdict.feasible
    assert name in {v.recipe for v in verdict.variants}
    assert next(v for v in verdict.variants if v.recipe == name).targets == [NODE]
    rc = main(["check", original.name, "--target", NODE])
    out = capsys.readouterr()
    assert rc == 1
    assert f"envbuild check {name} --target {NODE}" in out.out
    assert f"variant recipe {name}" in out.err or name in out.err
    rc = main(["check", original.name, "--target", NODE, "--json"])
    assert name in {v["recipe"] for v in json.loads(capsys.readouterr().out)["variants"]}
