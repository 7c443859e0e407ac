"""The house's dependencies: every distribution envbuild imports is declared in pyproject.toml,
and none is declared that nothing imports (deptry, configured under ``[tool.deptry]``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.lint
def test_every_imported_distribution_is_declared_and_none_unused():
    out = subprocess.run([sys.executable, "-m", "deptry", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No dependency issues found" in out.stdout + out.stderr
