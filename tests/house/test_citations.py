"""Every pin, profile and threshold of the five published setups cites the document that states
it, at the revision read (a GitHub file cites a commit: a SHA in its URL or in ``sha``), and
`envbuild show` prints each citation next to its pin."""

from __future__ import annotations

import re

import pytest

from envbuild.cli import main
from envbuild.recipes import load_recipe
from envbuild.targets import load_target

FIVE = ("alpa-megatron", "opt-175b-azure", "polaris-megatron-deepspeed", "megatronapp",
        "megatron-deepspeed-slurm")
SHA = re.compile(r"[0-9a-f]{40}")
# a GitHub document fixed by its address: a PR, an issue, a release tag, a commit
FIXED = re.compile(r"github\.com/[^/]+/[^/]+/(pull|issues|releases/tag|commit)/")


def _revision_ok(source) -> bool:
    url = source.url
    if "github.com" not in url:
        return True  # a page (PyPI, docs site, download index): no revision to cite
    return bool(SHA.search(url) or (source.sha and SHA.fullmatch(source.sha)) or FIXED.search(url))


def _citations(recipe):
    """(what, source) for every pin, the environment and the benchmark of ``recipe``."""
    out = [(f"package {p.name}", p.source) for p in recipe.packages]
    out += [(f"git {s.name}", s.source) for s in recipe.sources]
    out += [(f"patch {p.id}", p.source) for p in recipe.patches]
    out += [(f"data {d.name}", d.source) for d in recipe.data]
    env = recipe.environment
    if env.base_image or env.conda_module or env.pip or env.setuptools:
        out.append(("environment", env.source))
    if recipe.benchmark is not None:
        out.append(("benchmark", recipe.benchmark.source))
    out.append(("published", recipe.published))
    return out


@pytest.mark.parametrize("name", FIVE)
def test_every_pin_cites_its_document_at_a_revision(name) -> None:
    recipe = load_recipe(name)
    missing = [what for what, src in _citations(recipe) if src is None]
    assert not missing, f"{name}: no source for {missing}"
    floating = [f"{what}: {src.url}" for what, src in _citations(recipe) if not _revision_ok(src)]
    assert not floating, f"{name}: GitHub documents cited without the revision read: {floating}"
    bench = recipe.benchmark
    if bench.published is not None:
        assert SHA.search(bench.published.source) or "http" in bench.published.source


@pytest.mark.parametrize("name", sorted({t for r in FIVE for t in load_recipe(r).targets} - {"local"}))
def test_every_profile_cites_its_documents_at_a_revision(name) -> None:
    target = load_target(name)
    assert target.sources, f"target {name} cites nothing"
    for line in target.sources:
        m = re.match(r"^([\w.-]+/[\w.-]+)@(\S+?):", line)
        if m:  # owner/repo@revision:path
            assert SHA.fullmatch(m.group(2)), f"{name}: {line!r} names {m.group(2)!r}, not a full commit"


def test_published_figures_where_one_exists() -> None:
    figures = {r: load_recipe(r).benchmark.published for r in FIVE}
    assert figures["opt-175b-azure"].value == 200000 and "d8b78383" in figures["opt-175b-azure"].source
    assert figures["alpa-megatron"].value == 47.53 and "results_e2e_ref.tsv" in figures["alpa-megatron"].source
    # PINS.md: no published throughput for the ALCF, MegatronApp and Slurm-sample runs
    assert all(figures[r] is None for r in ("polaris-megatron-deepspeed", "megatronapp",
                                            "megatron-deepspeed-slurm"))


@pytest.mark.parametrize("name", FIVE)
def test_show_prints_the_citation_of_each_pin(name, capsys, monkeypatch) -> None:
    from envbuild.cli.output import console

    monkeypatch.setattr(console, "width", 4000)  # one table row per line
    assert main(["show", name]) == 0
    out = capsys.readouterr().out
    recipe = load_recipe(name)
    for what, src in _citations(recipe):
        assert src.url in out, f"{what}: {src.url} not printed"
    if recipe.benchmark.published:
        assert "published figure: " in out
    for d in recipe.deviations:
        assert ("OPEN: not handled yet" if d.state == "open" else "handled by " + d.handled_by[0]) in out
