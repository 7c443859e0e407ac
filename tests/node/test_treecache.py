"""A source's in-tree build outputs, saved once per key and restored into a fresh checkout
(envbuild.node.treecache, the node side of tree_restore.yml / tree_save.yml): real ninja and gcc
find the restored outputs up to date, and rebuild where an input really changed."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from envbuild.node import treecache



def _ninja_version() -> tuple[int, ...]:
    if not shutil.which("ninja"):
        return ()
    out = subprocess.run(["ninja", "--version"], capture_output=True, text=True).stdout
    return tuple(int(p) for p in out.strip().split(".")[:2] if p.isdigit())


# the tests that build: the archive's and the links' refusals need neither
needs_ninja = pytest.mark.skipif(not (_ninja_version() >= (1, 12) and shutil.which("gcc")),
                                 reason="needs gcc and ninja >= 1.12 on PATH (the test venv's, requirements/dev.lock)")

OUTPUTS = ["kernels/build"]
NINJA = """\
rule cc
  command = gcc -MMD -MF $out.d -fPIC -I{root}/kernels -c {root}/kernels/k.c -o $out
  depfile = $out.d
  deps = gcc
rule link
  command = gcc -shared $in -o $out
build k.o: cc {root}/kernels/k.c
build k.so: link k.o
default k.so
"""


def _checkout(root: Path) -> None:
    """A fresh checkout of the tree: the sources only, every file written now."""
    (root / "kernels" / "build").mkdir(parents=True)
    (root / "kernels" / "k.h").write_text("#define SCALE 3\n")
    (root / "kernels" / "k.c").write_text('#include "k.h"\nint scale(int x) { return SCALE * x; }\n')
    (root / "README").write_text("a tree\n")
    (root / "kernels" / "build" / "build.ninja").write_text(NINJA.format(root=root))


def _ninja(root: Path) -> str:
    return subprocess.run(["ninja", "-C", str(root / "kernels" / "build")], capture_output=True, text=True,
                          check=True).stdout


def _built(tmp_path: Path) -> tuple[Path, Path]:
    """A first node's tree, built, and its archive saved at the stash."""
    first = tmp_path / "node1" / "src"
    _checkout(first)
    assert "gcc -shared" in _ninja(first)
    stash = tmp_path / "node1" / "tree-kern-k" / "outputs.tar"
    said = treecache.save(str(stash), str(first), OUTPUTS)
    assert said.startswith("build outputs (tree-kern-k): ") and "saved for the next node" in said
    return first, stash


def _restored(tmp_path: Path) -> tuple[Path, Path]:
    """The next node's tree: the first node's build saved, the tree checked out again at the
    same path, its outputs restored from the stash."""
    first, stash = _built(tmp_path)
    shutil.rmtree(first)
    _checkout(first)
    treecache.restore(str(stash), str(first), OUTPUTS)
    return first, stash


@needs_ninja
def test_outputs_restored_into_a_newer_checkout_are_up_to_date_for_ninja(tmp_path):
    first, stash = _built(tmp_path)
    time.sleep(0.05)
    # the next node: the same tree at the same path (the key holds it), checked out later
    shutil.rmtree(first)
    _checkout(first)
    assert "gcc" in subprocess.run(["ninja", "-n", "-C", str(first / "kernels" / "build")],
                                   capture_output=True, text=True, check=True).stdout  # without: a rebuild
    restored, said = treecache.restore(str(stash), str(first), OUTPUTS)
    assert restored and said.startswith("build outputs (tree-kern-k): 5 file(s) of kernels/build restored from the build cache")
    assert "ninja: no work to do." in _ninja(first)
    # the stash stays, so the step's save keeps the cache's archive, and says ninja wrote none of it again
    assert treecache.save(str(stash), str(first), OUTPUTS) == (
        "build outputs (tree-kern-k): the cached archive outputs.tar stays (restored before the build); "
        "none of its 5 file(s) changed after the restore")


