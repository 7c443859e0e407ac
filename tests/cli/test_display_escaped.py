"""No raw control byte from a recipe, a log or a node reaches the operator (issue 41): `show`,
`parse`, the live view and the Markdown of reports show ESC, BEL, OSC and 8-bit CSI as \\xNN."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from support.paths import ROOT

HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\x08\r"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "ENVBUILD_HOME": str(cwd / ".home")})


def test_show_of_a_hostile_recipe_prints_no_control_byte(tmp_path):
    import json

    text = (ROOT / "envbuild" / "recipes" / "data" / "cpu-reference.yaml").read_text()
    title = next(line for line in text.splitlines() if line.startswith("title: "))
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(text.replace(title, f"title: {json.dumps('demo' + HOSTILE)}", 1))  # YAML reads \u escapes
    got = run("show", str(hostile), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert not RAW.search(got.stdout) and "\\x1b]52;c;ZXZpbA==\\x07" in got.stdout


def test_parse_of_a_hostile_log_prints_no_control_byte(tmp_path):
    log = tmp_path / "native.out"
    src = (ROOT / "docs" / "results" / "h100x4-run9" / "alpa-run2" / "native.out").read_text()
    log.write_text(src + f"\nTraceback (most recent call last): {HOSTILE}\nRuntimeError: boom {HOSTILE}\n")
    got = run("parse", "alpa-megatron-h100", str(log), "--gpu", f"NVIDIA H100 80GB HBM3{HOSTILE}", cwd=tmp_path)
    assert not RAW.search(got.stdout), got.stdout
    assert "\\x1b" in got.stdout


def test_a_rejudged_folders_markdown_holds_no_control_byte(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(ROOT / "docs" / "results" / "h100x4-run9" / "alpa-run2", folder)
    facts = (folder / "facts.json").read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3\\u001b]0;x\\u0007")
    (folder / "facts.json").write_text(facts)
    got = run("report", str(folder), cwd=tmp_path)
    assert "\\x1b]0;x\\x07" in got.stdout and not RAW.search(got.stdout)


def test_the_live_views_lines_show_control_bytes(tmp_path):
    from envbuild.cli.output import SafeConsole
    from envbuild.cli.progress import ProgressDisplay

    out = io.StringIO()
    console = SafeConsole(file=out, highlight=False, force_terminal=False)
    with ProgressDisplay(console, live=False) as display:
        display(f"node1: pip says {HOSTILE}")
    assert not RAW.search(out.getvalue()) and "\\x9b31m" in out.getvalue()
    plain = io.StringIO()
    Console(file=plain, force_terminal=False).print(f"x{HOSTILE}", markup=False)
    assert RAW.search(plain.getvalue())  # rich alone lets ESC through: the safe console is what holds
