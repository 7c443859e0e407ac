"""bench/gpu_prepare.sh makes the layout bench/gpu_session.sh reads, and says how to carry it.

The plan's jobs and the carry split are pure functions of bench/gpu_carry.py, tested on data
(the committed plans and sizes of the kind gpu_prepare.sh measured for run 11). The script itself
runs for real in a git repository made from this working tree, on a plan of one cpu-reference job
(its bundle needs no git mirror: torch from /opt/wheels, the rest from the download cache or
PyPI), with the wheels' and stall tools' downloads skipped (SKIP_WHEELS, SKIP_TOOLS); then
gpu_session.sh's ``stage`` reads what it made. The bench scripts pass shellcheck.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.bench import gpu_carry  # bench/gpu_carry.py, loaded once
from support.paths import ROOT

WHEELS = Path("/opt/wheels")
MIB = 1 << 20
carry = gpu_carry()


@pytest.mark.lint
def test_the_bench_shell_scripts_pass_shellcheck() -> None:
    scripts = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "bench").glob("*.sh"))
    assert {"bench/gpu_prepare.sh", "bench/prepare_lib.sh", "bench/h100_offline_prepare.sh",
            "bench/gpu_session.sh"} <= set(scripts)
    p = subprocess.run(["shellcheck", "-x", "--shell=bash", "--severity=style", *scripts], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_jobs_of_the_committed_plans() -> None:
    """Installs in plan order, once each, wherever a line holds them (run 8 installed MegatronApp
    on a smoke line, run 10 smoked on an install line)."""
    def jobs(rel: str) -> list[tuple[str, str]]:
        return carry.plan_jobs((ROOT / rel).read_text(), rel)

    assert jobs("docs/results/h200x4-run11/session/plan.txt") == [
        ("mapp", "megatronapp-h100"), ("mds", "megatron-deepspeed-slurm-h100"), ("hmds", "h100-megatron-deepspeed")]
    assert jobs("docs/results/h200x4-run10/session/plan.txt") == [
        ("mds", "megatron-deepspeed-slurm-h100"), ("opt", "opt-175b-azure-h100")]
    assert [j for j, _ in jobs("docs/results/h200x4-run8/plan-lease1.txt")] == ["opt", "mds", "mapp"]
    assert jobs("docs/results/h200x2-run16/plan.txt") == [  # wipe:alpa between two installs of alpa
        ("alpa", "alpa-megatron-h100"), ("mds", "megatron-deepspeed-slurm-h100")]


@pytest.mark.parametrize("text, says", [
    ("install a=cpu-reference\nsmoke b@0\n", "plan:2: 'b@0': no earlier item installs b"),
    ("smoke a@0\ninstall a=cpu-reference\n", "plan:1: 'a@0': no earlier item installs a"),
    ("install a=cpu-reference\ninstall a=megatronapp-h100\n", "plan:2: job a is cpu-reference, not megatronapp-h100"),
    ("install common=cpu-reference\n", "the job not 'common'"),
    ("install a=../x\n", "plan:1: 'a=../x': an install is JOB=RECIPE"),
    ("install a=cpu-reference\nsmoke a@0;1\n", "plan:2: 'a@0;1': GPUS is a comma-separated list"),
    ("install a=cpu-reference\nsmoke a\n", "plan:2: 'a' is neither"),
    ("install\n", "plan:1: a plan line is a verb and items"),
    ("next-node wipe:a\ninstall a=cpu-reference\n", "plan:1: 'wipe:a': no earlier item installs a"),
    ("# only a comment\n\n", "no JOB=RECIPE item"),
])
def test_a_bad_plan_is_refused_naming_its_line(text: str, says: str) -> None:
    with pytest.raises(carry.CarryError) as e:
        carry.plan_jobs(text, "plan")
    assert says in str(e.value) and e.value.code == 2


def _items(*sizes: tuple[str, float]) -> list:
    return [carry.Item(path, int(mib * MIB)) for path, mib in sizes]


def test_call_one_carries_common_the_plan_and_the_bundles_that_fit_first_fit_after() -> None:
    """Run 11's sizes as gpu_prepare.sh measured them: mapp and hmds fit beside the common part in
    call 1, mds (24 MiB) only in a call of its own."""
    tree, limit = int(19.0 * MIB), 64 * MIB
    first = _items((".device/common", 23.9), (".device/plan.txt", 0.001))
    bundles = _items((".device/mapp", 10.2), (".device/mds", 23.5), (".device/hmds", 8.3))
    calls = carry.carry_split(tree, first, bundles, ".device/plan.txt", limit)
    assert [c.carry for c in calls] == [(".device/common", ".device/plan.txt", ".device/mapp", ".device/hmds"),
                                        (".device/mds",)]
    assert all(c.size <= limit for c in calls)
    assert calls[0].size == tree + sum(i.size for i in first) + bundles[0].size + bundles[2].size
    assert "start .device/plan.txt" in calls[0].command and "start" not in calls[1].command
    assert all(c.command.startswith("bash bench/gpu_session.sh stage && ") for c in calls)
    text = carry.render(calls, tree, limit)
    assert 'call 2 (42.5 MiB): carry [".device/mds"]' in text and "machine is lost" in text


def test_a_call_names_at_most_eight_paths() -> None:
    first = _items((".device/common", 1), (".device/plan.txt", 0))
    bundles = _items(*[(f".device/j{n}", 0.5) for n in range(10)])
    calls = carry.carry_split(MIB, first, bundles, ".device/plan.txt")
    assert [len(c.carry) for c in calls] == [8, 4]
    assert [p for c in calls for p in c.carry if p.startswith(".device/j")] == [b.path for b in bundles]


def test_what_cannot_travel_is_named() -> None:
    first = _items((".device/common", 40), (".device/plan.txt", 0))
    with pytest.raises(carry.CarryError, match=r"\.device/big \(50\.0 MiB\) cannot travel") as e:
        carry.carry_split(20 * MIB, first, _items((".device/big", 50)), ".device/plan.txt")
    assert e.value.code == 1
    with pytest.raises(carry.CarryError, match=r"\.device/common.*pass the 64 MiB of one call"):
        carry.carry_split(30 * MIB, first, [], ".device/plan.txt")


def _device_copy(dest: Path) -> set[str]:
    """This working tree as the device copies it (tracked files and untracked files git does not
    ignore; no .git), into ``dest``: the names of the files copied."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    copied = set()
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
            copied.add(name)
    return copied


