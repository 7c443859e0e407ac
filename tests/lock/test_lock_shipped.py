"""The committed lockfiles: one per shipped recipe x target, each up to date with its recipe."""

from __future__ import annotations


import pytest

from envbuild.cli import main
from envbuild.lock import read_lock
from envbuild.recipes import all_recipes
from support.paths import ROOT

LOCKDIR = ROOT / "lockfiles"
PAIRS = [(r.name, t) for r in all_recipes() for t in r.targets]


def test_every_recipe_target_pair_has_a_lock():
    assert PAIRS, "no shipped recipes"
    missing = [f"{r}/{t}" for r, t in PAIRS if not (LOCKDIR / r / f"{t}.lock").is_file()]
    assert not missing, f"run `envbuild lock --all`; missing: {missing}"


@pytest.mark.parametrize(("recipe", "target"), PAIRS, ids=[f"{r}/{t}" for r, t in PAIRS])
def test_lock_is_current_and_honest(recipe, target):
    lock = read_lock(LOCKDIR / recipe / f"{target}.lock")
    for pkg in lock.packages:
        if pkg.verified:
            assert pkg.dist is not None and len(pkg.dist.sha256) == 64
        else:
            assert pkg.dist is None and pkg.reason.startswith(("not verified: ", "not resolved: "))
    for pin in lock.git:
        assert pin.verified or pin.reason.startswith("not verified: ")


def test_all_check_passes(capsys):
    assert main(["lock", "--all", "--check", "--lockdir", str(LOCKDIR)]) == 0, capsys.readouterr().err
