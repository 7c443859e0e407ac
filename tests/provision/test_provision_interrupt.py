"""An interrupted provision stops its children, records where each node was, and never passes.

A real ``envbuild provision --target local`` whose recipe builds a source with a long
``sleep``; SIGINT or SIGTERM arrives while that build step runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.slowrecipe import provision_argv, slow_recipe

pytestmark = pytest.mark.integration

SLEEP = "987.25"  # a duration no other process on the machine sleeps for


def sleepers(duration: str = SLEEP) -> list[int]:
    """Pids of processes running ``sleep duration`` (a /proc scan, no ps)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1] == duration.encode():
            found.append(int(d.name))
    return found


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background shell may have left it ignored


def interrupted(tmp_path: Path, argv: list[str], env: dict[str, str], ready, sig: int,
                what: str) -> tuple[int, str, float]:
    """Run ``argv``, send ``sig`` once ``ready()`` says so: (exit code, output, seconds to exit)."""
    log = (tmp_path / "out.txt").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=default_sigint)
    try:
        deadline = time.time() + 300
        while not ready():
            assert proc.poll() is None, (tmp_path / "out.txt").read_text()[-3000:]
            assert time.time() < deadline, f"{what} never started"
            time.sleep(0.1)
        t0 = time.monotonic()
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    return rc, (tmp_path / "out.txt").read_text(), took


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_mid_ansible_stops_children_and_records_the_step(tmp_path, sig):
    recipe, mirror = slow_recipe(tmp_path, [f"sleep {SLEEP}"])
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    rc, out, _took = interrupted(tmp_path, provision_argv(recipe, mirror, tmp_path / "env"),
                                 {**os.environ, "ENVBUILD_HOME": str(home), "TMPDIR": str(tmp)}, sleepers, sig,
                                 "the build step")
    assert rc == 128 + sig, out[-3000:]
    assert sleepers() == [], "the build's sleep survived the interrupt"
    assert sorted(p.name for p in tmp.iterdir()) == []  # no module payload or temporary file left behind
    # what the killed module left is in the prefix's temporary folder, emptied by the next run's
    # state check (envbuild_state, which calls fresh_tmp)
    from envbuild.node.state import fresh_tmp, tmp_dir_of

    node_tmp = Path(tmp_dir_of(str(tmp_path / "env")))
    left = sorted(p.name for p in node_tmp.iterdir())
    assert all(name.startswith("ansible_") or name.startswith(("pip-", "tmp")) for name in left), left
    assert fresh_tmp(str(tmp_path / "env")) == left and list(node_tmp.iterdir()) == []

    [run] = [p for p in (home / "runs").iterdir() if p.is_dir() and not p.is_symlink()]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["signal"] == signal.Signals(sig).name
    assert meta["interrupted_at"] == {"local": "build:slowpkg"}
    res = json.loads((run / "nodes" / "local" / "result.json").read_text())
    assert res["status"] == "interrupted" and res["failed_step"] == "build:slowpkg"
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert {"host": "local", "step": "build:slowpkg", "kind": "interrupted"}.items() <= events[-1].items()
    assert "local: interrupted at build:slowpkg" in out
    assert not (home / "runs" / "latest").exists()  # an aborted run never becomes latest

    from envbuild.report import collect

    assert collect(run).verdict.status == "FAIL"


