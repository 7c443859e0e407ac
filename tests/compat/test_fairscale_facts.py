"""The version fairscale declares at a commit (envbuild.compat.fairscale_facts) and its facts file.

The parser on real file texts: tests/data/fairscale_versions/<case>.json holds the lines of
fairscale/version.py and fairscale/__init__.py that declare the version at one commit of
facebookresearch/fairscale (read from the mirror with git show; only those lines), with the
expected fact. The reader on a git repository the test makes (mirror layout); the committed
facts against the real mirror when this machine has one (ENVBUILD_GIT_MIRROR), since CI has no
GitHub.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envbuild.compat import fairscale_facts as ff
from envbuild.errors import CheckFailed
from envbuild.recipes import all_recipes
from envbuild.recipes.schema import Recipe
from support.paths import DATA

CASES = sorted((DATA / "fairscale_versions").glob("*.json"))


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_declared_version_of_real_file_texts(case: Path):
    data = json.loads(case.read_text())
    got = ff.declared_version(data["files"])
    assert (list(got) if got else None) == data["expected"], data["source"]


def test_the_forms_fairscale_declares_its_version_in():
    assert ff.file_version('__version__ = "0.4.6"\n') == ("0.4.6", '__version__ = "0.4.6"')
    assert ff.file_version("__version_tuple__ = (0, 4, 6)\n") == ("0.4.6", "__version_tuple__ = (0, 4, 6)")
    # a literal __version__ wins over the tuple; a computed one is no declaration
    assert ff.file_version('__version_tuple__ = (0, 4, 3)\n__version__ = "0.4.3rc1"\n')[0] == "0.4.3rc1"
    assert ff.file_version('__version__ = ".".join(map(str, T))\n') is None
    assert ff.file_version("def f():\n    __version__ = '9'\n") is None  # module level only
    # version.py first (fairscale's __init__ imports its tuple from there), then __init__.py
    files = {"fairscale/version.py": "__version_tuple__ = (0, 4, 7)\n", "fairscale/__init__.py": '__version__ = "0"\n'}
    assert ff.declared_version(files)[:2] == ("0.4.7", "fairscale/version.py")
    with pytest.raises(CheckFailed, match=r"fairscale/version.py:1"):
        ff.file_version("__version_tuple__ = (\n", "fairscale/version.py")


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _recipe(sha: str) -> Recipe:
    return Recipe.model_validate({
        "schema": 1, "name": "tiny", "title": "t", "description": "d",
        "published": {"url": "https://example.org"}, "python": "3.11", "targets": ["lab"],
        "sources": [{"name": "fairscale", "url": "https://github.com/acme/fairscale", "ref": "main",
                     "sha": sha, "install": "none", "why": "test"}]})


@pytest.mark.integration
def test_reader_gets_the_version_at_each_commit(tmp_path: Path, monkeypatch):
    work = tmp_path / "work"
    (work / "fairscale").mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "fairscale" / "__init__.py").write_text('__version__ = "0.4.1"\n\nfrom . import nn\n')
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "old: __version__ in __init__.py", cwd=work)
    old = _git("rev-parse", "HEAD", cwd=work)
    (work / "fairscale" / "version.py").write_text("__version_tuple__ = (0, 4, 6)\n")
    (work / "fairscale" / "__init__.py").write_text(
        'from .version import __version_tuple__\n__version__ = ".".join([str(x) for x in __version_tuple__])\n')
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "new: version.py", cwd=work)
    new = _git("rev-parse", "HEAD", cwd=work)
    mirror = tmp_path / "mirror"
    _git("clone", "-q", "--bare", str(work), str(mirror / "acme+fairscale" / "repo"), cwd=tmp_path)
    repo = mirror / "acme+fairscale" / "repo"

    assert ff.declared_version(ff.read_at(repo, old)) == ("0.4.1", "fairscale/__init__.py", '__version__ = "0.4.1"')
    assert ff.declared_version(ff.read_at(repo, new)) == ("0.4.6", "fairscale/version.py",
                                                          "__version_tuple__ = (0, 4, 6)")
    monkeypatch.setattr(ff, "ALSO_READ", {})
    fact = ff.generate([_recipe(old), _recipe(new)], mirror)
    assert [(r["sha"], r["version"], r["path"], r["why"]) for r in fact["commits"]] == [
        (old, "0.4.1", "fairscale/__init__.py", "tiny pins it (main)"),
        (new, "0.4.6", "fairscale/version.py", "tiny pins it (main)")]
    assert ff.dump(fact).startswith("# DO NOT EDIT") and "--git-mirror DIR" in ff.dump(fact)
    with pytest.raises(CheckFailed, match="is not in"):
        ff.generate([_recipe("f" * 40)], mirror)


def test_every_shipped_fairscale_pin_has_its_row():
    facts = ff.load()
    assert set(ff.ALSO_READ) <= set(facts)
    for rec in all_recipes():
        for src in rec.sources:
            if ff.cm.is_fairscale(src):
                row = facts.get(src.sha or "")
                assert row is not None, f"{rec.name}: no row for fairscale {src.sha}: run {ff.REGENERATE}"
                assert row.path in ff.PATHS and row.version and row.repo == src.url


@pytest.mark.integration
def test_committed_facts_are_what_the_mirror_gives():
    mirror = os.environ.get("ENVBUILD_GIT_MIRROR")
    if not mirror or not Path(mirror).is_dir():
        pytest.skip("no git mirror of facebookresearch/fairscale here (CI has no GitHub): "
                    "set ENVBUILD_GIT_MIRROR to re-read the versions")
    assert ff.dump(ff.generate(all_recipes(), Path(mirror))) == ff.FACT_PATH.read_text(), \
        f"{ff.FACT_PATH} is stale: run {ff.REGENERATE}"
