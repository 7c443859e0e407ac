"""A source whose git mirror lacks some documents of the pinned commit (GitSource.without):
the bundle packs the rest, the node checks the tree out without them (real git, no network).

metaseq's snapshot lacks its two OPT logbook PDFs, so opt-175b-azure-h100 could not be bundled
before (``git fetch`` of the commit from the mirror died on the missing blobs).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from envbuild.bundle import gitpack
from envbuild.errors import CheckFailed
from envbuild.node import actions as node_actions
from envbuild.recipes import load_recipe
from envbuild.recipes.schema import GitSource


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd), "PATH": "/usr/bin:/bin",
                               "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


@pytest.fixture
def gappy_mirror(tmp_path):
    """A bare mirror whose pinned commit has code.py and docs/log.pdf, the PDF's blob removed
    (as the metaseq snapshot lacks its logbooks), and a parent commit."""
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "code.py").write_text("x = 1\n")
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "first", cwd=work)
    (work / "docs").mkdir()
    (work / "docs" / "log.pdf").write_bytes(b"%PDF-1.4 big document\n")
    (work / "code.py").write_text("x = 2\n")
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "second", cwd=work)
    sha = _git("rev-parse", "HEAD", cwd=work)
    pdf = _git("rev-parse", "HEAD:docs/log.pdf", cwd=work)
    mirror = tmp_path / "mirror.git"
    _git("clone", "-q", "--bare", "--no-local", str(work), str(mirror), cwd=tmp_path)
    _git("repack", "-a", "-d", "-q", cwd=mirror)
    # unpack, then drop the PDF's object: a snapshot that left the file out
    packs = list((mirror / "objects" / "pack").glob("*.pack"))
    for pack in packs:
        moved = tmp_path / pack.name
        shutil.move(str(pack), moved)
        pack.with_suffix(".idx").unlink()
        subprocess.run(["git", "unpack-objects", "-q"], cwd=mirror, stdin=moved.open("rb"), check=True)
    (mirror / "objects" / pdf[:2] / pdf[2:]).unlink()
    return {"mirror": mirror, "sha": sha, "tmp": tmp_path}


def test_the_mirror_lacks_the_document(gappy_mirror):
    assert gitpack.absent_blobs(gappy_mirror["mirror"], gappy_mirror["sha"]) == ["docs/log.pdf"]


def test_a_lacking_file_not_declared_is_refused(gappy_mirror):
    with pytest.raises(CheckFailed, match="lacks 1 file.*docs/log.pdf"):
        gitpack.shallow_repo(gappy_mirror["mirror"], gappy_mirror["sha"], "main", gappy_mirror["tmp"] / "b.git")


def test_bundle_repo_without_the_document_checks_out_on_the_node(gappy_mirror):
    sha, tmp = gappy_mirror["sha"], gappy_mirror["tmp"]
    repo = gitpack.shallow_repo(gappy_mirror["mirror"], sha, "main", tmp / "bundle" / "src.git",
                                without=["docs/log.pdf"])
    assert _git("rev-parse", "refs/heads/main", cwd=repo) == sha
    action = {"op": "git", "fetch_url": str(repo), "url": "https://example.invalid/src", "ref": "main",
              "sha": sha, "dest": str(tmp / "node" / "src"), "without": ["docs/log.pdf"]}
    result = node_actions.run_actions([action])
    dest = tmp / "node" / "src"
    assert result["changed"] and _git("rev-parse", "HEAD", cwd=dest) == sha
    assert (dest / "code.py").read_text() == "x = 2\n" and not (dest / "docs" / "log.pdf").exists()
    assert not node_actions.run_actions([action])["changed"]  # the second provision: nothing to do
    with pytest.raises(node_actions.ActionFailed):  # without the sparse checkout git needs the blob
        node_actions.run_actions([dict(action, dest=str(tmp / "node" / "plain"), without=[])])


def test_only_documents_may_be_left_out():
    base = {"name": "s", "url": "https://github.com/o/s", "ref": "main", "sha": "0" * 40, "why": "w"}
    assert GitSource(**base, without=["projects/a.pdf"]).without == ["projects/a.pdf"]
    for bad in ("metaseq/train.py", "../a.pdf", "/a.pdf", "docs/*.pdf"):
        with pytest.raises(ValueError):
            GitSource(**base, without=[bad])


def test_metaseq_of_the_opt_variant_names_the_two_logbooks():
    src = load_recipe("opt-175b-azure-h100").source("metaseq")
    assert sorted(src.without) == ["projects/OPT/chronicles/OPT175B_Logbook.pdf",
                                   "projects/OPT/chronicles/OPT_Baselines_Logbook.pdf"]
