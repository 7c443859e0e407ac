"""The pythons probe lists every interpreter with one python (``envbuild.facts.python``'s
lister) and prints exactly what starting each candidate prints (its shell fallback): on this
machine, with a venv first on PATH (version and prefix from its pyvenv.cfg, not started)."""

from __future__ import annotations

import os
import subprocess
import sys

from envbuild.facts import python as P
from envbuild.facts.probe import Probe
from envbuild.facts.script import build_script, split_sections


def _both(env: dict) -> tuple[str, str]:
    probe = P.PROBES[0]
    assert probe.command == P._CANDIDATES + P.LISTED + P.STARTED
    fallback = Probe("pythons", P._CANDIDATES + P.STARTED)
    outs = []
    for pr in (probe, fallback):
        run = subprocess.run(["sh", "-c", build_script([pr])], capture_output=True, text=True, env=env, timeout=120)
        sec = split_sections(run.stdout)["pythons"]
        assert sec.rc == 0, sec.err
        outs.append(sec.out)
    return outs[0], outs[1]


def test_lister_prints_what_starting_each_candidate_prints(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv}/bin:{os.environ['PATH']}"}
    listed, started = _both(env)
    assert listed == started
    found = P.parse_pythons(listed)
    assert found[0].path == f"{venv}/bin/python"
    assert found[0].version == "%d.%d.%d" % sys.version_info[:3]
    assert f"{venv}/bin/python\t" in listed and f"\t{venv}\n" in listed  # the venv's own prefix
