"""Every byte a node, a recipe or a log sends to the operator's terminal passes one escaping
function (``envbuild.display.visible``; issue 54, item 3): the live view's log tail, the facts
table's cells (rich markup off for data: ``[bold]`` in a GPU name prints as written), and JSON
with DEL and C1 controls (U+009B is CSI to a terminal) escaped. A hung nvidia-smi is stopped
by its time bound and not asked again, so `envbuild facts` ends in seconds, not 244 s."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from envbuild.testbed.doubles import install_gpu_doubles
from support.paths import ROOT

H100 = ROOT / "tests" / "fixtures" / "nodes" / "h100-ubuntu2404-cuda13"
RUN = ROOT / "tests" / "data" / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"
HOSTILE = "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x9b31m"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def envbuild(*args: str, cwd: Path, path_first: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENVBUILD_HOME": str(cwd / ".home"), "COLUMNS": "300", "TERM": "dumb"}
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    return subprocess.run([sys.executable, "-m", "envbuild", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_the_live_views_log_tail_shows_a_logs_escapes(tmp_path):
    """A real build log followed by the live tail, shown by the live view: OSC 0/52/8 and CSI
    print as \\xNN, and markup in the log is text."""
    from envbuild.cli.progress import ProgressState
    from envbuild.execute.events import Event
    from envbuild.execute.livelog import LiveTail

    log = tmp_path / "pip.log"
    log.write_text("")
    state = ProgressState(clock=lambda: 10.0)
    state.feed(Event(1.0, "n1" + HOSTILE, "pip", "start"))
    with LiveTail({"n1" + HOSTILE: {str(log): "pip"}}, state.feed, interval=60) as tail:
        log.write_text(f"Collecting torch {HOSTILE} [bold]x[/bold]\n")
        assert tail.poll()
    state.feed(Event(2.0, "n1" + HOSTILE, "pip", "task", "pip install " + HOSTILE))
    out = io.StringIO()
    Console(file=out, width=300, color_system=None, force_terminal=True).print(state.renderable(300))
    text = out.getvalue()
    assert not RAW.search(text), repr(text)
    assert "Collecting torch \\x1b]0;pwned\\x07" in text and "\\x9b31m" in text and "[bold]x[/bold]" in text
    line = io.StringIO()
    Console(file=line, width=300, color_system=None).print(state.line(Event(3.0, "n1" + HOSTILE, "pip", "failed",
                                                                              HOSTILE)))
    assert not RAW.search(line.getvalue()) and "\\x1b]52;c;" in line.getvalue()


def _hostile_node(tmp_path: Path) -> Path:
    """nvidia-smi doubles whose GPU name holds markup, OSC sequences and an 8-bit CSI."""
    fixtures = tmp_path / "node"
    shutil.copytree(H100, fixtures)
    csv = fixtures / "nvidia-smi-query.csv"
    csv.write_text(csv.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA [bold]H100[/bold] " + HOSTILE))
    return install_gpu_doubles(tmp_path / "bin", fixtures)


@pytest.mark.process
def test_the_facts_table_prints_a_gpu_name_as_data(tmp_path):
    got = envbuild("facts", cwd=tmp_path, path_first=_hostile_node(tmp_path))
    assert got.returncode == 0, got.stderr
    assert "NVIDIA [bold]H100[/bold]" in got.stdout  # markup is text
    assert not RAW.search(got.stdout), repr(got.stdout[:2000])
    assert "\\x1b]52;c;ZXZpbA==\\x07" in got.stdout and "\\x9b31m" in got.stdout


@pytest.mark.process
def test_facts_json_escapes_c1_controls(tmp_path):
    got = envbuild("facts", "--json", cwd=tmp_path, path_first=_hostile_node(tmp_path))
    assert got.returncode == 0, got.stderr
    assert not RAW.search(got.stdout) and "\\u009b31m" in got.stdout
    names = [g["name"] for g in json.loads(got.stdout)["gpus"]]
    assert names and all(n.startswith("NVIDIA [bold]H100[/bold] ") and n.endswith(HOSTILE) for n in names)


@pytest.mark.process
def test_report_json_escapes_c1_controls(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    for facts in run.glob("nodes/*/facts.json"):
        facts.write_text(facts.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3\\u009b31m\\u007f"))
    got = envbuild("report", str(run), "--format", "json", cwd=tmp_path)
    assert got.stdout.startswith("{"), got.stderr
    assert "\\u009b31m" in got.stdout and not RAW.search(got.stdout)
    assert "NVIDIA H100 80GB HBM3\x9b31m\x7f" in json.dumps(json.loads(got.stdout), ensure_ascii=False)  # same value


@pytest.mark.process
@pytest.mark.slow
def test_a_hung_nvidia_smi_is_stopped_once_and_not_asked_again(tmp_path):
    """An nvidia-smi that never answers and ignores SIGTERM (as a hung driver's does): the
    facts end within its one bound (QUICK_TOOLS_S, then KILL), every later call of it is
    skipped, and the GPU facts are missing with the reason."""
    from envbuild.facts.script import KILL_AFTER_S, QUICK_TOOLS_S

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\ntrap "" TERM\necho "$*" >>"$(dirname "$0")/calls"\nwhile :; do sleep 1; done\n')
    smi.chmod(0o755)
    t0 = time.monotonic()
    got = envbuild("facts", "--json", cwd=tmp_path, path_first=bin_dir, timeout=240)
    took = time.monotonic() - t0
    assert got.returncode == 0, got.stderr
    bound = QUICK_TOOLS_S["nvidia-smi"] + KILL_AFTER_S
    assert took < bound + 30, took  # 244 s before: four calls of 60 s
    assert len((bin_dir / "calls").read_text().splitlines()) == 1  # asked once
    facts = json.loads(got.stdout)
    why = " ".join(str(v) for v in facts["missing"].values())
    assert "nvidia-smi did not answer" in why, facts["missing"]
    assert not facts["gpus"]