def playbooks_of(run_root: Path) -> list[int]:
    """Pids of ansible-playbook processes whose command line names a folder under ``run_root``."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0") if d.name.isdigit() else []
        except OSError:
            continue
        if any(a.endswith(b"ansible-playbook") for a in argv[:2]) and str(run_root).encode() in b" ".join(argv):
            found.append(int(d.name))
    return found


def processes_naming(folder: Path) -> list[int]:
    """Pids of processes whose command line names ``folder``."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and str(folder).encode() in (d / "cmdline").read_bytes():
                found.append(int(d.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


def test_a_killed_provision_takes_its_playbook_with_it(tmp_path):
    """SIGKILL (an OOM kill, ``kill -9``) gives envbuild no chance to stop anything: the playbook,
    started in its own session by ansible-runner, went on alone (and spun, its terminal gone, at
    a quarter of a core until the machine's end). It now ends with envbuild (PR_SET_PDEATHSIG)."""
    recipe, mirror = slow_recipe(tmp_path, [f"sleep {SLEEP}"])
    home = tmp_path / "home"
    log = (tmp_path / "out.txt").open("w")
    proc = subprocess.Popen(provision_argv(recipe, mirror, tmp_path / "env"), stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "ENVBUILD_HOME": str(home)})
    try:
        deadline = time.time() + 300
        while not (sleepers() and playbooks_of(home)):  # the build step runs, under this run's playbook
            assert proc.poll() is None, (tmp_path / "out.txt").read_text()[-3000:]
            assert time.time() < deadline, "the build step never started"
            time.sleep(0.1)
        proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    deadline = time.time() + 30
    while playbooks_of(home) and time.time() < deadline:
        time.sleep(0.2)
    left = playbooks_of(home)
    # the build step the playbook had started on the node (sh, the module, sleep), which SIGTERM
    # to the playbook does not reach: the node's lock holder, its controller gone without a
    # word, stops it before it lets go of the prefix's lock (issue 41: no node work outlives the
    # lock). Whenever the lock is free, nothing of the run is left.
    from envbuild.node.prefixhold import lock_path, run_processes

    deadline, free = time.time() + 60, False
    while time.time() < deadline and not free:
        with open(lock_path(str(tmp_path / "env")), "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                free = True
                work, sleeping = run_processes(str(tmp_path / "env")), sleepers()
            except OSError:
                time.sleep(0.2)
    stray = [] if free else sleepers()
    seen = {pid: _describe(pid) for pid in (work + sleeping if free else [])}
    # leave nothing running for the rest of the suite, whatever the assertions below say
    for pid in left + sleepers() + processes_naming(tmp_path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert left == [], "the playbook outlived the envbuild process that started it"
    assert free, f"the prefix's lock was still held 60 s after the kill (build step {stray})"
    assert work == [] and sleeping == [], ("node work outlived the prefix's lock", seen)


def test_dry_run_is_not_latest_and_not_ok(tmp_path):
    recipe, mirror = slow_recipe(tmp_path, ["true"])
    home = tmp_path / "home"
    p = subprocess.run(provision_argv(recipe, mirror, tmp_path / "env", "--dry-run"), capture_output=True,
                       text=True, timeout=300, env={**os.environ, "ENVBUILD_HOME": str(home)})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    [run] = [d for d in (home / "runs").iterdir() if d.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "dry-run"
    assert not (home / "runs" / "latest").exists()
    assert not (tmp_path / "env").exists()


HUNG_GPU = "986.75"  # how long the hung nvidia-smi sleeps (no other process sleeps for that)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_while_reading_facts_records_the_run_as_interrupted(tmp_path, sig):
    """A signal while provision reads the node's facts (here: nvidia-smi hangs, as it does on a
    GPU in a bad state; the one double, standing for absent hardware) ends the run at once as
    "interrupted" at "facts", exit 128 + signal, the hung command stopped, never a pass."""
    recipe, mirror = slow_recipe(tmp_path, ["true"])
    home, gpu = tmp_path / "home", tmp_path / "gpu-bin"
    gpu.mkdir()
    (gpu / "nvidia-smi").write_text(f"#!/bin/sh\nexec sleep {HUNG_GPU}\n")
    (gpu / "nvidia-smi").chmod(0o755)
    running: list[dict] = []

    def reading_facts() -> bool:  # nvidia-smi hangs and the run folder says "running"
        found = list((home / "runs").glob("*/run.json")) if sleepers(HUNG_GPU) else []
        running[:] = [json.loads(p.read_text()) for p in found]
        return bool(found)

    rc, out, took = interrupted(tmp_path, provision_argv(recipe, mirror, tmp_path / "env"),
                                {**os.environ, "ENVBUILD_HOME": str(home), "PATH": f"{gpu}:{os.environ['PATH']}"},
                                reading_facts, sig, "nvidia-smi of the facts")
    assert [r["status"] for r in running] == ["running"]  # the phase under test
    assert rc == 128 + sig, out[-3000:]
    from envbuild.facts.script import PROBE_TIMEOUT_S

    assert took < PROBE_TIMEOUT_S / 3, f"the process took {took:.1f} s to stop"  # not the hung probe's timeout
    assert sleepers(HUNG_GPU) == [], "the hung nvidia-smi survived the interrupt"

    [run] = [p for p in (home / "runs").iterdir() if p.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["signal"] == signal.Signals(sig).name, meta
    assert meta["phase"] == "facts" and meta["interrupted_at"] == {"local": "facts"}
    assert list(meta["phase_s"]) == ["bundle", "facts"], meta["phase_s"]  # up to the signal
    assert meta["finished"] is not None
    res = json.loads((run / "nodes" / "local" / "result.json").read_text())
    assert res["status"] == "interrupted" and res["failed_step"] == "facts"
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert {"host": "local", "step": "facts", "kind": "interrupted"}.items() <= events[-1].items()
    assert not (run / "nodes" / "local" / "facts.json").exists()  # nothing half-read recorded
    assert not list(run.rglob("*.tmp*")), "a file was left half-written"
    assert not (home / "runs" / "latest").exists()
    assert not (tmp_path / "env").exists()

    from envbuild.report import collect

    assert collect(run).verdict.status == "FAIL"


def test_error_while_planning_records_the_run_as_an_error(tmp_path):
    """An error after the run folder exists and before Ansible starts (here: --from-step names
    no step of the plan, found while planning) ends the run as "error" at "plan", with the
    exit code of its error (2: bad input), not "running" and not a pass."""
    recipe, mirror = slow_recipe(tmp_path, ["true"])
    home = tmp_path / "home"
    p = subprocess.run(provision_argv(recipe, mirror, tmp_path / "env", "--from-step", "no-such-step"),
                       capture_output=True, text=True, timeout=300, env={**os.environ, "ENVBUILD_HOME": str(home)})
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "--from-step no-such-step: no such step" in p.stdout + p.stderr
    [run_json] = list((home / "runs").glob("*/run.json"))
    meta = json.loads(run_json.read_text())
    assert meta["status"] == "error" and meta["phase"] == "plan", meta
    assert "no-such-step" in meta["error"]
    assert list(meta["phase_s"]) == ["bundle", "facts", "preflight", "lock", "plan"], meta["phase_s"]
    res = json.loads((run_json.parent / "nodes" / "local" / "result.json").read_text())
    assert res["status"] == "error" and res["failed_step"] == "plan"
    assert not (home / "runs" / "latest").exists()
    assert not (tmp_path / "env").exists()


def _describe(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200].decode(errors="replace")
                + f" (parent {Path(f'/proc/{pid}/stat').read_text().split()[3]})")
    except OSError:
        return "gone"


def test_an_interrupted_run_on_an_ssh_node_stops_its_work_before_the_lock_goes(tmp_path):
    """Issue 41: on a node reached over SSH (a loopback sshd node), SIGINT mid-build: the
    controller stops at once, and the node's build step (here a long sleep) does not run on
    after the prefix's lock is let go, as it did (pip ran 12-16 s on to the end of its step)."""
    from envbuild.node.prefixhold import lock_path, run_processes
    from envbuild.testbed import sshd

    recipe, mirror = slow_recipe(tmp_path, [f"sleep {SLEEP}"])
    prefix = tmp_path / "env"
    with sshd.ssh_nodes(1, first_address=94) as bed:
        argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", str(recipe),
                "--git-mirror", str(mirror), "--prefix", str(prefix), "--no-smoke",
                "--inventory", str(bed.inventory_path)]
        env = {**os.environ, **bed.env, "ENVBUILD_HOME": str(tmp_path / "home")}
        rc, out, _ = interrupted(tmp_path, argv, env, sleepers, signal.SIGINT, "the build step")
        deadline, free = time.time() + 60, False
        while time.time() < deadline and not free:
            with open(lock_path(str(prefix)), "a+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    free = True
                    work, sleeping = run_processes(str(prefix)), sleepers()
                except OSError:
                    time.sleep(0.2)
        seen = {pid: _describe(pid) for pid in (work + sleeping if free else [])}
        for pid in sleepers() + processes_naming(tmp_path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert rc == 128 + signal.SIGINT, out[-3000:]
    assert free, "the prefix's lock was still held 60 s after the interrupt"
    assert work == [] and sleeping == [], ("node work outlived the prefix's lock", seen)
