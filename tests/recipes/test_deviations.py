"""A deviation is a claim about what envbuild does, so every deviation of every shipped recipe
names the code that carries it out (``handled_by``: imported here) and the tests that fail
when that behaviour goes (``test``: collected here by pytest itself), or says ``status: open``
(not handled yet), which the report shows as open."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from envbuild.catalog import digest
from envbuild.recipes import all_recipes
from envbuild.recipes.schema import Deviation, deviation_state
from support.paths import ROOT

RECIPES = list(all_recipes())  # every shipped recipe, ported ones (gpt-neox-sm90...) included
DEVIATIONS = [(r.name, d) for r in RECIPES for d in r.deviations]


@pytest.mark.parametrize("recipe,dev", DEVIATIONS, ids=[f"{r}:{d.id}" for r, d in DEVIATIONS])
def test_every_deviation_is_handled_or_open(recipe: str, dev: Deviation) -> None:
    assert dev.state in ("handled", "open"), (
        f"{recipe}: deviation {dev.id} claims {dev.instead!r} but names no code and test "
        "(handled_by + test) and is not status: open")
    if dev.state == "open":
        assert "not handled yet" in dev.instead.lower(), f"{recipe}:{dev.id}: an open deviation says so"


def _resolve(ref: str) -> object:
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("ref", sorted({ref for _, d in DEVIATIONS for ref in d.handled_by if not ref.startswith("patch:")}))
def test_named_code_exists(ref: str) -> None:
    assert _resolve(ref) is not None


@pytest.mark.process
def test_named_tests_are_collected() -> None:
    """pytest itself collects every named test, of a deviation or an erratum (a renamed or
    deleted test fails here)."""
    wanted = sorted({t for _, d in DEVIATIONS for t in d.test} | {t for r in RECIPES for e in r.errata for t in e.test})
    assert wanted
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *wanted], cwd=ROOT, capture_output=True, text=True, timeout=600)
    collected = {line.strip() for line in proc.stdout.splitlines() if "::" in line}
    missing = [t for t in wanted if t not in collected
               and not any(c.startswith(t + "[") for c in collected)]
    assert not missing, f"named tests that pytest does not collect: {missing}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"


def test_each_recipe_has_the_deviations_the_issue_names() -> None:
    by = {r.name: {d.id: d for d in r.deviations} for r in RECIPES}
    assert by["opt-175b-azure"]["fairscale-version-string-compare"].state == "handled"
    assert by["megatronapp"]["master-addr-hard-coded"].state == "handled"
    # the dependency closure of source installs (envbuild.lock.srclock) carries these out
    assert by["polaris-megatron-deepspeed"]["ezpz-git-deps"].state == "handled"
    assert by["opt-175b-azure"]["requirements-txt-conflicts"].state == "handled"
    assert by["opt-175b-azure"]["sklearn-brownout"].state == "handled"
    assert by["megatron-deepspeed-slurm"]["legacy-vocab-urls"].state == "handled"
    assert by["megatron-deepspeed-slurm"]["pyxis-local-image"].state == "handled"


def test_state_rules() -> None:
    base = {"id": "x", "published": "p", "problem": "q", "instead": "i"}
    assert Deviation(**base).state == "unverified"
    assert Deviation(**base, status="open").state == "open"
    assert Deviation(**base, handled_by="envbuild.plan.data:data_step", test="tests/x/test_x.py::test_y").state == "handled"
    with pytest.raises(ValueError, match="names handled_by and test"):
        Deviation(**base, status="handled", handled_by=["envbuild.plan.data:data_step"])
    with pytest.raises(ValueError, match="envbuild.module:function"):
        Deviation(**base, handled_by=["os:system"], test=["tests/x/test_x.py::test_y"])
    with pytest.raises(ValueError, match="tests/<layer>/test_x.py::test_y"):
        Deviation(**base, handled_by=["envbuild.plan.data:data_step"], test=["rm -rf /"])
    assert deviation_state({"status": "open", "handled_by": ["a"], "test": ["b"]}) == "open"
    # fields left unset are not in the dump: recipes without them keep their digest (and lock)
    assert set(Deviation(**base).model_dump()) == set(base) | {"source"}


def test_which_test_and_code_prove_a_deviation_leave_the_digest_and_what_it_does_does_not() -> None:
    """A deviation's ``test`` and ``handled_by`` say how envbuild proves its claim, so moving a
    test or the code leaves the recipe digest a lock records (``Recipe.DIGEST_EXCLUDE``); what
    envbuild does ``instead`` is part of it."""
    recipe = next(r for r in RECIPES if r.name == "megatron-deepspeed-slurm")
    first, *rest = recipe.deviations

    def with_first(**update: object) -> object:
        return recipe.model_copy(update={"deviations": [first.model_copy(update=update), *rest]})

    moved = with_first(test=["tests/elsewhere/test_moved.py::test_it"], handled_by=["envbuild.plan.data:data_step"])
    assert digest(moved) == digest(recipe)
    assert digest(with_first(instead=first.instead + " and more")) != digest(recipe)