def _snapshot(dest: Path) -> None:
    """A git repository of this working tree as the device would copy it, committed: what a
    fresh clone holds."""
    _device_copy(dest)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "snapshot"]):
        subprocess.run(["git", *argv], cwd=dest, check=True, env=env, capture_output=True)


@pytest.mark.integration
@pytest.mark.slow
def test_prepare_makes_what_the_session_stages(tmp_path) -> None:
    if not any(WHEELS.glob("torch-2.13.0*cp311*.whl")):
        pytest.skip(f"no torch 2.13.0 cp311 wheel in {WHEELS}")
    clone, mirrors, state = tmp_path / "clone", tmp_path / "mirrors", tmp_path / "state"
    clone.mkdir(), mirrors.mkdir()
    _snapshot(clone)
    plan = tmp_path / "plan.txt"
    plan.write_text("# one job\ninstall ref=cpu-reference\nsmoke ref@0\n")
    env = {**os.environ, "PY": sys.executable, "TARGET": "local", "BUNDLE_ARGS": f"--wheelhouse {WHEELS}",
           "SKIP_WHEELS": "1", "SKIP_TOOLS": "1", "ENVBUILD_HOME": str(tmp_path / "home")}

    def prepare(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "bench/gpu_prepare.sh", *args], cwd=clone, env={**env, **extra},
                              capture_output=True, text=True, timeout=900)

    # a bundle of 212 MiB (torch) cannot travel in one call of 64 MiB: it is cut into parts, one a call,
    # and stage joins them into the bundle whose sha256 was taken before the cut
    p = prepare(str(plan), str(mirrors))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    n = int(re.search(r"^ref: its bundle travels in (\d+) parts$", p.stdout, re.M).group(1))
    dev = clone / ".device"
    assert not (dev / "ref" / "bundle.tar").exists() and (dev / "ref" / "bundle.parts").read_text() == f"{n}\n"
    assert n >= 4 and [f'".device/ref+{i:02d}"' in p.stdout for i in range(1, n)] == [True] * (n - 1)
    cut_digest = (dev / "ref" / "bundle.sha256").read_text().strip()
    parts = [dev / ("ref" if i == 0 else f"ref+{i:02d}") for i in range(n)]
    # an earlier cut into more parts left its last one on the node: never joined, never counted
    stale = tmp_path / "parts-state" / "parts" / "ref"
    stale.mkdir(parents=True)
    (stale / f"bundle.part.{n:02d}").write_bytes(b"a part of an earlier cut")
    for i, folder in enumerate(parts):  # each call stages what it carried; the last part completes it
        part = f"bundle.part.{i:02d}"
        others = [f for f in parts if f != folder]
        for f in others:  # as on the node: this call's .device holds only its own part
            (f / f"bundle.part.{parts.index(f):02d}").rename(tmp_path / f"away-{parts.index(f)}")
        s = subprocess.run(["bash", "bench/gpu_session.sh", "stage"], cwd=clone, capture_output=True, text=True,
                           env={**os.environ, "STATE": str(tmp_path / "parts-state")}, timeout=300)
        for f in others:
            (tmp_path / f"away-{parts.index(f)}").rename(f / f"bundle.part.{parts.index(f):02d}")
        assert s.returncode == 0 and (folder / part).exists(), s.stderr
        assert ("staged ref (joined from" in s.stdout) == (i == n - 1), s.stdout
    joined = tmp_path / "parts-state" / "bundles" / "ref.tar"
    assert hashlib.sha256(joined.read_bytes()).hexdigest() == cut_digest
    # a device that takes more per call: the split and its commands
    p = prepare(str(plan), str(mirrors), CARRY_LIMIT_MIB="1024")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert 'carry [".device/common", ".device/plan.txt", ".device/ref"]' in p.stdout
    assert ("bash bench/gpu_session.sh stage && bash bench/gpu_session.sh start .device/plan.txt && "
            "bash bench/gpu_session.sh wait 15") in p.stdout
    assert "SKIP_WHEELS=1" in p.stderr and "SKIP_TOOLS=1" in p.stderr  # said, not silent

    bundle = dev / "ref" / "bundle.tar"
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert (dev / "ref" / "bundle.sha256").read_text().strip() == digest
    assert f"sha256 {digest}" in p.stdout  # the digest envbuild bundle printed
    assert (dev / "plan.txt").read_text() == plan.read_text()
    deps = (dev / "common" / "ebdeps.txt").read_text()
    assert all(re.search(rf"^{n}==", deps, re.M) for n in ("ansible-core", "pydantic", "click"))
    # no export travels: each call carries the working tree, the commit prepare names
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout
    assert not (dev / "common" / "src.tar.gz").exists() and (dev / "common" / "src.commit").read_text() == head
    assert (dev / "common" / "whl").is_dir() and (dev / "common" / "tools").is_dir()

    # gpu_session.sh stage (as on the node) reads that layout
    s = subprocess.run(["bash", "bench/gpu_session.sh", "stage"], cwd=clone, capture_output=True, text=True,
                       env={**os.environ, "STATE": str(state)}, timeout=300)
    assert s.returncode == 0 and "staged ref" in s.stdout, s.stdout + s.stderr
    assert hashlib.sha256((state / "bundles" / "ref.tar").read_bytes()).hexdigest() == digest
    assert (state / "bundles" / "ref.sha256").read_text().strip() == digest
    assert (state / "common" / "src" / "playbooks" / "provision.yml").is_file()
    assert (state / "common" / "src" / "bench" / "gpu_session.sh").is_file()
    assert not (state / "common" / "src" / ".device").exists() and f"commit {head.strip()}" in s.stdout
    # prepared again at another commit, the same machine: refused, not the first commit's source run
    (dev / "common" / "src.commit").write_text("0" * 40 + "\n")
    s = subprocess.run(["bash", "bench/gpu_session.sh", "stage"], cwd=clone, capture_output=True, text=True,
                       env={**os.environ, "STATE": str(state)}, timeout=300)
    assert s.returncode == 1 and "start again on a fresh machine" in s.stderr, s.stdout + s.stderr
    (dev / "common" / "src.commit").write_text(head)

    # a tree that is not the commit is refused: the device would run what it is, not HEAD
    (clone / "envbuild" / "__init__.py").write_text("# changed\n", encoding="utf-8")
    p = prepare(str(plan), str(mirrors))
    assert p.returncode == 1 and "the working tree is not HEAD" in p.stderr, p.stderr
    subprocess.run(["git", "checkout", "--", "envbuild/__init__.py"], cwd=clone, check=True)

    # bad input: exit 2 naming the file and line, before anything is made
    bad = tmp_path / "bad.txt"
    bad.write_text("install ref=cpu-reference\nsmoke other@0\n")
    p = prepare(str(bad), str(mirrors))
    assert p.returncode == 2 and f"{bad}:2: 'other@0': no earlier item installs other" in p.stderr, p.stderr
    p = prepare(str(plan), str(tmp_path / "none"))
    assert p.returncode == 2 and "no such folder of git mirrors" in p.stderr
    p = prepare(str(plan))
    assert p.returncode == 2 and "usage:" in p.stderr



