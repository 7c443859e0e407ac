"""Source installs' own dependencies: read at the pinned commit, resolved, locked, installed.

Parsers on the shapes the five setups use (metaseq's literal install_requires, fairscale's
fetch_requirements(), ezpz's pyproject with git dependencies), then real git repositories the
test makes (a mirror with dated commits), a real uv resolution, and the shipped locks.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envbuild.facts.profile import from_target
from envbuild.lock import lock_path, make_lock, read_lock
from envbuild.lock.srcdeps import read_declared, requirements_txt, setup_py_requires, split
from envbuild.lock.srclock import source_dependencies
from envbuild.plan.build import build_plan
from envbuild.recipes import load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target
from support import paths

DATA = paths.DATA / "lock"

SETUP_LITERAL = '''
from setuptools import setup
setup(name="tool", install_requires=[
    "hydra-core>=1.1.0,<1.2",  # a comment
    'dataclasses; python_version<"3.7"',
    "sklearn",
])
'''
SETUP_NAMED = 'import setuptools\nREQS = ["six==1.16.0"]\nsetuptools.setup(name="x", install_requires=REQS)\n'
SETUP_READS_TXT = '''
from setuptools import setup
def fetch_requirements():
    with open("requirements.txt") as f:
        return [l.strip() for l in f]
setup(name="fs", install_requires=fetch_requirements())
'''


def test_setup_py_literal_and_computed_install_requires():
    assert setup_py_requires(SETUP_LITERAL)[0] == [
        "hydra-core>=1.1.0,<1.2", 'dataclasses; python_version<"3.7"', "sklearn"]
    assert setup_py_requires(SETUP_NAMED) == (["six==1.16.0"], False)
    assert setup_py_requires(SETUP_READS_TXT) == (None, True)
    files = {"setup.py": SETUP_READS_TXT, "requirements.txt": "# deps\ntorch >= 1.8.0\n-r dev.txt\n"}
    got = read_declared(files, "metadata")
    assert got.origin == "requirements.txt (read by setup.py)" and got.requirements == ("torch >= 1.8.0",)
    computed = read_declared({"setup.py": "from setuptools import setup\nsetup(install_requires=f())\n"},
                             "metadata")
    assert computed.origin is None and "not a literal" in computed.unread
    assert read_declared({"setup.py": SETUP_LITERAL}, "requirements").unread == \
        "no requirements.txt at this commit"
    assert requirements_txt("a==1  # pinned\n\n--index-url x\n-e .\nb\n") == ["a==1", "b"]


def test_split_evaluates_markers_for_the_target_and_finds_git_dependencies():
    reqs = ('dataclasses; python_version<"3.7"', "rich",
            "enrich @ git+https://github.com/saforem2/enrich",
            "pinned @ git+https://github.com/o/pinned.git@v1.2", "not a requirement !!")
    index, git, skipped = split(reqs, "3.9")
    assert [r.name for r in index] == ["rich"]
    assert [(g.name, g.url, g.ref) for g in git] == [
        ("enrich", "https://github.com/saforem2/enrich", None),
        ("pinned", "https://github.com/o/pinned", "v1.2")]
    assert any("marker false for Python 3.9" in s for s in skipped)
    assert any(s.startswith("not a requirement") for s in skipped)


# ---- real repositories ---------------------------------------------------------------------

def _git(*args: str, cwd: Path, date: str = "2023-06-01T12:00:00Z") -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org",
               GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _repo(root: Path, owner: str, name: str, commits: list[tuple[str, dict[str, str]]]) -> list[str]:
    """A repository under ``root/owner+name/repo`` (the fetch tool's layout), one commit per
    (date, files); returns the SHAs."""
    work = root / "work" / name
    work.mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=work)
    shas = []
    for date, files in commits:
        for rel, text in files.items():
            (work / rel).write_text(text)
        _git("add", "-A", cwd=work)
        _git("commit", "-q", "-m", f"state of {date}", cwd=work, date=date)
        shas.append(_git("rev-parse", "HEAD", cwd=work))
    _git("clone", "-q", "--bare", str(work), str(root / "mirror" / f"{owner}+{name}" / "repo"), cwd=root)
    return shas


def _recipe(sources: list[dict], packages: list[dict] | None = None, python: str = "3.11") -> Recipe:
    return Recipe.model_validate({
        "schema": 1, "name": "tiny", "title": "t", "description": "d",
        "published": {"url": "https://example.org"}, "python": python, "targets": ["lab"],
        "resolve_as_of": "2024-01-26",
        "packages": [{"why": "test", **p} for p in packages or []],
        "sources": [{"why": "test", "ref": "main", **s} for s in sources]})


@pytest.fixture
def mirror(tmp_path: Path) -> dict:
    """ezpz's shape: a tool whose pyproject names index packages and a git dependency without
    a ref; the dependency has a commit before the recipe's date and one after it."""
    tool = _repo(tmp_path, "acme", "tool", [("2024-01-20T10:00:00Z", {"pyproject.toml": (
        '[project]\nname = "tool"\ndynamic = ["version"]\n'
        'dependencies = ["six", "torch", "helper @ git+https://github.com/acme/helper"]\n')})])
    helper = _repo(tmp_path, "acme", "helper", [
        ("2023-12-29T10:00:00Z", {"pyproject.toml": '[project]\nname = "helper"\nversion = "0.1"\n'
                                                    'dependencies = ["packaging"]\n'}),
        ("2024-05-14T10:00:00Z", {"pyproject.toml": '[project]\nname = "helper"\nversion = "0.2"\n'
                                                    'dependencies = ["packaging", "requests"]\n'})])
    return {"dir": tmp_path / "mirror", "tool": tool[0], "helper_old": helper[0], "helper_new": helper[1]}


@pytest.mark.integration
def test_git_dependency_pinned_as_of_the_recipe_date_and_read_in_turn(mirror):
    rec = _recipe([{"name": "tool", "url": "https://github.com/acme/tool", "sha": mirror["tool"],
                    "install": "wheel"}],
                  packages=[{"name": "torch", "version": "2.0.1", "preinstalled": True}])
    got = source_dependencies(rec, mirror["dir"], lambda _m: None)
    [pin] = got.git
    assert (pin.name, pin.sha, pin.required_by, pin.verified) == (
        "helper", mirror["helper_old"], ["tool"], True)  # 2023-12-29, not the 2024-05 head
    assert "as of resolve_as_of 2024-01-26" in pin.note
    assert dict(got.requirements) == {"tool": ("six",), "helper": ("packaging",)}
    tool = next(d for d in got.declared if d.component == "tool")
    assert tool.origin == "pyproject.toml [project].dependencies"
    assert "torch: preinstalled" in tool.dropped
    assert any(d.startswith("helper @ git+") for d in tool.dropped)


@pytest.mark.integration
def test_without_the_commit_nothing_is_read_and_the_lock_says_so(mirror, tmp_path):
    rec = _recipe([{"name": "tool", "url": "https://github.com/acme/tool", "sha": "f" * 40,
                    "unverified": "test", "install": "editable"}])
    got = source_dependencies(rec, mirror["dir"], lambda _m: None)
    assert got.requirements == [] and got.git == []
    assert got.declared[0].unread == "not read: commit ffffffffffff is not in the mirror"
    none = source_dependencies(rec, None, lambda _m: None)
    assert none.declared[0].unread == "not read: no git mirror given (--git-mirror)"


@pytest.mark.integration
def test_lock_resolves_declared_dependencies_with_the_source_as_requirer(mirror, tmp_path, monkeypatch):
    """uv resolves the source's lines from their own input file: the lock says which source
    required each package, hashes included; the git dependency is a git pin."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    rec = _recipe([{"name": "tool", "url": "https://github.com/acme/tool", "sha": mirror["tool"],
                    "install": "wheel"}],
                  packages=[{"name": "torch", "version": "2.0.1", "preinstalled": True},
                            {"name": "six", "version": "1.16.0"}])
    lock = make_lock(rec, load_target(DATA / "lab.yaml"), git_mirror=mirror["dir"])
    six, packaging = lock.package("six"), lock.package("packaging")
    assert set(six.required_by) == {"recipe", "source:tool"} and six.version == "1.16.0"
    assert packaging.required_by == ["source:helper"] and packaging.dist.sha256 and packaging.verified
    assert lock.package("requests") is None  # helper's 2024-05 dependency is not in its pinned commit
    assert [(g.name, g.required_by) for g in lock.git] == [("tool", None), ("helper", ["tool"])]
    assert [d.component for d in lock.declared] == ["tool", "helper"]


# ---- the shipped locks and plans -----------------------------------------------------------

def test_shipped_opt_lock_holds_metaseq_install_requires():
    lock = read_lock(lock_path("opt-175b-azure", "local"))
    metaseq = next(d for d in lock.declared if d.component == "metaseq")
    assert metaseq.origin == "setup.py install_requires"
    assert metaseq.sha == load_recipe("opt-175b-azure").source("metaseq").sha
    hydra, omegaconf = lock.package("hydra-core"), lock.package("omegaconf")
    assert hydra.version.startswith("1.1.") and "source:metaseq" in hydra.required_by
    from packaging.version import Version

    assert Version(omegaconf.version) <= Version("2.1.1")
    assert lock.package("sklearn") is not None and all(
        p.dist and p.verified for p in lock.packages if p.name != "torch" or p.replaces)
    megatron = next(d for d in lock.declared if d.component == "megatron")
    assert megatron.unread and "not in the mirror" in megatron.unread  # fairseq_v3: no snapshot
    fairscale = next(d for d in lock.declared if d.component == "fairscale")
    assert fairscale.origin == "requirements.txt (read by setup.py)"


def test_shipped_polaris_lock_pins_ezpz_git_dependencies():
    lock = read_lock(lock_path("polaris-megatron-deepspeed", "polaris"))
    deps = {g.name: g for g in lock.git if g.required_by}
    assert set(deps) == {"ambivalent", "enrich"}
    for pin in deps.values():
        assert pin.verified and len(pin.sha) == 40 and pin.required_by == ["ezpz"]
        assert pin.commit_date[:10] <= lock.resolve_as_of
    assert "source:ezpz" in lock.package("jax").required_by
    assert "source:enrich" in lock.package("omegaconf").required_by


def test_plan_builds_git_dependencies_before_the_source():
    rec, tgt = load_recipe("polaris-megatron-deepspeed"), load_target("polaris")
    lock = read_lock(lock_path(rec.name, tgt.name))
    plan = build_plan(rec, tgt, from_target(tgt), lock)
    ids = [s.id for s in plan.steps]
    assert ids.index("install:ambivalent") < ids.index("install:ezpz")
    assert ids.index("install:enrich") < ids.index("install:ezpz")
    git = next(s for s in plan.steps if s.id == "git:enrich").params
    assert git.sha == next(g.sha for g in lock.git if g.name == "enrich")
    pip = next(s for s in plan.steps if s.id == "pip:packages").params
    assert pip.no_deps and any(r.name == "jax" for r in pip.requirements)


def test_source_variables_reach_the_pip_step_of_its_dependencies():
    rec, tgt = load_recipe("opt-175b-azure"), load_target("local")
    lock = read_lock(lock_path(rec.name, tgt.name))
    plan = build_plan(rec, tgt, from_target(tgt), lock)
    step = next(s for s in plan.pip_installs() if any(r.name == "sklearn" for r in s.params.requirements))
    assert step.params.env["SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL"] == "True"


def test_cpu_stand_in_is_recorded_and_planned_as_locked():
    """The local target's torch: PyPI's 1.10.1 stands in for 1.10.1+cpu (index unreachable)."""
    rec, tgt = load_recipe("opt-175b-azure"), load_target("local")
    lock = read_lock(lock_path(rec.name, tgt.name))
    torch = lock.package("torch")
    if torch.replaces is None:
        pytest.skip("the shipped lock was made where download.pytorch.org answered")
    assert torch.version == "1.10.1" and torch.replaces.startswith("1.10.1+cpu from ")
    plan = build_plan(rec, tgt, from_target(tgt), lock)
    step = next(s for s in plan.steps if s.id == "pip:torch").params
    assert step.requirements[0].requirement == "torch==1.10.1" and step.requirements[0].hashes
    assert any(d.subject == "torch-stand-in" for d in plan.decisions)


# ---- build requirements: sources build with --no-build-isolation ---------------------------

def test_build_requires_from_build_system_else_setuptools():
    from envbuild.lock.srcdeps import LEGACY_BUILD_REQUIRES, read_build_requires

    hatch = read_build_requires({"pyproject.toml": '[build-system]\nrequires = ["hatchling", '
                                                   '"hatch-vcs>=0.3"]\nbuild-backend = "hatchling.build"\n'})
    assert hatch.origin == "pyproject.toml [build-system].requires"
    assert hatch.requirements == ("hatchling", "hatch-vcs>=0.3")
    legacy = read_build_requires({"setup.py": SETUP_NAMED})
    assert legacy.requirements == LEGACY_BUILD_REQUIRES == ("setuptools>=40.8.0",)
    no_system = read_build_requires({"pyproject.toml": '[project]\nname = "x"\n'})
    assert no_system.requirements == LEGACY_BUILD_REQUIRES  # PEP 518's default backend
    assert read_build_requires({"requirements.txt": "six\n"}).unread  # nothing that pip builds


@pytest.mark.integration
def test_build_requirements_of_sources_and_git_dependencies_are_locked(tmp_path, monkeypatch):
    """ezpz's shape: the source builds with setuptools (setup.py), its git dependency with
    hatchling; both build without isolation, so the lock resolves hatchling (and its own
    dependencies) with hashes, names the build that needs it, and leaves out the tooling."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    tool = _repo(tmp_path, "acme", "tool", [("2024-01-20T10:00:00Z", {
        "setup.py": 'from setuptools import setup\nsetup(name="tool", install_requires='
                    '["helper @ git+https://github.com/acme/helper"])\n'})])
    _repo(tmp_path, "acme", "helper", [("2023-12-29T10:00:00Z", {"pyproject.toml": (
        '[build-system]\nrequires = ["hatchling==1.21.1", "torch"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "helper"\nversion = "0.1"\ndependencies = []\n')})])
    rec = _recipe([{"name": "tool", "url": "https://github.com/acme/tool", "sha": tool[0],
                    "install": "wheel"}],
                  packages=[{"name": "torch", "version": "2.0.1", "preinstalled": True}])
    got = source_dependencies(rec, tmp_path / "mirror", lambda _m: None, frozenset({"wheel"}))
    assert dict(got.build) == {"tool": ("setuptools>=40.8.0",), "helper": ("hatchling==1.21.1",)}
    helper = next(d for d in got.declared if d.component == "helper")
    assert helper.build_origin == "pyproject.toml [build-system].requires"
    assert helper.build_requires == ["hatchling==1.21.1"]  # torch: preinstalled, left out
    with_tooling = source_dependencies(rec, tmp_path / "mirror", lambda _m: None,
                                       frozenset({"setuptools"}))
    assert dict(with_tooling.build) == {"helper": ("hatchling==1.21.1",)}  # the tooling pins it

    lock = make_lock(rec, load_target(DATA / "lab.yaml"), git_mirror=tmp_path / "mirror")
    hatchling = lock.package("hatchling")
    assert hatchling.version == "1.21.1" and hatchling.required_by == ["build:helper"]
    assert hatchling.dist.sha256 and hatchling.verified
    assert "build:tool" in lock.package("setuptools").required_by
    assert "hatchling" in lock.package("pluggy").required_by  # hatchling's own dependency
