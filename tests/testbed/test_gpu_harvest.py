"""bench/gpu_harvest.py: a wheel or tree archive a GPU node built, carried back as KEY.sha256 and KEY.part.NN (as
``bench/gpu_session.sh harvest`` cuts it), joined, checked and placed in the controller's build cache,
or refused with nothing written."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.paths import ROOT

SCRIPT = ROOT / "bench" / "gpu_harvest.py"
KEY = "apex-6424da3b4faa-837967d631b5195728b8"
WHEEL = "apex-0.1-cp311-cp311-linux_x86_64.whl"
PART = 16 * 1024


def _wheel(tmp_path: Path, record: bool = True) -> bytes:
    """A real small wheel: a module of incompressible bytes (several parts) and its dist-info."""
    path = tmp_path / "built" / WHEEL
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("apex/__init__.py", "# " + os.urandom(24 * 1024).hex() + "\n")
        z.writestr("apex-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: apex\nVersion: 0.1\n")
        if record:
            z.writestr("apex-0.1.dist-info/RECORD", "apex/__init__.py,,\n")
    return path.read_bytes()


def _harvest(data: bytes, *folders: Path, key: str = KEY, sha: str | None = None, name: str = WHEEL) -> int:
    """KEY.sha256 (naming the product ``name``) in every folder and the parts dealt over the folders
    in turn, as split -d -a 2 names them."""
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{key}.sha256").write_text(f"{sha or hashlib.sha256(data).hexdigest()}  {name}\n")
    chunks = [data[i:i + PART] for i in range(0, len(data), PART)]
    for n, chunk in enumerate(chunks):
        (folders[n % len(folders)] / f"{key}.part.{n:02d}").write_bytes(chunk)
    return len(chunks)


def _run(*args: object, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENVBUILD_HOME": str(home)}
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=60, env=env)


def test_the_parts_seed_the_cache_and_a_second_run_changes_nothing(tmp_path) -> None:
    data = _wheel(tmp_path)
    folder, home = tmp_path / "prebuilt", tmp_path / "home"
    parts = _harvest(data, folder)
    assert parts >= 3
    p = _run(folder, home=home)
    assert p.returncode == 0, p.stderr
    seeded = home / "cache" / "wheels" / KEY / WHEEL
    sha = hashlib.sha256(data).hexdigest()
    assert seeded.read_bytes() == data
    assert p.stdout == f"{KEY}: seeded {WHEEL} ({len(data)} bytes, sha256 {sha[:8]}...) from {parts} parts\n"
    info = json.loads((seeded.parent / "harvest.json").read_text())
    assert (info["key"], info["file"], info["sha256"], info["size"]) == (KEY, WHEEL, sha, len(data))
    assert info["from"] == [str(folder.resolve())] and info["harvested_at"].endswith("+00:00")
    assert sorted(x.name for x in seeded.parent.parent.iterdir()) == [KEY]  # no temporary file left
    before = {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in seeded.parent.iterdir()}
    again = _run(folder, "--json", home=home)
    assert again.returncode == 0, again.stderr
    (row,) = json.loads(again.stdout)
    assert (row["status"], row["sha256"]) == ("present", sha)
    assert {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in seeded.parent.iterdir()} == before


def test_parts_split_across_two_calls_folders_join(tmp_path) -> None:
    data = _wheel(tmp_path)
    first, second, cache = tmp_path / "call1", tmp_path / "call2", tmp_path / "cache"
    _harvest(data, first, second)
    p = _run(first, second, "--cache", cache, "--json", home=tmp_path / "home")
    assert p.returncode == 0, p.stderr
    assert (cache / KEY / WHEEL).read_bytes() == data
    (row,) = json.loads(p.stdout)
    assert (row["status"], row["size"]) == ("seeded", len(data))
    info = json.loads((cache / KEY / "harvest.json").read_text())
    assert info["from"] == [str(first.resolve()), str(second.resolve())]
    assert not (tmp_path / "home").exists()  # --cache, not ENVBUILD_HOME


def test_a_corrupted_part_or_a_missing_one_writes_nothing(tmp_path) -> None:
    data = _wheel(tmp_path)
    folder, cache = tmp_path / "prebuilt", tmp_path / "cache"
    _harvest(data, folder)
    part = folder / f"{KEY}.part.01"
    part.write_bytes(b"x" + part.read_bytes()[1:])
    p = _run(folder, "--cache", cache, home=tmp_path)
    assert p.returncode == 1 and "sha256" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not list(cache.rglob("*.whl")) and not [f for f in cache.rglob("*") if f.is_file()]
    part.unlink()
    p = _run(folder, "--cache", cache, home=tmp_path)
    assert p.returncode == 1 and f"missing {KEY}.part.01" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not [f for f in cache.rglob("*") if f.is_file()]


def test_a_zip_without_record_and_another_cached_wheel_are_refused(tmp_path) -> None:
    folder, cache = tmp_path / "prebuilt", tmp_path / "cache"
    _harvest(_wheel(tmp_path, record=False), folder)
    p = _run(folder, "--cache", cache, home=tmp_path)
    assert p.returncode == 1 and "RECORD" in p.stderr, p.stderr
    assert not [f for f in cache.rglob("*") if f.is_file()]
    other = cache / KEY / "apex-0.0-cp311-cp311-linux_x86_64.whl"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"older")
    data = _wheel(tmp_path)
    _harvest(data, folder)
    p = _run(folder, "--cache", cache, home=tmp_path)
    assert p.returncode == 1 and "--replace" in p.stderr and other.read_bytes() == b"older", p.stderr
    p = _run(folder, "--cache", cache, "--replace", home=tmp_path)
    assert p.returncode == 0, p.stderr
    assert [f.name for f in (cache / KEY).glob("*.whl")] == [WHEEL] and (cache / KEY / WHEEL).read_bytes() == data


def test_bad_input_is_refused_with_exit_2_naming_the_file(tmp_path) -> None:
    data = _wheel(tmp_path)
    cache = tmp_path / "cache"
    cases = {"..x": "is not a build-cache key", "-x": "is not a build-cache key"}
    for n, (key, says) in enumerate(cases.items()):
        folder = tmp_path / f"bad{n}"
        _harvest(data, folder, key=key)
        p = _run(folder, "--cache", cache, home=tmp_path)
        assert p.returncode == 2 and f"{folder / key}.sha256" in p.stderr and says in p.stderr, p.stderr
    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / f"{KEY}.sha256").write_text(f"{'0' * 63}  {WHEEL}\n")
    p = _run(lines, "--cache", cache, home=tmp_path)
    assert p.returncode == 2 and f"{KEY}.sha256: line 1" in p.stderr, p.stderr
    (lines / f"{KEY}.sha256").write_text(f"{'0' * 64}  ../{WHEEL}\n")
    p = _run(lines, "--cache", cache, home=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "neither a plain .whl file name nor outputs.tar" in p.stderr
    assert not cache.exists()


def test_the_session_scripts_harvest_verb_round_trips_through_gpu_harvest(tmp_path) -> None:
    """``bash bench/gpu_session.sh harvest`` on a node's build cache (the wheel an install left in
    ``$ENVBUILD_HOME/cache/wheels/KEY/``) writes what gpu_harvest.py joins back into the same bytes."""
    data = _wheel(tmp_path)
    node_home, out, home = tmp_path / "node-home", tmp_path / "out", tmp_path / "home"
    cached = node_home / "cache" / "wheels" / KEY / WHEEL
    cached.parent.mkdir(parents=True)
    cached.write_bytes(data)
    p = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "harvest"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "ENVBUILD_HOME": str(node_home), "OUT": str(out),
                                        "STATE": str(tmp_path / "state")})
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"harvested {KEY}: {WHEEL}, {len(data)} bytes, 1 parts" in p.stdout
    assert sorted(f.name for f in (out / "prebuilt").iterdir()) == [f"{KEY}.part.00", f"{KEY}.sha256"]
    q = _run(out / "prebuilt", home=home)
    assert q.returncode == 0, q.stderr
    assert (home / "cache" / "wheels" / KEY / WHEEL).read_bytes() == data


def test_the_harvest_verb_with_an_empty_build_cache_fails(tmp_path) -> None:
    p = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "harvest"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "ENVBUILD_HOME": str(tmp_path / "node-home"),
                                        "OUT": str(tmp_path / "out"), "STATE": str(tmp_path / "state")})
    assert p.returncode == 1 and "nothing to harvest in" in p.stdout


def test_wait_on_a_machine_where_no_session_started_says_so_at_once(tmp_path) -> None:
    """A fresh machine (the lease was lost) has no session: ``wait`` exits 3 and says what to do,
    instead of polling for its whole limit (run 18 spent 560 s of device time so)."""
    p = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "wait", "300"], capture_output=True,
                       text=True, timeout=30, env={**os.environ, "OUT": str(tmp_path / "out"),
                                                   "STATE": str(tmp_path / "state")})
    assert p.returncode == 3, p.stdout + p.stderr
    assert "no session on this machine" in p.stdout and "start again from call 1" in p.stdout
    assert not (tmp_path / "state" / "phases.tsv").exists()


TREE_KEY = "tree-megatron-c28bbd208d16-d420024fed4bc69d3df2"


def _tree_archive(tmp_path: Path) -> Path:
    """An archive as the node's build saves it: treecache's restore (nothing cached: the build's
    start stamped), the build's outputs, then its save."""
    from envbuild.node import treecache

    root, stash = tmp_path / "tree", tmp_path / "node-cache" / TREE_KEY / "outputs.tar"
    root.mkdir()
    treecache.restore(str(stash), str(root), ["build"])
    (root / "build").mkdir()
    (root / "build" / "kernels.so").write_bytes(os.urandom(40 * 1024))
    (root / "build" / ".ninja_log").write_text("# ninja log v6\n")
    treecache.save(str(stash), str(root), ["build"])
    return stash