def test_stage_replaces_a_bundle_carried_anew(tmp_path) -> None:
    """Run 13: a job prepared again on a warm node (a recipe fixed between leases' calls) came with a
    new sha256, and stage kept the bundle it had staged before; the install then refused it (its
    sha256 was not the pinned one). Now the staged bundle goes when a different sha256 is carried,
    whole or in parts."""
    dev, state = tmp_path / ".device", tmp_path / "state"
    (dev / "common").mkdir(parents=True)
    job = dev / "job"
    job.mkdir()

    def carry(data: bytes) -> str:
        (job / "bundle.tar").write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        (job / "bundle.sha256").write_text(digest + "\n")
        return digest

    def stage() -> str:
        s = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "stage"], cwd=tmp_path,
                           capture_output=True, text=True, env={**os.environ, "STATE": str(state), "DEV": str(dev)},
                           timeout=60)
        assert s.returncode == 0, s.stderr
        return s.stdout

    carry(b"the first bundle")
    assert "staged job" in stage()
    assert "dropped" not in stage()  # the same bundle again: kept
    carry(b"the bundle prepared again")
    out = stage()
    assert "the one staged before is dropped" in out and "staged job" in out
    assert (state / "bundles" / "job.tar").read_bytes() == b"the bundle prepared again"
    # in parts: the first call carries part 00 and the new sha256; the staged bundle goes, and the
    # parts join only to that sha256
    (job / "bundle.tar").unlink()
    new = b"a third bundle, carried in two parts"
    (job / "bundle.sha256").write_text(hashlib.sha256(new).hexdigest() + "\n")
    (job / "bundle.parts").write_text("2\n")
    (job / "bundle.part.00").write_bytes(new[:10])
    assert "dropped" in stage() and not (state / "bundles" / "job.tar").exists()
    (job / "bundle.part.00").unlink()
    (dev / "job+01").mkdir()
    (dev / "job+01" / "bundle.part.01").write_bytes(new[10:])
    assert "staged job (joined from 2 parts)" in stage()
    assert (state / "bundles" / "job.tar").read_bytes() == new