@needs_ninja
def test_an_input_changed_after_the_restore_is_rebuilt(tmp_path):
    first, stash = _restored(tmp_path)
    (first / "kernels" / "k.h").write_text("#define SCALE 4\n")  # a header, known from ninja's deps log
    assert "gcc -shared" in _ninja(first)


@needs_ninja
def test_the_save_after_a_restore_names_what_the_build_wrote_again(tmp_path):
    first, stash = _restored(tmp_path)
    time.sleep(0.05)
    (first / "kernels" / "k.h").write_text("#define SCALE 4\n")
    manifest = first / "kernels" / "build" / "build.ninja"
    manifest.write_text(manifest.read_text())  # written again, as torch writes it, with the same bytes
    assert "gcc -shared" in _ninja(first)
    said = treecache.save(str(stash), str(first), OUTPUTS)
    assert said == ("build outputs (tree-kern-k): the cached archive outputs.tar stays (restored before the build); "
                    "4 of its 5 file(s) changed after the restore: kernels/build/.ninja_deps, "
                    "kernels/build/.ninja_log, kernels/build/k.o, kernels/build/k.so; "
                    "written again with the same bytes: kernels/build/build.ninja")


@needs_ninja
def test_a_changed_command_line_is_rebuilt(tmp_path):
    """ninja's log travels with the folder: a command line it did not record is built again."""
    first, stash = _restored(tmp_path)
    ninja = first / "kernels" / "build" / "build.ninja"
    ninja.write_text(ninja.read_text().replace("-fPIC", "-fPIC -O2"))
    assert "-O2" in _ninja(first)


def test_nothing_cached_the_build_makes_them_and_a_build_that_made_none_saves_nothing(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    stash = tmp_path / "tree-kern-k" / "outputs.tar"
    assert treecache.restore(str(stash), str(root), OUTPUTS) == (
        False, "build outputs (tree-kern-k): none cached for this key, the build makes them")
    assert treecache.save(str(stash), str(root), OUTPUTS) == (
        "build outputs (tree-kern-k): not saved, the build made no kernels/build")
    assert not stash.exists() and not stash.parent.exists()


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)


@pytest.mark.parametrize("name, kind", [("kernels/other/x.so", tarfile.REGTYPE),
                                        ("kernels/build/../../evil", tarfile.REGTYPE),
                                        ("/etc/evil", tarfile.REGTYPE),
                                        ("kernels/build/link", tarfile.SYMTYPE)])
def test_an_archive_with_a_member_outside_the_outputs_or_a_link_is_refused_before_writing(tmp_path, name, kind):
    root = tmp_path / "src"
    _checkout(root)
    keep = root / "kernels" / "build" / "build.ninja"
    before = keep.read_text()
    stash = tmp_path / "outputs.tar"
    bad = tarfile.TarInfo(name)
    bad.type = kind
    bad.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
    _archive(stash, [(tarfile.TarInfo("kernels/build/k.so"), b"x"), (bad, b"y"),
                     (tarfile.TarInfo(treecache.MTIMES), json.dumps({"kernels/build/k.so": 1}).encode())])
    with pytest.raises(treecache.TreeCacheError, match="is not a file or folder under kernels/build"):
        treecache.restore(str(stash), str(root), OUTPUTS)
    assert keep.read_text() == before and not (root / "kernels" / "build" / "k.so").exists()


@needs_ninja
def test_the_restored_files_keep_their_build_times_and_the_tree_is_dated_before_them(tmp_path):
    first, stash = _built(tmp_path)
    built = {p.name: p.stat().st_mtime_ns for p in (first / "kernels" / "build").iterdir()}
    shutil.rmtree(first)
    _checkout(first)
    (first / ".git").mkdir()
    (first / ".git" / "index").write_text("i")
    git_time = (first / ".git" / "index").stat().st_mtime_ns
    treecache.restore(str(stash), str(first), OUTPUTS)
    now = {p.name: p.stat().st_mtime_ns for p in (first / "kernels" / "build").iterdir()}
    assert now == built
    oldest = min(built.values())
    assert (first / "kernels" / "k.c").stat().st_mtime_ns == oldest - treecache.SECOND_NS
    assert (first / "README").stat().st_mtime_ns == oldest - treecache.SECOND_NS
    assert (first / ".git" / "index").stat().st_mtime_ns == git_time
    assert os.access(first / "kernels" / "build" / "k.so", os.X_OK)


