"""The tables ``envbuild port`` reads agree with the rest of envbuild's knowledge: each torch
build's driver minimum is ``envbuild.cuda_arch``'s for its CUDA, a node's own torch is a
build the compatibility table knows and its day (resolve_as_of) the one its shipped variants
resolve as of, the DeepSpeed upgrade is the release the preflight row
asks for, and every row names a source."""

from __future__ import annotations

from envbuild.compat.rules_deepspeed import DS_ELASTIC_FIXED
from envbuild.compat.torch_wheels import find
from envbuild.cuda_arch import min_driver_for
from envbuild.port.tables import fixes, node_stacks, package_table, torch_builds
from envbuild.recipes import all_recipes
from envbuild.targets import load_target


def test_torch_builds_take_the_driver_minimum_of_their_cuda() -> None:
    for b in torch_builds():
        assert b.driver_min == min_driver_for(b.cuda_version), f"{b.torch}+{b.cuda}"
        assert b.source and b.archs and b.pythons


def test_node_stacks_name_shipped_targets_and_known_builds() -> None:
    for s in node_stacks():
        target = load_target(s.target)
        assert s.python in target.python
        assert find(s.torch, s.cuda) is not None, f"{s.target}: torch {s.torch}+{s.cuda} unknown to compat"
        assert s.packages.get("torch") == s.torch


def test_a_node_stacks_day_is_the_one_its_shipped_variants_resolve_as_of() -> None:
    """h100-venv's resolve_as_of (a port's, where the published date predates the stack) is the
    day every shipped variant for that target resolves as of, and its reason names the torch."""
    for s in node_stacks():
        if s.resolve_as_of is None:
            continue
        variants = [r for r in all_recipes() if r.variant_of and r.targets == [s.target]]
        assert variants and {r.resolve_as_of for r in variants} == {s.resolve_as_of.date}, s.target
        assert f"torch {s.torch}" in s.resolve_as_of.why and s.resolve_as_of.source


def test_the_deepspeed_upgrade_is_the_release_the_preflight_row_names() -> None:
    (up,) = [u for u in package_table()[1] if u.package == "deepspeed"]
    assert up.to == DS_ELASTIC_FIXED


def test_every_fix_row_says_what_breaks_and_where_it_is_shown() -> None:
    for f in fixes():
        assert f.breaks and f.source.startswith(("https://", "docs/")), f.id
