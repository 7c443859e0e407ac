"""A source names its requirements files (``requirements: [requirements/requirements.txt]``): the
lock reads those at the pinned commit (DeeperSpeed's, which its setup.py reads through a
function, were "no requirements.txt at this commit" before); paths stay inside the source."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envbuild.lock.srcdeps import read_declared
from envbuild.lock.srclock import dependency_mode, source_dependencies
from envbuild.recipes.schema import GitSource, Recipe

SHA = "e" * 40


def _source(**fields) -> dict:
    return {"name": "deeperspeed", "url": "https://github.com/EleutherAI/DeeperSpeed", "ref": "main", "sha": SHA,
            "install": "wheel", "why": "t", **fields}


def test_named_files_are_read_in_requirements_mode():
    files = {"requirements/requirements.txt": "hjson\nninja  # build\n", "requirements/extra.txt": "psutil\n"}
    got = read_declared(files, "requirements", ("requirements/requirements.txt", "requirements/extra.txt"))
    assert got.origin == "requirements/requirements.txt, requirements/extra.txt"
    assert got.requirements == ("hjson", "ninja", "psutil")
    assert read_declared(files, "requirements").unread == "no requirements.txt at this commit"
    assert read_declared(files, "requirements", ("requirements/requirements.txt", "x.txt")).unread == \
        "no x.txt at this commit"


def test_naming_files_implies_requirements_mode_and_paths_stay_inside():
    src = GitSource.model_validate(_source(requirements=["requirements/requirements.txt"]))
    assert dependency_mode(src) == "requirements"
    assert dependency_mode(GitSource.model_validate(_source())) == "metadata"
    assert "requirements" not in GitSource.model_validate(_source()).model_dump()  # digests of old recipes unchanged
    for bad in ("../etc/passwd", "/etc/passwd", "requirements/../../x.txt", "", "a//b.txt"):
        with pytest.raises(ValueError, match="paths inside the source tree"):
            GitSource.model_validate(_source(requirements=[bad]))
    with pytest.raises(ValueError, match="dependencies: requirements, not 'metadata'"):
        GitSource.model_validate(_source(requirements=["requirements.txt"], dependencies="metadata"))


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.integration
def test_lock_reads_the_named_file_at_the_pin(tmp_path):
    work = tmp_path / "DeeperSpeed"
    (work / "requirements").mkdir(parents=True)
    (work / "setup.py").write_text("from setuptools import setup\n"
                                   "setup(install_requires=fetch_requirements('requirements/requirements.txt'))\n")
    (work / "requirements" / "requirements.txt").write_text("hjson\nninja\n")
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "x", cwd=work)
    sha = _git("rev-parse", "HEAD", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "mirror" / "EleutherAI+DeeperSpeed" / "repo"), cwd=tmp_path)

    def recipe(**fields) -> Recipe:
        return Recipe.model_validate({"schema": 1, "name": "neox", "title": "t", "description": "d",
                                      "published": {"url": "https://example.org"}, "python": "3.8",
                                      "targets": ["local"], "sources": [_source(sha=sha, **fields)]})

    named = source_dependencies(recipe(requirements=["requirements/requirements.txt"]), tmp_path / "mirror",
                                lambda _m: None)
    assert named.requirements == [("deeperspeed", ("hjson", "ninja"))]
    assert named.declared[0].origin == "requirements/requirements.txt"
    before = source_dependencies(recipe(), tmp_path / "mirror", lambda _m: None)  # what the lock did without it
    assert before.requirements == [] and "computes install_requires" in before.declared[0].unread
    guessed = source_dependencies(recipe(dependencies="requirements"), tmp_path / "mirror", lambda _m: None)
    assert guessed.declared[0].unread == "no requirements.txt at this commit"