@pytest.mark.parametrize("times", [{"kernels/build/k.so": 1, "README": 1},
                                   {"kernels/build/k.so": 1, "../../outside": 1},
                                   {"kernels/build/k.so": "1"}, ["kernels/build/k.so"]])
def test_times_for_paths_that_are_not_the_archives_files_are_refused_before_writing(tmp_path, times):
    root = tmp_path / "src"
    _checkout(root)
    readme = root / "README"
    os.utime(readme, ns=(5 * treecache.SECOND_NS, 5 * treecache.SECOND_NS))
    outside = tmp_path / "outside"
    outside.write_text("o")
    outside_time = outside.stat().st_mtime_ns
    stash = tmp_path / "outputs.tar"
    _archive(stash, [(tarfile.TarInfo("kernels/build/k.so"), b"x"),
                     (tarfile.TarInfo(treecache.MTIMES), json.dumps(times).encode())])
    with pytest.raises(treecache.TreeCacheError, match=treecache.MTIMES):
        treecache.restore(str(stash), str(root), OUTPUTS)
    assert readme.stat().st_mtime_ns == 5 * treecache.SECOND_NS and outside.stat().st_mtime_ns == outside_time
    assert not (root / "kernels" / "build" / "k.so").exists()


@pytest.mark.parametrize("started", [b"\xff\xfe", b"later", b"-5"])
def test_a_start_time_that_is_not_nanoseconds_is_refused_before_writing(tmp_path, started):
    root = tmp_path / "src"
    _checkout(root)
    stash = tmp_path / "outputs.tar"
    _archive(stash, [(tarfile.TarInfo("kernels/build/k.so"), b"x"),
                     (tarfile.TarInfo(treecache.MTIMES), json.dumps({"kernels/build/k.so": 1}).encode()),
                     (tarfile.TarInfo(treecache.STARTED), started)])
    with pytest.raises(treecache.TreeCacheError, match=treecache.STARTED):
        treecache.check_archive(str(stash))
    with pytest.raises(treecache.TreeCacheError, match=treecache.STARTED):
        treecache.restore(str(stash), str(root), OUTPUTS)
    assert not (root / "kernels" / "build" / "k.so").exists()


@needs_ninja
def test_outputs_reached_through_a_link_are_neither_written_nor_read(tmp_path):
    first, stash = _built(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "build").mkdir(parents=True)
    (elsewhere / "build" / "secret").write_text("s")
    root = tmp_path / "node2" / "src"
    root.mkdir(parents=True)
    (root / "kernels").symlink_to(elsewhere)  # a checkout whose folder above the output is a link
    with pytest.raises(treecache.TreeCacheError, match="resolves to .*outside the tree"):
        treecache.restore(str(stash), str(root), OUTPUTS)
    assert sorted(p.name for p in (elsewhere / "build").iterdir()) == ["secret"]
    with pytest.raises(treecache.TreeCacheError, match="outside the tree"):
        treecache.save(str(tmp_path / "s2" / "outputs.tar"), str(root), OUTPUTS)
    # the output itself a link: nothing read through it either
    (root / "kernels").unlink()
    (root / "kernels").mkdir()
    (root / "kernels" / "build").symlink_to(elsewhere / "build")
    with pytest.raises(treecache.TreeCacheError, match="is a link"):
        treecache.save(str(tmp_path / "s3" / "outputs.tar"), str(root), OUTPUTS)
    assert not (tmp_path / "s3").exists() and not (tmp_path / "s2").exists()


