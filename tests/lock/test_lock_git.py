"""Git pins against real repositories laid out as a mirror (OWNER/NAME.git, bare)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from envbuild import gitsrc
from envbuild.errors import CheckFailed, InputError
from envbuild.lock.gitpins import lock_git
from envbuild.recipes.schema import GitSource
from support.gitrepo import add_commit, git

pytestmark = pytest.mark.integration

URL = "https://github.com/acme/widget"
DATE = "2021-10-07T16:07:01-07:00"  # every commit's (test_ancestry_and_commit_info reads it back)


def _commit(work: Path, name: str, subject: str) -> str:
    return add_commit(work, {name: subject + "\n"}, subject, date=DATE)


@pytest.fixture
def mirror(tmp_path: Path) -> dict:
    """A work repo (main: base; feature: base + 2 commits; orphan branch) and its bare mirror."""
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work, date=DATE)
    base = _commit(work, "a.txt", "upstream base")
    git("tag", "v1", cwd=work, date=DATE)
    git("checkout", "-q", "-b", "feature", cwd=work, date=DATE)
    _commit(work, "b.txt", "fix embedding")
    head = _commit(work, "c.txt", "currently disable tie embedding")
    git("checkout", "-q", "--orphan", "unrelated", cwd=work, date=DATE)
    other = _commit(work, "d.txt", "unrelated history")
    root = tmp_path / "mirror"
    (root / "acme").mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(root / "acme" / "widget.git"), cwd=tmp_path, date=DATE)
    return {"root": root, "repo": root / "acme" / "widget.git", "base": base, "head": head, "other": other}


def _src(**kw) -> GitSource:
    data = {"name": "widget", "url": URL, "ref": "feature", "why": "test"}
    data.update(kw)
    return GitSource(**data)


def test_mirror_path_layouts(mirror, tmp_path):
    assert gitsrc.mirror_path(URL, mirror["root"]) == mirror["repo"]
    assert gitsrc.mirror_path(URL + ".git", mirror["root"]) == mirror["repo"]
    plain = tmp_path / "plain"
    git("clone", "-q", str(mirror["repo"]), str(plain / "acme" / "widget"), cwd=tmp_path, date=DATE)
    assert gitsrc.mirror_path(URL, plain) == plain / "acme" / "widget"
    assert gitsrc.mirror_path("https://github.com/acme/absent", mirror["root"]) is None
    assert gitsrc.mirror_path("https://gitlab.com/acme/widget", mirror["root"]) is None
    assert gitsrc.mirror_path(URL, None) is None


def test_resolve_ref_branch_tag_sha(mirror):
    repo = mirror["repo"]
    assert gitsrc.resolve_ref(repo, "feature") == mirror["head"]
    assert gitsrc.resolve_ref(repo, "main") == mirror["base"]
    assert gitsrc.resolve_ref(repo, "v1") == mirror["base"]
    assert gitsrc.resolve_ref(repo, mirror["head"][:10]) == mirror["head"]
    with pytest.raises(InputError) as err:
        gitsrc.resolve_ref(repo, "no-such-branch")
    assert "feature" in err.value.hint  # lists the branches that exist


def test_ancestry_and_commit_info(mirror):
    repo = mirror["repo"]
    assert gitsrc.is_ancestor(repo, mirror["base"], mirror["head"])
    assert not gitsrc.is_ancestor(repo, mirror["head"], mirror["base"])
    assert not gitsrc.is_ancestor(repo, mirror["other"], mirror["head"])
    assert not gitsrc.is_ancestor(repo, "0" * 40, mirror["head"])
    date, subject = gitsrc.commit_info(repo, mirror["head"])
    assert subject == "currently disable tie embedding"
    assert date.startswith("2021-10-07T16:07:01")


def test_lock_verified_with_ancestor(mirror):
    locked = lock_git(_src(sha=mirror["head"], requires_ancestors=[mirror["base"]]), mirror["root"])
    assert locked.verified and locked.sha == mirror["head"]
    assert locked.ancestors_checked == [mirror["base"]]
    assert locked.subject == "currently disable tie embedding"


def test_lock_branch_without_pinned_sha_is_rejected_by_schema():
    with pytest.raises(ValueError):
        _src()  # the recipe schema demands a sha or an 'unverified' reason


def test_pinned_sha_not_on_ref_names_both(mirror):
    with pytest.raises(CheckFailed) as err:
        lock_git(_src(sha=mirror["other"]), mirror["root"])
    msg = err.value.message
    assert mirror["head"] in msg and mirror["other"] in msg and "not on that ref" in msg


def test_branch_moved_on_past_pin_locks_the_pin(mirror):
    locked = lock_git(_src(ref="feature", sha=mirror["base"]), mirror["root"])
    assert locked.verified and locked.sha == mirror["base"]
    assert "moved on" in locked.note and locked.subject == "upstream base"


def test_required_ancestor_absent(mirror):
    with pytest.raises(CheckFailed) as err:
        lock_git(_src(sha=mirror["head"], requires_ancestors=[mirror["other"]]), mirror["root"])
    assert mirror["other"] in err.value.message and "not an ancestor" in err.value.message


def test_repo_absent_from_given_mirror_is_unverified_without_network(mirror):
    src = _src(url="https://github.com/acme/absent", sha=mirror["head"])
    started = time.monotonic()
    locked = lock_git(src, mirror["root"])
    assert time.monotonic() - started < 2  # never went to github.com
    assert not locked.verified and locked.sha == mirror["head"]
    assert locked.reason.startswith("not verified: no mirror for https://github.com/acme/absent")


def test_no_mirror_falls_back_fast_to_unverified(mirror):
    started = time.monotonic()
    locked = lock_git(_src(sha=mirror["head"]), None)
    assert time.monotonic() - started < gitsrc.LS_REMOTE_TIMEOUT + 5
    assert not locked.verified and locked.sha == mirror["head"]
    assert locked.reason.startswith(f"not verified: no mirror for {URL}")


def test_recipe_marked_unverified_keeps_pin_when_mirror_lacks_ref(mirror):
    src = _src(ref="fairseq_v3", sha="f" * 40, unverified="branch head not established")
    locked = lock_git(src, mirror["root"])
    assert not locked.verified and locked.sha == "f" * 40
    assert "branch head not established" in locked.reason


def test_mirror_lacking_ref_and_commit_records_unverified(mirror):
    locked = lock_git(_src(ref="fairseq_v3", sha="a" * 40), mirror["root"])
    assert not locked.verified and locked.sha == "a" * 40
    assert locked.reason.startswith("not verified: neither ref fairseq_v3 nor the pinned commit")


def test_mirror_lacking_ref_but_holding_commit_is_unverified(mirror):
    """A commit of another branch planted as the pin of a branch the mirror lacks (issue 21: a
    2020 commit of ``fairseq`` pinned as ``fairseq_v3`` locked as verified): the mirror cannot
    tell whether the commit is on the ref, so the pin stays unverified, saying why."""
    locked = lock_git(_src(ref="fairseq_v3", sha=mirror["other"]), mirror["root"])
    assert not locked.verified and locked.sha == mirror["other"]
    assert locked.reason.startswith("not verified: ref fairseq_v3 is not in the mirror")
    assert locked.commit_date  # the commit is there: its date and subject are still recorded


def test_mirror_lacking_ref_still_refuses_a_missing_required_ancestor(mirror):
    with pytest.raises(CheckFailed, match="required ancestor"):
        lock_git(_src(ref="gone-branch", sha=mirror["other"], requires_ancestors=[mirror["base"]]), mirror["root"])
    locked = lock_git(_src(ref="gone-branch", sha=mirror["head"], requires_ancestors=[mirror["base"]]),
                      mirror["root"])
    assert not locked.verified and locked.ancestors_checked == [mirror["base"]]
