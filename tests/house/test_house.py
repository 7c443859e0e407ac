"""The house's dependencies: every distribution envbuild imports is declared in pyproject.toml,
and none is declared that nothing imports (deptry, configured under ``[tool.deptry]``); and the
controller's digests come from one module (envbuild.fsio)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.paths import ROOT



@pytest.mark.lint
def test_every_imported_distribution_is_declared_and_none_unused():
    out = subprocess.run([sys.executable, "-m", "deptry", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No dependency issues found" in out.stdout + out.stderr


def test_the_controller_hashes_in_one_module():
    """Issue 20's "one digest module": on the controller side, sha256 of a file, a text or bytes
    is ``envbuild.fsio``'s (sha256_file, sha256_text). Two other uses of hashlib
    are of another kind: a download hashed while it streams to disk (bundle/fetch.py) and an SSH
    key's fingerprint in OpenSSH's base64 form (connect/hostkeys.py). The node side (standard
    library only) and the test bed keep their own."""
    import ast

    root = ROOT / "envbuild"
    users = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("node/", "testbed/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) else [])
            if "hashlib" in names:
                users.add(rel)
    assert users == {"fsio.py", "bundle/fetch.py", "connect/hostkeys.py"}