SLOW = NINJA.replace("  command = gcc -MMD", "  command = sleep 1.5 && gcc -MMD")


@needs_ninja
def test_a_build_whose_command_ends_after_it_began_is_up_to_date_after_the_restore(tmp_path):
    """ninja's log records each command's start, not its output's time: Megatron's first module
    compiles for ~30 s, so its sources dated just before the oldest output were still newer than
    its log said, and ninja rebuilt it on the next node (run 17). The tree is dated before the
    build's start, which restore stamps where nothing is cached and save archives (ninja >= 1.12,
    the test venv's and the node's; run 17's `-d explain` lines, docs/results/h200x2-run17)."""
    first = tmp_path / "node1" / "src"
    _checkout(first)
    (first / "kernels" / "build" / "build.ninja").write_text(SLOW.format(root=first))
    stash = tmp_path / "node1" / "tree-kern-k" / "outputs.tar"
    assert treecache.restore(str(stash), str(first), OUTPUTS)[0] is False  # nothing cached: the build begins
    assert "gcc -shared" in _ninja(first)
    os.utime(first / "kernels" / "build" / "build.ninja")  # written after the build, as torch writes the next module's
    assert "saved for the next node" in treecache.save(str(stash), str(first), OUTPUTS)
    assert sorted(p.name for p in stash.parent.iterdir()) == ["outputs.tar"]  # the stamp is in the archive
    with tarfile.open(stash) as tar:
        started = int(tar.extractfile(treecache.STARTED).read())
        times = json.loads(tar.extractfile(treecache.MTIMES).read())
    assert started < min(times.values()) - treecache.SECOND_NS  # the command began 1.5 s before its output

    shutil.rmtree(first)
    _checkout(first)
    (first / "kernels" / "build" / "build.ninja").write_text(SLOW.format(root=first))
    treecache.restore(str(stash), str(first), OUTPUTS)
    assert (first / "kernels" / "k.c").stat().st_mtime_ns == started - treecache.SECOND_NS
    assert "ninja: no work to do." in _ninja(first)
    assert "; none of its 5 file(s) changed after the restore" in treecache.save(str(stash), str(first), OUTPUTS)

    # the same archive without the start, as run 17's were: the tree dated before the oldest output
    # only, and ninja finds the source newer than the start its log recorded
    plain = tmp_path / "plain.tar"
    with tarfile.open(stash) as tar, tarfile.open(plain, "w") as out:
        for m in tar.getmembers():
            if m.name != treecache.STARTED:
                out.addfile(m, tar.extractfile(m))
    shutil.rmtree(first)
    _checkout(first)
    (first / "kernels" / "build" / "build.ninja").write_text(SLOW.format(root=first))
    treecache.restore(str(plain), str(first), OUTPUTS)
    explained = subprocess.run(["ninja", "-d", "explain", "-n", "-C", str(first / "kernels" / "build")],
                               capture_output=True, text=True, check=True)
    assert "recorded mtime of k.o older than most recent input" in explained.stdout + explained.stderr


def test_a_build_run_again_keeps_the_start_of_its_first_attempt(tmp_path):
    """A build that failed and is run again began at the first attempt (its first outputs are that
    old): the stamp is not written over, and the archive records that start."""
    root = tmp_path / "src"
    _checkout(root)
    stash = tmp_path / "tree-kern-k" / "outputs.tar"
    treecache.restore(str(stash), str(root), OUTPUTS)
    first = os.stat(str(stash) + ".started").st_mtime_ns
    time.sleep(0.05)
    treecache.restore(str(stash), str(root), OUTPUTS)  # the step again, after a failure
    assert os.stat(str(stash) + ".started").st_mtime_ns == first
    (root / "kernels" / "build" / "k.so").write_bytes(b"so")
    assert "saved for the next node" in treecache.save(str(stash), str(root), OUTPUTS)
    with tarfile.open(stash) as tar:
        assert int(tar.extractfile(treecache.STARTED).read()) == first
    assert not Path(str(stash) + ".started").exists()


