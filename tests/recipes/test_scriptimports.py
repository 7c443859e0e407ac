"""The entry-script import extractor (envbuild.scriptimports) and its generated fact files.

The parser on script text; the generator on a git repository the test makes (mirror layout);
the committed fact files against the real mirrors when this machine has them
(ENVBUILD_GIT_MIRROR), since CI has no GitHub.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envbuild.errors import CheckFailed, InputError
from envbuild.recipes import all_recipes
from envbuild.recipes.schema import Recipe
from envbuild.scriptimports import dump, generate, read_fact, script_imports

SCRIPT = '''
"""A training entry script of the usual shape."""
from __future__ import annotations
import os, sys
import torch.nn.functional as F
from megatron import get_args
from . import local_helper
try:
    import wandb
except ImportError:
    wandb = None
try:
    from apex.optimizers import FusedAdam
except (ModuleNotFoundError, AttributeError):
    FusedAdam = None
try:
    import deepspeed
finally:
    pass
import wandb


def main():
    from megatron.training import pretrain
    import numpy as np
'''


def test_every_absolute_import_once_with_guarded_ones_optional():
    got = [(m.name, m.optional) for m in script_imports(SCRIPT)]
    assert got == [("os", False), ("sys", False), ("torch.nn.functional", False),
                   ("megatron", False), ("wandb", False), ("apex.optimizers", True),
                   ("deepspeed", False), ("megatron.training", False), ("numpy", False)]


def test_a_script_that_does_not_parse_is_named():
    with pytest.raises(InputError, match=r"repo:bad.py:1"):
        script_imports("import (\n", "repo:bad.py")


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _recipe(sha: str, path: str = "tools/train.py") -> Recipe:
    return Recipe.model_validate({
        "schema": 1, "name": "tiny", "title": "t", "description": "d",
        "published": {"url": "https://example.org"}, "python": "3.11", "targets": ["lab"],
        "sources": [{"name": "fork", "url": "https://github.com/acme/fork", "ref": "main",
                     "sha": sha, "install": "none", "why": "test"}],
        "entry_scripts": [{"component": "fork", "path": path}]})


@pytest.mark.integration
def test_generator_reads_the_script_at_the_pinned_commit(tmp_path: Path):
    work = tmp_path / "work"
    (work / "tools").mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "tools" / "train.py").write_text(SCRIPT)
    (work / "megatron").mkdir()
    (work / "megatron" / "__init__.py").write_text("")  # the fork's own package, at the root
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "pinned", cwd=work)
    pinned = _git("rev-parse", "HEAD", cwd=work)
    (work / "tools" / "train.py").write_text("import later_only\n")  # after the pin: not read
    _git("commit", "-q", "-am", "later", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "mirror" / "acme+fork" / "repo"), cwd=tmp_path)
    fact = generate(_recipe(pinned), tmp_path / "mirror")
    [script] = fact["scripts"]
    assert (script["repo"], script["sha"], script["path"]) == ("https://github.com/acme/fork", pinned, "tools/train.py")
    assert script["modules"] == ["os", "sys", "torch.nn.functional", "megatron", "wandb", "deepspeed",
                                 "megatron.training", "numpy"]
    assert script["optional"] == ["apex.optimizers"]
    assert script["local"] == ["megatron", "megatron.training"]  # found in the tree itself
    assert dump(fact).startswith("# DO NOT EDIT") and "envbuild imports tiny --git-mirror DIR" in dump(fact)
    with pytest.raises(CheckFailed, match="does not exist at"):
        generate(_recipe(pinned, "tools/absent.py"), tmp_path / "mirror")


def test_every_recipe_with_entry_scripts_has_its_fact_file():
    for rec in all_recipes():
        fact = read_fact(rec.name)
        if not rec.entry_scripts:
            assert fact is None
            continue
        assert fact is not None, f"no import fact for {rec.name}: run envbuild imports {rec.name}"
        assert [(s["component"], s["path"]) for s in fact["scripts"]] == \
            [(e.component, e.path) for e in rec.entry_scripts]
        for script in fact["scripts"]:  # the commit read is the recipe's pin
            assert script["sha"] == rec.source(script["component"]).sha


@pytest.mark.integration
def test_committed_fact_files_are_what_the_mirror_gives():
    mirror = os.environ.get("ENVBUILD_GIT_MIRROR")
    if not mirror or not Path(mirror).is_dir():
        pytest.skip("no git mirror of the setups' repositories here (CI has no GitHub): "
                    "set ENVBUILD_GIT_MIRROR to re-read the scripts")
    for rec in all_recipes():
        if rec.entry_scripts:
            assert generate(rec, Path(mirror)) == read_fact(rec.name), rec.name


def _package_files() -> dict[str, tuple[int, int]]:
    from envbuild import shipped

    return {str(f.relative_to(shipped.PACKAGE)): (f.stat().st_size, f.stat().st_mtime_ns)
            for f in shipped.PACKAGE.rglob("*") if f.is_file() and "__pycache__" not in f.parts}


@pytest.fixture
def user_setup(tmp_path: Path) -> dict:
    """A user's recipe (a path, not shipped) whose entry script lies in a mirror the test makes."""
    import yaml

    work = tmp_path / "work"
    (work / "tools").mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "tools" / "train.py").write_text(SCRIPT)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "pinned", cwd=work)
    pinned = _git("rev-parse", "HEAD", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "mirror" / "acme+fork" / "repo"), cwd=tmp_path)
    data = _recipe(pinned).model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["targets"] = ["cpu-local"]
    recipe = tmp_path / "my-setup.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    return {"recipe": recipe, "mirror": tmp_path / "mirror", "tmp": tmp_path}


