"""Errata: steps of the published instructions that fail as written (issue 36).

Every erratum of a shipped recipe names a test that fails when it stops being true and, where
a shipped variant corrects it, that variant's deviation (``<recipe>:<deviation id>``), which
must exist there. The errata themselves are checked against the published sources in a git
mirror (``ENVBUILD_GIT_MIRROR``: owner+name or owner/name repositories) when this machine has
one, and skip, saying so, where it does not (CI has no GitHub).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envbuild.gitsrc import mirror_path
from envbuild.recipes import all_recipes, load_recipe
from envbuild.recipes.schema import Erratum

ERRATA = [(r.name, e) for r in all_recipes() for e in r.errata]


def test_the_errata_the_issue_names_are_recorded():
    have = {(name, e.id) for name, e in ERRATA}
    assert ("alpa-megatron", "args-suite-undefined") in have
    assert ("polaris-megatron-deepspeed", "train-gpt3-moved") in have


@pytest.mark.parametrize("recipe,erratum", ERRATA, ids=[f"{r}:{e.id}" for r, e in ERRATA])
def test_each_erratum_is_corrected_by_a_deviation_of_a_variant(recipe: str, erratum: Erratum):
    for ref in erratum.corrected_by:
        variant, _, dev = ref.partition(":")
        fixed = load_recipe(variant)
        assert fixed.variant_of == recipe, f"{ref}: {variant} is not a variant of {recipe}"
        deviation = next((d for d in fixed.deviations if d.id == dev), None)
        assert deviation is not None, f"{ref}: no deviation {dev} in {variant}"
        assert deviation.state == "handled", ref
    assert all(t.startswith("tests/") for t in erratum.test)


def test_erratum_refs_are_checked():
    base = {"id": "x", "published": "p", "problem": "q", "source": {"url": "https://example.org"}}
    with pytest.raises(ValueError, match="recipe>:<deviation id"):
        Erratum(**base, corrected_by=["no-colon"], test=["tests/x/test_x.py::test_y"])
    with pytest.raises(ValueError):
        Erratum(**base, test=[])  # an erratum names the test that shows it


def _mirror(url: str) -> Path:
    root = os.environ.get("ENVBUILD_GIT_MIRROR")
    repo = mirror_path(url, root) if root and Path(root).is_dir() else None
    if repo is None:
        pytest.skip(f"no git mirror of {url} here (CI has no GitHub): set ENVBUILD_GIT_MIRROR "
                    "to check the erratum against the published sources")
    return repo


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, timeout=120).stdout


def _has(repo: Path, commit: str, path: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}:{path}"],
                          capture_output=True, timeout=60).returncode == 0


@pytest.mark.integration
def test_alpa_args_suite_erratum_holds_at_the_pinned_commit():
    erratum = next(e for name, e in ERRATA if e.id == "args-suite-undefined")
    sha = erratum.source.sha
    repo = _mirror("https://github.com/alpa-projects/alpa")
    text = _git(repo, "show", f"{sha}:osdi22_artifact/megatron/benchmark_gpt.py")
    assert "{args.suite}" in text  # the message names it ...
    assert "--suite" not in text and "args.suite =" not in text  # ... the parser never defines it
    suite = text.split("gpt_megatron_best_suite = {", 1)[1].split("\n}", 1)[0]
    assert "\n2: [" not in suite and "\n1: [" in suite  # no case for 2 GPUs


@pytest.mark.integration
def test_polaris_step5_erratum_holds_at_the_guide_date():
    recipe = load_recipe("polaris-megatron-deepspeed")
    erratum = next(e for e in recipe.errata if e.id == "train-gpt3-moved")
    guide = _mirror("https://github.com/argonne-lcf/user-guides")
    page = _git(guide, "show", f"{recipe.guide.sha}:docs/polaris/data-science/applications/megatron-deepspeed.md")
    # the page clones the default branch (no ref) and step 5 runs ./ALCF/train-gpt3.sh
    assert "git clone https://github.com/argonne-lcf/Megatron-DeepSpeed\n" in page
    assert "./ALCF/train-gpt3.sh" in page
    page_date = _git(guide, "show", "-s", "--format=%cI", recipe.guide.sha).strip()
    assert page_date.startswith("2025-01-21"), page_date
    mds = _mirror(recipe.published.url)
    main = _git(mds, "rev-list", "-1", f"--before={page_date}", "main").strip()
    assert main, "no main commit before the guide's date"
    assert not _has(mds, main, "ALCF/train-gpt3.sh")  # step 5 as written: no such file
    assert _has(mds, main, "ALCF/pre-AuroraGPT/train-gpt3.sh")
    # e7d76d39 moved it; the recipe's pin (the README's commit) predates the move
    moved = _git(mds, "show", "--format=", "--name-status", "-M", erratum.shown_by.sha)
    assert any(line.split("\t")[1:] == ["ALCF/train-gpt3.sh", "ALCF/pre-AuroraGPT/train-gpt3.sh"]
               for line in moved.splitlines() if line.startswith("R")), moved
    assert _has(mds, recipe.published.sha, "ALCF/train-gpt3.sh")
    subprocess.run(["git", "-C", str(mds), "merge-base", "--is-ancestor", recipe.published.sha,
                    erratum.shown_by.sha], check=True, timeout=60)