def test_hard_linked_outputs_are_archived_as_files_that_restore_takes(tmp_path):
    root = tmp_path / "node1" / "src"
    _checkout(root)
    build = root / "kernels" / "build"
    (build / "k.so").write_bytes(b"library")
    os.link(build / "k.so", build / "k.so.1")  # tarfile would store the second as a link
    stash = tmp_path / "tree-kern-k" / "outputs.tar"
    treecache.save(str(stash), str(root), OUTPUTS)
    with tarfile.open(stash) as tar:
        assert all(m.isfile() for m in tar.getmembers())
    shutil.rmtree(root)
    _checkout(root)
    assert treecache.restore(str(stash), str(root), OUTPUTS)[0] is True
    assert (build / "k.so.1").read_bytes() == b"library" == (build / "k.so").read_bytes()


@pytest.mark.parametrize("names", [["kernels/build/x", "kernels/build/x/y"], ["kernels/build/x", "kernels/build/x"]])
def test_members_that_clash_are_refused_before_writing(tmp_path, names):
    root = tmp_path / "src"
    _checkout(root)
    keep = root / "kernels" / "build" / "build.ninja"
    before = keep.read_text()
    stash = tmp_path / "outputs.tar"
    _archive(stash, [(tarfile.TarInfo(n), b"x") for n in names] +
             [(tarfile.TarInfo(treecache.MTIMES), json.dumps({names[0]: 1}).encode())])
    with pytest.raises(treecache.TreeCacheError, match="appears twice, or under a member that is a file"):
        treecache.restore(str(stash), str(root), OUTPUTS)
    assert keep.read_text() == before


def test_the_save_after_a_restore_does_not_read_through_a_link(tmp_path):
    """A restored tree whose outputs' folder became a link: save does not compare (or call kept)
    what lies where the link points."""
    root = tmp_path / "src"
    _checkout(root)
    (root / "kernels" / "build" / "k.so").write_bytes(b"so")
    stash = tmp_path / "tree-kern-k" / "outputs.tar"
    treecache.restore(str(stash), str(root), OUTPUTS)
    treecache.save(str(stash), str(root), OUTPUTS)
    Path(str(stash) + ".started").write_text("")  # an attempt's stamp, left where the archive came after
    treecache.restore(str(stash), str(root), OUTPUTS)
    assert not Path(str(stash) + ".started").exists()
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(root / "kernels", elsewhere, copy_function=shutil.copy2)
    shutil.rmtree(root / "kernels")
    (root / "kernels").symlink_to(elsewhere)
    with pytest.raises(treecache.TreeCacheError, match="outside the tree"):
        treecache.save(str(stash), str(root), OUTPUTS)


def test_kept_restores_ties_each_line_to_its_key():
    lines = [
        "TASK [Restore the build outputs]",
        "build outputs (tree-a): 9 file(s) of build restored from the build cache; 4 file(s) of the tree dated "
        "before the build's start",
        "build outputs (tree-b): 9 file(s) of build restored from the build cache; 4 file(s) of the tree dated "
        "before the build's start",
        "[1/3] c++ ... (a rebuild's output)",
        "build outputs (tree-a): the cached archive outputs.tar stays (restored before the build); 3 of its 9 "
        "file(s) changed after the restore: build/.ninja_log, build/a.o, build/a.so",
        "build outputs (tree-b): the cached archive outputs.tar stays (restored before the build); none of its 9 "
        "file(s) changed after the restore",
        # a line without the key (a record of runs 16 and 17), and a save with no restore before it
        "build outputs: the cached archive outputs.tar stays (restored before the build); none of its 9 file(s) "
        "changed after the restore",
        "build outputs (tree-c): none cached for this key, the build makes them",
        "build outputs (tree-c): the cached archive outputs.tar stays (restored before the build); none of its 9 "
        "file(s) changed after the restore",
    ]
    assert treecache.kept_restores(lines) == {"tree-b"}
