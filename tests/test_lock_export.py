"""A lock exported as pylock.toml (PEP 751) and as a hashed requirements.txt installs exactly
the locked set: pylock.toml with uv, requirements.txt with pip (--require-hashes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.lock.serialize import read_lock
from envbuild.lock.uvresolve import uv_binary

LOCK = Path(__file__).parents[1] / "envbuild" / "lockfiles" / "cpu-reference" / "local.lock"
WHEELS = "/opt/wheels"


def export(fmt: str, out: Path, capsys) -> str:
    assert main(["lock", "cpu-reference", "--target", "local", "--format", fmt,
                 "--wheelhouse", WHEELS, "-o", str(out)]) in (0, None)
    return out.read_text()


def installed(python: Path) -> dict[str, str]:
    code = ("import json, importlib.metadata as m; "
            "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))")
    import json

    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                                     check=True).stdout)


def expected() -> dict[str, str]:
    lock = read_lock(LOCK)
    return {p.name.lower(): p.version for p in lock.packages}


def test_export_without_a_wheelhouse_for_wheelhouse_packages_is_bad_input(tmp_path, capsys):
    rc = main(["lock", "cpu-reference", "--target", "local", "--format", "pylock"])
    assert rc == 2 and "--wheelhouse" in capsys.readouterr().err


def test_uv_binary_is_found_without_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert Path(uv_binary()).is_file()


@pytest.mark.integration
@pytest.mark.skipif(not Path(WHEELS).is_dir(), reason="needs the CPU torch wheel in /opt/wheels")
def test_pylock_installs_with_uv(tmp_path, capsys):
    text = export("pylock", tmp_path / "pylock.toml", capsys)
    assert 'lock-version = "1.0"' in text
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([uv_binary(), "pip", "install", "--python", str(venv / "bin" / "python"),
                    "-r", str(tmp_path / "pylock.toml")], check=True, capture_output=True)
    got = installed(venv / "bin" / "python")
    assert {k: v for k, v in got.items() if k in expected()} == expected()


@pytest.mark.integration
@pytest.mark.skipif(not Path(WHEELS).is_dir(), reason="needs the CPU torch wheel in /opt/wheels")
def test_requirements_install_with_pip_require_hashes(tmp_path, capsys):
    text = export("requirements", tmp_path / "requirements.txt", capsys)
    assert all("--hash=sha256:" in line for line in text.splitlines() if not line.startswith("#"))
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input",
                    "--require-hashes", "--no-deps", "-r", str(tmp_path / "requirements.txt")],
                   check=True, capture_output=True)
    got = installed(venv / "bin" / "python")
    assert {k: v for k, v in got.items() if k in expected()} == expected()
