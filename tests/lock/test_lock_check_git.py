"""`envbuild lock --check --git-mirror DIR` re-verifies every git pin in repositories the test makes:
a commit gone from its repository, a required ancestor that no longer holds, a branch or tag
that no longer contains the pin (problems, exit 1); a branch or tag past the pin that still
contains it, as `lock` accepts it, a ref or repository the mirror lacks (notices, exit 0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.lock import read_lock
from envbuild.lock.gitcheck import recheck_git, recheck_pin
from envbuild.lock.schema import LockedGit
from support import paths
from support.gitrepo import add_commit, git

pytestmark = pytest.mark.integration

DATA = paths.DATA / "lock"
LAB = str(DATA / "lab.yaml")
URL = "https://github.com/acme/widget"


DATE = "2022-05-04T08:46:00Z"  # every commit's and tag's


def _commit(work: Path, name: str) -> str:
    return add_commit(work, {name: name + "\n"}, name, date=DATE)


@pytest.fixture
def repo(tmp_path: Path) -> dict:
    """work: main = base -> pin -> later; side branch from base; tag v1 at pin."""
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work, date=DATE)
    base = _commit(work, "base")
    pin = _commit(work, "pin")
    git("tag", "v1", cwd=work, date=DATE)
    later = _commit(work, "later")
    git("checkout", "-qb", "side", base, cwd=work, date=DATE)
    side = _commit(work, "side")
    git("checkout", "-q", "main", cwd=work, date=DATE)
    return {"work": work, "base": base, "pin": pin, "later": later, "side": side, "tmp": tmp_path}


def _mirror(repo: dict, *clone_args: str) -> Path:
    root = repo["tmp"] / "mirror"
    shutil.rmtree(root, ignore_errors=True)
    (root / "acme").mkdir(parents=True)
    git("clone", "-q", "--bare", "--no-local", *clone_args, str(repo["work"]), str(root / "acme" / "widget.git"),
        cwd=repo["tmp"], date=DATE)
    return root


def _pin(sha: str, ref: str = "main", verified: bool = True) -> LockedGit:
    return LockedGit(name="widget", url=URL, ref=ref, sha=sha, verified=verified,
                     reason=None if verified else "not verified: test")


def test_branch_moved_on_past_the_pin_is_a_notice(repo):
    bare = _mirror(repo) / "acme" / "widget.git"
    problems, notices = recheck_pin(_pin(repo["pin"]), [repo["base"]], bare)
    assert problems == []
    assert notices == [f"git widget: branch main has moved from the pin {repo['pin'][:12]} to "
                       f"{repo['later'][:12]} (1 commits ahead); the pin is still on it"]


def test_branch_at_the_pin_says_nothing(repo):
    bare = _mirror(repo) / "acme" / "widget.git"
    assert recheck_pin(_pin(repo["later"]), [repo["base"], repo["pin"]], bare) == ([], [])


def test_vanished_commit_is_a_problem(repo):
    # the mirror has only 'side': the pin on main never reached it (a deleted fork branch)
    bare = _mirror(repo, "--single-branch", "--branch", "side", "--no-tags") / "acme" / "widget.git"
    problems, _ = recheck_pin(_pin(repo["pin"], ref="main"), [], bare)
    assert problems == [f"git widget: the locked commit {repo['pin']} is no longer in {URL} "
                        f"(mirror {bare}): rewritten history or a deleted branch"]
    # an unverified pin stays what the lock says it is: a notice, not a new failure
    problems, notices = recheck_pin(_pin(repo["pin"], verified=False), [], bare)
    assert problems == [] and "still not in the mirror" in notices[0]


def test_force_pushed_branch_no_longer_contains_the_pin(repo):
    git("reset", "-q", "--hard", repo["side"], cwd=repo["work"], date=DATE)  # rewrite main; pin kept by tag v1
    bare = _mirror(repo) / "acme" / "widget.git"
    problems, _ = recheck_pin(_pin(repo["pin"]), [], bare)
    assert problems == [f"git widget: branch main now points at {repo['side'][:12]}, which does not "
                        f"contain the pinned {repo['pin'][:12]} (moved tag, force-push or rebase)"]


def test_tag_that_no_longer_contains_the_pin_is_a_problem(repo):
    bare = _mirror(repo) / "acme" / "widget.git"
    assert recheck_pin(_pin(repo["pin"], ref="v1"), [], bare) == ([], [])
    git("tag", "-f", "v1", repo["side"], cwd=repo["work"], date=DATE)
    bare = _mirror(repo) / "acme" / "widget.git"
    problems, _ = recheck_pin(_pin(repo["pin"], ref="v1"), [], bare)
    assert problems == [f"git widget: tag v1 now points at {repo['side'][:12]}, which does not "
                        f"contain the pinned {repo['pin'][:12]} (moved tag, force-push or rebase)"]


def test_tag_whose_history_contains_the_pin_is_a_notice(repo):
    # issue 49: a release tag past the pinned commit (`lock` accepts it) failed `lock --check`
    git("tag", "-a", "-m", "release", "v2", repo["later"], cwd=repo["work"], date=DATE)  # annotated
    bare = _mirror(repo) / "acme" / "widget.git"
    problems, notices = recheck_pin(_pin(repo["pin"], ref="v2"), [repo["base"]], bare)
    assert problems == []
    assert notices == [f"git widget: tag v2 points past the pin {repo['pin'][:12]} to "
                       f"{repo['later'][:12]} (1 commits ahead); the pin is still on it"]


@pytest.mark.parametrize("ref", ["main", "side", "v1", "v2", "v3"])
@pytest.mark.parametrize("which", ["base", "pin", "later", "side"])
def test_lock_and_lock_check_accept_the_same_pins(repo, ref, which):
    """`lock` (gitpins.lock_from_mirror) accepts a pin on a ref exactly when `lock --check`
    (recheck_pin) finds no problem with it: one rule, for branches and tags alike."""
    from envbuild.errors import CheckFailed
    from envbuild.lock.gitpins import lock_from_mirror
    from envbuild.recipes.schema import GitSource

    git("tag", "-a", "-m", "release", "v2", repo["later"], cwd=repo["work"], date=DATE)
    git("tag", "v3", repo["side"], cwd=repo["work"], date=DATE)
    bare = _mirror(repo) / "acme" / "widget.git"
    sha = repo[which]
    src = GitSource(name="widget", url=URL, ref=ref, sha=sha, why="w")
    try:
        locked = lock_from_mirror(src, bare)
    except CheckFailed:
        accepted = False
    else:
        accepted = locked.verified and locked.sha == sha
    problems, _ = recheck_pin(_pin(sha, ref=ref), [], bare)
    assert accepted == (problems == []), (ref, which, problems)
    expected = {("main", "base"), ("main", "pin"), ("main", "later"), ("side", "base"), ("side", "side"),
                ("v1", "base"), ("v1", "pin"), ("v2", "base"), ("v2", "pin"), ("v2", "later"),
                ("v3", "base"), ("v3", "side")}
    assert accepted == ((ref, which) in expected)


def test_required_ancestor_that_does_not_hold(repo):
    bare = _mirror(repo) / "acme" / "widget.git"
    problems, _ = recheck_pin(_pin(repo["pin"]), [repo["side"]], bare)
    assert problems == [f"git widget: required ancestor {repo['side']} is not an ancestor of the "
                        f"locked {repo['pin']}"]
    missing = "0" * 40
    problems, _ = recheck_pin(_pin(repo["pin"]), [missing], bare)
    assert "absent, so not an ancestor of" in problems[0]


def test_ref_gone_but_commit_kept_is_a_notice(repo):
    bare = _mirror(repo) / "acme" / "widget.git"
    problems, notices = recheck_pin(_pin(repo["side"], ref="gone-branch"), [], bare)
    assert problems == []
    assert notices == [f"git widget: ref 'gone-branch' is gone from {URL}; the pinned commit "
                       f"{repo['side'][:12]} is still there"]


def test_repository_absent_from_the_mirror_is_a_notice(repo, tmp_path):
    from envbuild.recipes.schema import Recipe

    lock = read_lock_stub(_pin(repo["pin"]))
    recipe = Recipe.model_validate({
        "schema": 1, "name": "tiny", "title": "t", "description": "d", "published": {"url": "u"},
        "python": "3.9", "targets": ["lab"],
        "sources": [{"name": "widget", "url": URL, "ref": "main", "sha": repo["pin"], "why": "w"}]})
    (tmp_path / "empty").mkdir()
    problems, notices = recheck_git(lock, recipe, tmp_path / "empty")
    assert problems == [] and notices == [f"git widget: not re-verified: no mirror of {URL} under {tmp_path / 'empty'}"]


def read_lock_stub(pin: LockedGit):
    from envbuild.lock.schema import Lock, Named, PlatformInfo

    return Lock(recipe=Named(name="tiny", digest="x"), target=Named(name="lab", digest="y"), python="3.9",
                platform=PlatformInfo(python_platform="x86_64-manylinux_2_31", tags=[]),
                envbuild_version="0", git=[pin])


# --- the command line, with a real lock made by `envbuild lock` --------------------------------

@pytest.fixture
def cli_setup(repo, tmp_path, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "envbuild-cache"))
    monkeypatch.delenv("ENVBUILD_GIT_MIRROR", raising=False)
    recipe = tmp_path / "tiny.yaml"
    text = (DATA / "recipe.yaml.in").read_text()
    git("checkout", "-qb", "feature", repo["pin"], cwd=repo["work"], date=DATE)
    for key, value in {"{sha}": repo["pin"], "{base}": repo["base"], "{python}": "3.9",
                       "{six}": "1.16.0"}.items():
        text = text.replace(key, value)
    recipe.write_text(text)
    mirror = _mirror(repo)
    lockdir = tmp_path / "locks"
    args = ["lock", str(recipe), "--target", LAB, "--lockdir", str(lockdir)]
    assert main([*args, "--git-mirror", str(mirror)]) == 0
    assert read_lock(lockdir / "tiny" / "lab.lock").git_pin("widget").verified
    return {**repo, "args": args, "mirror": mirror}


def test_cli_check_with_mirror_sees_a_moved_branch_and_a_vanished_commit(cli_setup, capsys):
    s = cli_setup
    capsys.readouterr()
    assert main([*s["args"], "--check", "--git-mirror", str(s["mirror"]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["results"][0]["notices"] == []
    _commit(s["work"], "feature-moves-on")  # the branch moves on past the pin: still fine, said
    _mirror(s)
    assert main([*s["args"], "--check", "--git-mirror", str(s["mirror"]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "branch feature has moved from the pin" in out["results"][0]["notices"][0]
    # the fork drops the branch and rewrites history: the pin is gone from the repository
    _mirror(s, "--single-branch", "--branch", "side", "--no-tags")
    assert main([*s["args"], "--check"]) == 0  # without the mirror nothing can tell
    capsys.readouterr()
    assert main([*s["args"], "--check", "--git-mirror", str(s["mirror"])]) == 1
    err = capsys.readouterr().err
    assert f"the locked commit {s['pin']} is no longer in {URL}" in err
    assert f"required ancestor {s['base']}" not in err  # base is still in the mirror (side's parent)
