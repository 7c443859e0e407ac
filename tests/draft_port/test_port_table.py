"""The comparison table of docs/port.md ("The published setups, ported to h100-venv, against the
shipped variants") agrees with the code: each port row's stack is the one port chooses for
h100-venv, its `check` column names exactly the fields port leaves undecided for that setup
(tests/draft_port/test_port.py: UNDECIDED, asserted there on mirrors that hold the real trees' patterns),
the fix rows it names are rows of fixes.yaml and its carried patches are the published
recipe's; each hand-made row is the shipped variant of that setup: its stack, its Apex, every
one of its patches, and `check` FEASIBLE on h100-venv."""

from __future__ import annotations

import re

import pytest
from support.portsetups import SETUPS, UNDECIDED

from envbuild.compat.check import preflight
from envbuild.facts.profile import from_target
from envbuild.port.stack import choose_stack
from envbuild.port.tables import fixes
from envbuild.recipes import all_recipes, load_recipe
from envbuild.targets import load_target
from support.paths import ROOT

DOC = ROOT / "docs" / "port.md"
TARGET = "h100-venv"


def _rows() -> list[list[str]]:
    text = DOC.read_text()
    head = text.index("| setup | | torch / CUDA / Python |")
    rows = []
    for line in text[head:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _pairs() -> dict[str, tuple[list[str], list[str]]]:
    """setup -> (its port row, its hand-made row)."""
    rows, out = _rows(), {}
    for port, made in zip(rows[::2], rows[1::2]):
        assert port[1] == "port" and not made[0] and made[1].startswith(("hand-made `", "shipped `")), (port, made)
        out[port[0]] = (port, made)
    return out


def _stack_cell(torch: str, cuda: str, python: str) -> str:
    return f"{torch} / {cuda} / {python}"


def test_the_table_covers_the_five_published_setups() -> None:
    assert set(_pairs()) == set(UNDECIDED)


@pytest.mark.parametrize("setup", sorted(UNDECIDED))
def test_port_row_says_what_port_drafts(setup) -> None:
    port, _ = _pairs()[setup]
    target = load_target(TARGET)
    stack = choose_stack(load_recipe(setup), target, from_target(target))
    assert port[2].startswith(_stack_cell(stack.torch, stack.cuda, stack.python)), port[2]
    check = port[5]
    if UNDECIDED[setup]:
        named = set(re.findall(r"`([^`]+)`", check))
        assert check.startswith("undecided:") and UNDECIDED[setup] <= named, check
        assert not (named & {f for fields in UNDECIDED.values() for f in fields}) - UNDECIDED[setup], check
    else:
        assert check == "FEASIBLE", check
    cell = port[4]
    if cell.startswith("none"):  # port applies no row: the test tree holds none of their patterns
        assert not SETUPS[setup][1] and not load_recipe(setup).patches, cell
        return
    rows = {f.id for f in fixes()}
    found = re.search(r"fixes: ([^;]*)", cell)
    named_fixes = [f.strip() for f in found.group(1).split(",")] if found else []
    assert named_fixes and set(named_fixes) <= rows, set(named_fixes) - rows
    carried = re.search(r"carried: ([^;]*)", cell)
    published = {q.id for q in load_recipe(setup).patches}
    assert {c.strip() for c in carried.group(1).split(",")} <= published if carried else True


@pytest.mark.parametrize("setup", sorted(UNDECIDED))
def test_hand_made_row_is_the_shipped_variant(setup) -> None:
    port, made = _pairs()[setup]
    name = made[1].split("`")[1]
    variant = load_recipe(name)
    assert variant.variant_of == setup
    target = load_target(TARGET)
    stack = choose_stack(load_recipe(setup), target, from_target(target))
    torch = variant.package("torch")
    assert (torch.version, torch.cuda or stack.cuda, variant.python) == (stack.torch, stack.cuda, stack.python)
    assert made[2] == "same" or made[2].startswith(_stack_cell(torch.version, torch.cuda or stack.cuda, variant.python))
    apex = next((s for s in variant.sources if s.install == "apex"), None)
    said = port[3] if made[3] == "same" else made[3]
    assert said.split()[0].rstrip(",") == (apex.sha[:8] if apex else "none"), said
    listed = [] if made[4] == "none" else [p.strip() for p in made[4].split(",")]
    assert listed == [q.id for q in variant.patches]
    assert made[5] == "FEASIBLE" and preflight(variant, target, from_target(target)).feasible


def test_every_shipped_variant_of_a_published_setup_is_in_the_table() -> None:
    named = {made[1].split("`")[1] for _, made in _pairs().values()}
    assert {r.name for r in all_recipes() if r.variant_of in UNDECIDED} <= named