def test_stage_copies_a_tree_without_git_but_its_device_folder(tmp_path) -> None:
    """On the device the working tree comes without .git (the branch of ``stage`` the GPU machine
    takes): the staged source is every file of the tree but .device/, named by the carried
    src.commit; a later call that carries another commit is refused and the staged source kept."""
    tree, state = tmp_path / "tree", tmp_path / "state"
    copied = _device_copy(tree)
    assert not (tree / ".git").exists() and "bench/gpu_session.sh" in copied
    dev = tree / ".device"
    (dev / "common").mkdir(parents=True)
    (dev / "common" / "src.commit").write_text("1" * 40 + "\n")
    (dev / "job").mkdir()
    (dev / "job" / "bundle.tar").write_bytes(b"a bundle")
    (dev / "plan.txt").write_text("install job=cpu-reference\n")

    def stage() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "bench/gpu_session.sh", "stage"], cwd=tree, capture_output=True, text=True,
                              env={**os.environ, "STATE": str(state)}, timeout=120)

    s = stage()
    assert s.returncode == 0, s.stdout + s.stderr
    assert f"source: the carried working tree, commit {'1' * 40}" in s.stdout and "staged job" in s.stdout
    src = state / "common" / "src"
    staged = {p.relative_to(src).as_posix() for p in src.rglob("*") if not p.is_dir()}
    assert staged == copied  # the tree's files, .device/ left out
    assert not (src / ".device").exists() and not (src / ".git").exists()
    assert (src / "bench" / "gpu_session.sh").read_bytes() == (ROOT / "bench" / "gpu_session.sh").read_bytes()
    # the machine prepared again at another commit: refused, the first commit's source kept
    (dev / "common" / "src.commit").write_text("2" * 40 + "\n")
    (tree / "envbuild" / "__init__.py").write_text("# the other commit\n")
    s = stage()
    assert s.returncode == 1 and f"this machine's source is commit {'1' * 40}" in s.stderr, s.stdout + s.stderr
    assert f"this call carries {'2' * 40}" in s.stderr and "start again on a fresh machine" in s.stderr
    assert (src / "envbuild" / "__init__.py").read_bytes() == (ROOT / "envbuild" / "__init__.py").read_bytes()
    assert (state / "common" / "src.commit").read_text() == "1" * 40 + "\n"


def test_the_split_reads_what_is_under_device(tmp_path) -> None:
    """``gpu_carry.py split`` measures the working tree and .device/ (here: a tiny repository)."""
    (tmp_path / "f.txt").write_bytes(b"x" * 1000)
    (tmp_path / ".gitignore").write_text("/.device/\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".device" / "common").mkdir(parents=True)
    (tmp_path / ".device" / "common" / "w.whl").write_bytes(b"w" * 3000)
    (tmp_path / ".device" / "plan.txt").write_text("install a=cpu-reference\n")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_carry.py"), "split"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "no .device/a/bundle.tar" in p.stderr
    (tmp_path / ".device" / "a").mkdir()
    (tmp_path / ".device" / "a" / "bundle.tar").write_bytes(b"b" * 5000)
    assert carry.tree_size(tmp_path) == 1000 + len("/.device/\n")  # .device/ ignored: not the tree's
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_carry.py"), "split"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert 'call 1 (0.0 MiB): carry [".device/common", ".device/plan.txt", ".device/a"]' in p.stdout
    assert json.loads(p.stdout.split("carry ", 1)[1].splitlines()[0]) == [".device/common", ".device/plan.txt",
                                                                           ".device/a"]
