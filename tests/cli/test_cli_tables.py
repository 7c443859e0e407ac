"""Tables at 80 columns (issue 40): `recipes`, `show`, `check` and `plan` print records that
fit the terminal instead of squeezing cells to a word each; a wide terminal keeps the table."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from envbuild.cli.tables import FOLD_BELOW
from envbuild.recipes import all_recipes

COMMANDS = [["recipes"], ["show", "alpa-megatron"], ["check", "alpa-megatron", "-t", "h100"],
            ["plan", "cpu-reference", "-t", "local"]]


def run(argv: list[str], columns: int) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"}
    p = subprocess.run([sys.executable, "-m", "envbuild", *argv], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    return p.stdout


@pytest.mark.parametrize("argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_tables_fold_into_records_at_80_columns(argv):
    out = run(argv, 80)
    assert not any(c in out for c in "┏┃│"), out[:1500]  # no squeezed table
    # the records are there: each row's cells as indented `column: value` lines
    field = {"recipes": "  title: ", "show": "  version: ", "check": "  rule: ", "plan": "  step: "}[argv[0]]
    assert any(line.startswith(field) for line in out.splitlines()), out[:1500]
    if argv == ["recipes"]:
        names = {line.split()[0] for line in out.splitlines()[1:] if line and not line.startswith(" ")}
        assert {r.name for r in all_recipes()} <= names  # each name whole, on its own line


def test_a_wide_terminal_keeps_the_table():
    assert "┃ name" in run(["recipes"], FOLD_BELOW + 80)


def test_a_folded_record_fits_the_width_and_keeps_every_cell():
    """The table itself at 80 columns (free text printed around it is the terminal's to wrap)."""
    import io

    from rich.console import Console

    from envbuild.cli.tables import FoldingTable

    t = FoldingTable(title="packages")
    for col in ("name", "version", "why", "source"):
        t.add_column(col, overflow="fold")
    why = "a long reason " * 12
    t.add_row("megatron-deepspeed-slurm-h100", "1.0", why.strip(), "https://example.org/" + "x" * 90)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(t)
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["packages", "megatron-deepspeed-slurm-h100"] and lines[2] == "  version: 1.0"
    assert all(len(x) <= 80 for x in lines) and all(x.startswith("  ") for x in lines[2:])
    joined = "".join(x.strip() for x in lines[3:])
    assert joined.replace(" ", "").count("alongreason") == 12 and "x" * 90 in joined
