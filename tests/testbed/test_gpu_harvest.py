"""bench/gpu_harvest.py: a wheel a GPU node built, carried back as KEY.sha256 and KEY.part.NN (as
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


def _harvest(data: bytes, *folders: Path, key: str = KEY, sha: str | None = None) -> int:
    """KEY.sha256 in every folder and the parts dealt over the folders in turn, as split -d -a 2 names them."""
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{key}.sha256").write_text(f"{sha or hashlib.sha256(data).hexdigest()}  {WHEEL}\n")
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
    assert (info["key"], info["wheel"], info["sha256"], info["size"]) == (KEY, WHEEL, sha, len(data))
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
    assert p.returncode == 2 and "not a plain .whl file name" in p.stderr and "Traceback" not in p.stderr, p.stderr
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
    assert p.returncode == 1 and "no wheel in" in p.stdout


def test_wait_on_a_machine_where_no_session_started_says_so_at_once(tmp_path) -> None:
    """A fresh machine (the lease was lost) has no session: ``wait`` exits 3 and says what to do,
    instead of polling for its whole limit (run 18 spent 560 s of device time so)."""
    p = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "wait", "300"], capture_output=True,
                       text=True, timeout=30, env={**os.environ, "OUT": str(tmp_path / "out"),
                                                   "STATE": str(tmp_path / "state")})
    assert p.returncode == 3, p.stdout + p.stderr
    assert "no session on this machine" in p.stdout and "start again from call 1" in p.stdout
    assert not (tmp_path / "state" / "phases.tsv").exists()
