"""A recipe of one source whose build runs given commands (``sleep``: a provision that takes as
long as a test needs), served from a git mirror made here, and the ``envbuild provision`` command
line that installs it on this machine: for the interrupt, secrets and progress tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def slow_recipe(tmp_path: Path, build: list[str]) -> tuple[Path, Path]:
    """(recipe, git mirror): one source, ``slowpkg``, built by ``build`` and installed as pth."""
    mirror, work = tmp_path / "mirror", tmp_path / "work"
    (mirror / "acme").mkdir(parents=True)
    work.mkdir()
    (work / "slowpkg.py").write_text("VALUE = 1\n")
    git("init", "-q", "-b", "main", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-qm", "slowpkg", cwd=work)
    git("clone", "-q", "--bare", str(work), str(mirror / "acme" / "slowpkg.git"), cwd=tmp_path)
    recipe = tmp_path / "slow.yaml"
    recipe.write_text(yaml.safe_dump({
        "schema": 1, "name": "slow-test", "title": "a slow build", "description": "interrupt target",
        "published": {"url": "https://example.invalid/slow"}, "python": "3.11", "targets": ["local"],
        "environment": {"kind": "venv"},
        "sources": [{"name": "slowpkg", "url": "https://github.com/acme/slowpkg", "ref": "main",
                     "sha": git("rev-parse", "HEAD", cwd=work), "install": "pth", "build": build,
                     "why": "a build step that takes long"}],
        "import_check": ["slowpkg"],
    }, sort_keys=False))
    return recipe, mirror


def provision_argv(recipe: Path, mirror: Path, prefix: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", str(recipe),
            "--git-mirror", str(mirror), "--prefix", str(prefix), "--no-smoke", *extra]