@pytest.mark.integration
def test_imports_prints_the_fact_and_writes_nothing_into_the_package(user_setup):
    """issue 49: ``envbuild imports`` of a user's recipe wrote envbuild/recipes/imports/<name>.yaml
    into envbuild's own package tree. Without -o it prints the fact; the package is unchanged."""
    from support.clirun import envbuild

    s = user_setup
    before = _package_files()
    p = envbuild("imports", s["recipe"], "--git-mirror", s["mirror"])
    assert p.returncode == 0, p.stderr
    assert _package_files() == before
    fact = __import__("yaml").safe_load(p.stdout)
    assert fact["recipe"] == "tiny" and fact["scripts"][0]["path"] == "tools/train.py"
    assert "megatron.training" in fact["scripts"][0]["modules"]
    # -o FILE writes that file (and only it); --check compares with it
    out = s["tmp"] / "tiny.imports.yaml"
    p = envbuild("imports", s["recipe"], "--git-mirror", s["mirror"], "-o", out)
    assert p.returncode == 0, p.stderr
    assert _package_files() == before
    assert out.read_text() == dump(fact) and f"wrote {out}" in "".join(p.stderr.split("\n"))
    assert envbuild("imports", s["recipe"], "--git-mirror", s["mirror"], "-o", out, "--check").returncode == 0
    out.write_text(out.read_text().replace("numpy", "numpy2"))
    p = envbuild("imports", s["recipe"], "--git-mirror", s["mirror"], "-o", out, "--check")
    assert p.returncode == 1 and f"out of date: {out}" in "".join(p.stderr.split("\n"))
    assert out.read_text().count("numpy2") == 1  # --check wrote nothing


def test_imports_all_names_its_folder(tmp_path):
    from support.clirun import envbuild

    p = envbuild("imports", "--all", "--git-mirror", str(tmp_path))
    assert p.returncode == 2 and "-o FOLDER" in p.stderr, p.stderr


def test_an_installed_envbuild_writes_no_import_facts_into_its_package(tmp_path, monkeypatch):
    """Installed (the package holds its playbooks: ``envbuild.shipped.INSTALLED``), ``-o`` into
    the package is refused (exit 2, naming what works) before any mirror is read."""
    from support.clirun import envbuild

    from envbuild import shipped

    monkeypatch.setattr(shipped, "INSTALLED", True)
    before = _package_files()
    p = envbuild("imports", "opt-175b-azure", "--git-mirror", str(tmp_path / "no-mirror"),
                 "-o", str(shipped.SCRIPT_IMPORTS / "opt-175b-azure.yaml"))
    assert p.returncode == 2 and "inside the installed envbuild package" in p.stderr, p.stderr
    assert "-o FILE" in p.stderr
    assert _package_files() == before
