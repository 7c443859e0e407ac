"""The ``pip_list`` probe reads the selected interpreter's distributions with importlib.metadata
and prints what ``pip list --format=json`` prints: compared with pip itself on every Python
this machine has (pyenv's 2.7 and 3.6 to 3.13, Debian's python3), run from a working folder
that holds a stray distribution (``python -m pip`` takes the working folder off sys.path, so
the probe must too). Pythons before 3.8 have no importlib.metadata: the probe runs pip there."""

import glob
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from envbuild.connect.runners import LocalRunner
from envbuild.facts.python import _DISTRIBUTIONS, PROBES, parse_pip_list
from envbuild.facts.script import build_script, split_sections

PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
PYTHONS = sorted({*glob.glob(str(PYENV / "versions" / "*" / "bin" / "python")), "/usr/bin/python3"})
PROBE = next(p for p in PROBES if p.name == "pip_list")


def version_of(python: str) -> tuple[int, int]:
    out = subprocess.run([python, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout
    major, minor = out.split()
    return int(major), int(minor)


@pytest.mark.parametrize("python", [p for p in PYTHONS if os.access(p, os.X_OK)])
def test_the_probe_lists_what_pip_lists(python, tmp_path):
    stray = tmp_path / "stray-1.0.dist-info"  # in the working folder: on sys.path for `-c` only
    stray.mkdir()
    (stray / "METADATA").write_text("Metadata-Version: 2.1\nName: stray\nVersion: 1.0\n")
    pip = subprocess.run([python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                         capture_output=True, text=True, cwd=tmp_path)
    if pip.returncode != 0 or not pip.stdout.strip():
        pytest.skip(f"{python} has no working pip to compare with: {pip.stderr.strip()[-200:]}")
    script = build_script([PROBE], python=python)
    section = split_sections(LocalRunner().run(f"cd {shlex.quote(str(tmp_path))} && sh -c {shlex.quote(script)}").stdout)
    listed = parse_pip_list(section["pip_list"].out)
    assert section["pip_list"].rc == 0 and listed == parse_pip_list(pip.stdout)
    snippet = subprocess.run([python, "-c", _DISTRIBUTIONS], capture_output=True, text=True, cwd=tmp_path)
    if version_of(python) >= (3, 8):
        assert snippet.returncode == 0 and parse_pip_list(snippet.stdout) == listed  # importlib.metadata
        assert "stray" not in listed
    else:  # no importlib.metadata: pip listed them (an old pip lists the working folder's too)
        assert snippet.returncode != 0


@pytest.mark.parametrize("python", [p for p in PYTHONS if os.access(p, os.X_OK) and version_of(p) >= (3, 8)])
def test_modules_in_the_working_folder_do_not_stand_in_for_the_standard_librarys(python, tmp_path):
    """The probe runs with the node user's home as its working folder: a ``json.py`` or ``re.py``
    there is not imported (the folder leaves sys.path before any import from a path)."""
    for name in ("json", "re"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the working folder {name}.py was imported')\n")
    snippet = subprocess.run([python, "-c", _DISTRIBUTIONS], capture_output=True, text=True, cwd=tmp_path)
    assert snippet.returncode == 0 and parse_pip_list(snippet.stdout), snippet.stderr