def _session_harvest(node_home: Path, out: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "harvest"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "ENVBUILD_HOME": str(node_home), "OUT": str(out),
                                           "STATE": str(tmp_path / "state"), **env})


def test_a_tree_archive_and_a_wheel_come_back_in_one_call_and_seed_the_cache(tmp_path) -> None:
    """The fused-kernel folder a first node built (treecache's ``outputs.tar``) comes back as a wheel
    does, and the controller's cache then holds it where ``envbuild bundle`` packs it as prebuilt."""
    from envbuild.bundle.buildcache import cached_artifacts

    node_home, out, home = tmp_path / "node-home", tmp_path / "out", tmp_path / "home"
    archive = _tree_archive(tmp_path)
    (node_home / "cache" / "wheels").mkdir(parents=True)
    archive.parent.rename(node_home / "cache" / "wheels" / TREE_KEY)
    wheel = node_home / "cache" / "wheels" / KEY / WHEEL
    wheel.parent.mkdir()
    wheel.write_bytes(_wheel(tmp_path))
    p = _session_harvest(node_home, out, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"harvested {TREE_KEY}: outputs.tar" in p.stdout and f"harvested {KEY}: {WHEEL}" in p.stdout
    q = _run(out / "prebuilt", "--json", home=home)
    assert q.returncode == 0, q.stderr
    rows = {r["key"]: r for r in json.loads(q.stdout)}
    assert rows[TREE_KEY]["status"] == "seeded" and rows[TREE_KEY]["file"] == "outputs.tar"
    seeded = cached_artifacts(home / "cache" / "wheels" / TREE_KEY)
    assert [f.name for f in seeded] == ["outputs.tar"]
    assert seeded[0].read_bytes() == (node_home / "cache" / "wheels" / TREE_KEY / "outputs.tar").read_bytes()
    again = _run(out / "prebuilt", home=home)
    assert again.returncode == 0 and f"{TREE_KEY}: the cache already holds outputs.tar" in again.stdout


def test_an_archive_over_seven_parts_comes_back_gzipped_and_seeds_its_own_bytes(tmp_path) -> None:
    """Run 23: metaseq's objects made a 122 MB outputs.tar, over the 7 parts of 15 MiB one call
    brings back. harvest gzips such a product (KEY.sha256 still the archive's own), and
    gpu_harvest.py decompresses the joined parts into the same bytes; a part cut short is refused."""
    from envbuild.node import treecache

    node_home, out, home = tmp_path / "node-home", tmp_path / "out", tmp_path / "home"
    root, stash = tmp_path / "tree", node_home / "cache" / "wheels" / TREE_KEY / "outputs.tar"
    root.mkdir()
    treecache.restore(str(stash), str(root), ["build"])
    (root / "build").mkdir()
    with (root / "build" / "kernels.o").open("wb") as f:  # compressible, as objects are
        for i in range(110):
            f.write(bytes([i % 7]) * (1024 * 1024))
    treecache.save(str(stash), str(root), ["build"])
    assert stash.stat().st_size > 105 * 1024 * 1024
    p = _session_harvest(node_home, out, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"harvested {TREE_KEY}: outputs.tar, {stash.stat().st_size} bytes, gzipped to" in p.stdout
    parts = sorted((out / "prebuilt").glob(f"{TREE_KEY}.part.*"))
    assert len(parts) == 1 and parts[0].read_bytes()[:2] == b"\x1f\x8b"
    assert not list((tmp_path / "state").glob("harvest-*"))
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / f"{TREE_KEY}.sha256").write_bytes((out / "prebuilt" / f"{TREE_KEY}.sha256").read_bytes())
    (cut / f"{TREE_KEY}.part.00").write_bytes(parts[0].read_bytes()[:-100])
    bad = _run(cut, home=home)
    assert bad.returncode == 1 and "gzip stream is cut short" in bad.stderr, bad.stderr
    assert not (home / "cache" / "wheels" / TREE_KEY).exists()
    q = _run(out / "prebuilt", home=home)
    assert q.returncode == 0, q.stderr
    seeded = home / "cache" / "wheels" / TREE_KEY / "outputs.tar"
    assert hashlib.sha256(seeded.read_bytes()).hexdigest() == hashlib.sha256(stash.read_bytes()).hexdigest()


def test_a_tar_without_the_archives_times_is_refused_and_nothing_written(tmp_path) -> None:
    import tarfile

    plain = tmp_path / "outputs.tar"
    with tarfile.open(plain, "w") as tar:
        tar.add(SCRIPT, arcname="build/x.py")
    data = plain.read_bytes()
    folder, home = tmp_path / "prebuilt", tmp_path / "home"
    _harvest(data, folder, key=TREE_KEY, name="outputs.tar")
    p = _run(folder, home=home)
    assert p.returncode == 1
    assert "no .envbuild-mtimes.json member" in p.stderr
    assert not (home / "cache" / "wheels" / TREE_KEY).exists()


def test_keys_past_a_calls_eight_files_are_named_for_the_next_call(tmp_path) -> None:
    """Eight files a call, those already in $OUT counted: with one file there, four one-part keys
    take eight, so the fourth key is left, named, and the call exits 1; the named key comes next."""
    node_home, out = tmp_path / "node-home", tmp_path / "out"
    keys = [f"tree-src{i}-0123456789ab-{i:020d}" for i in range(4)]
    for key in keys:
        (node_home / "cache" / "wheels" / key).mkdir(parents=True)
        (node_home / "cache" / "wheels" / key / "outputs.tar").write_bytes(b"x")
    out.mkdir()
    (out / "phases.tsv").write_text("install\t1\t5\n")  # what a `wait` of the same call left
    p = _session_harvest(node_home, out, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert len(list((out / "prebuilt").iterdir())) == 6
    assert f"harvest again with HARVEST_KEY='{keys[3]}'" in p.stdout
    q = _session_harvest(node_home, tmp_path / "out2", tmp_path, HARVEST_KEY=keys[3])
    assert q.returncode == 0 and sorted(f.name for f in (tmp_path / "out2" / "prebuilt").iterdir()) == [
        f"{keys[3]}.part.00", f"{keys[3]}.sha256"]


def test_a_key_that_cannot_come_back_is_named_and_the_others_still_come(tmp_path) -> None:
    """HARVEST_KEY's keys in its order: an empty archive, one of more than 7 parts even gzipped
    (random bytes) and a key the cache lacks are each said and left, the good key after them is
    still taken, exit 1."""
    node_home, out = tmp_path / "node-home", tmp_path / "out"
    cache = node_home / "cache" / "wheels"
    empty, big, good = "tree-empty-0123456789ab-00000000000000000001", "apex-big-00000000000000000002", \
        "tree-good-0123456789ab-00000000000000000003"
    for key in (empty, big, good):
        (cache / key).mkdir(parents=True)
    (cache / empty / "outputs.tar").write_bytes(b"")
    with (cache / big / "apex-0.1-cp312-cp312-linux_x86_64.whl").open("wb") as f:
        for _ in range(106):
            f.write(os.urandom(1024 * 1024))
    (cache / good / "outputs.tar").write_bytes(b"x")
    p = _session_harvest(node_home, out, tmp_path, HARVEST_KEY=f"tree-missing-0 {empty} {big} {good}")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "tree-missing-0: not in the build cache" in p.stdout
    assert f"{empty}: outputs.tar is empty" in p.stdout
    assert f"{big}: apex-0.1-cp312-cp312-linux_x86_64.whl is over 105 MiB gzipped" in p.stdout
    assert not list((tmp_path / "state").glob("harvest-*"))  # the gzipped copy does not stay
    assert sorted(f.name for f in (out / "prebuilt").iterdir()) == [f"{good}.part.00", f"{good}.sha256"]


@pytest.mark.parametrize("name", ["../escape", "/abs/file", "./build/x", "build//x"])
def test_an_archive_member_restore_would_refuse_is_refused_here(tmp_path, name) -> None:
    """gpu_harvest.py checks a tree archive as the node's restore does (treecache.check_archive),
    so an archive the node would refuse never reaches a bundle."""
    import io
    import tarfile

    archive = tmp_path / "outputs.tar"
    with tarfile.open(archive, "w") as tar:
        for member, data in ((name, b"x"), (".envbuild-mtimes.json", b"{}")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = archive.read_bytes()
    folder, home = tmp_path / "prebuilt", tmp_path / "home"
    _harvest(data, folder, key=TREE_KEY, name="outputs.tar")
    p = _run(folder, home=home)
    assert p.returncode == 1 and "is not an archive treecache restores" in p.stderr, p.stderr
    assert repr(name) in p.stderr
    assert not (home / "cache" / "wheels" / TREE_KEY).exists()


def test_a_gzip_stream_over_several_parts_joins_and_one_with_bytes_after_it_is_refused(tmp_path) -> None:
    """The gzip stream of a product cut into several parts (at any byte) decompresses across their
    boundaries into the product; bytes after its end, or a stream that is not gzip past its magic,
    are refused with nothing written."""
    import gzip

    data = _wheel(tmp_path)
    packed = gzip.compress(data + os.urandom(48 * 1024))  # a wheel cannot be padded: pad the zip's tail
    raw = gzip.decompress(packed)
    folder, home = tmp_path / "prebuilt", tmp_path / "home"
    parts = _harvest(packed, folder, sha=hashlib.sha256(raw).hexdigest())
    assert parts >= 3
    p = _run(folder, home=home)
    assert p.returncode == 0, p.stderr
    assert (home / "cache" / "wheels" / KEY / WHEEL).read_bytes() == raw
    for bad, said in ((packed + b"junk", "bytes after its end"), (packed[:2] + b"\x00" * 64, "does not decompress")):
        other, home2 = tmp_path / f"bad{len(bad)}", tmp_path / f"home{len(bad)}"
        _harvest(bad, other, sha=hashlib.sha256(raw).hexdigest())
        q = _run(other, home=home2)
        assert q.returncode == 1 and said in q.stderr, q.stderr
        assert not (home2 / "cache" / "wheels" / KEY).exists()


def test_a_gzip_stream_that_inflates_past_the_cap_is_refused_and_leaves_nothing(tmp_path) -> None:
    """join_parts inflates in bounded pieces and stops at its cap (MAX_PRODUCT, 4 GiB: a gzip
    bomb from a node fills no disk); under the cap the same stream joins into its own bytes."""
    import gzip
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_harvest_mod", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    data = bytes(3 * 1024 * 1024)  # 3 MiB of zeros: a few KiB gzipped
    part = tmp_path / f"{TREE_KEY}.part.00"
    part.write_bytes(gzip.compress(data))
    assert part.stat().st_size < 64 * 1024
    dest = tmp_path / "dest"
    dest.mkdir()
    mod.CHUNK = 4096
    inflate, pieces = mod._inflate, []

    def counted(unz, chunk, key):
        for piece in inflate(unz, chunk, key):
            pieces.append(len(piece))
            yield piece
    mod._inflate = counted
    with pytest.raises(mod.HarvestError, match="inflates past 1048576 bytes"):
        mod.join_parts([part], dest, TREE_KEY, max_size=1024 * 1024)
    assert list(dest.iterdir()) == []
    assert pieces and max(pieces) <= 4096 and sum(pieces) <= 1024 * 1024 + 4096
    exact, _, _ = mod.join_parts([part], dest, TREE_KEY, max_size=len(data))  # the cap itself is allowed
    assert exact.read_bytes() == data
    exact.unlink()
    path, sha, size = mod.join_parts([part], dest, TREE_KEY)
    assert size == len(data) and sha == hashlib.sha256(data).hexdigest() and path.read_bytes() == data
    assert mod.MAX_PRODUCT == 4 << 30
