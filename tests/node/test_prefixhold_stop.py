"""No node work outlives the lock of its prefix (issue 41): the node's lock holder
(envbuild/node/prefixhold.py), told nothing by a controller that went away (an interrupt, a
kill, a dropped connection), stops every process of the run (its environment carries the
prefix's TMPDIR, as the playbook sets it) before the lock is let go; a run that ends as planned
says DONE and nothing is stopped. Real processes and the real holder, on this machine."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from envbuild.node import prefixhold

NODE = Path(prefixhold.__file__).parent


def worker(prefix: Path, marked: bool) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(prefix / ".envbuild" / "tmp") if marked else "/tmp"}
    return subprocess.Popen(["sleep", "3600"], env=env)


def holder(prefix: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, str(NODE / "prefixhold.py"), str(prefix), '{"run": "t"}', "0"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "LOCKED"
    return p


def lock_free(prefix: Path) -> bool:
    with open(prefixhold.lock_path(str(prefix)), "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            return False


def test_a_controller_gone_without_done_stops_the_runs_work_before_the_lock_goes(tmp_path):
    prefix = tmp_path / "env"
    mine, other = worker(prefix, True), worker(prefix, False)
    try:
        assert prefixhold.run_processes(str(prefix)) == [mine.pid]
        hold = holder(prefix)
        assert not lock_free(prefix)
        hold.stdin.close()  # the controller went away: no DONE
        assert hold.stdout.readline().strip() == "STOPPED 1"
        assert hold.wait(timeout=30) == 0
        assert mine.wait(timeout=5) is not None  # stopped, before the holder ended
        assert lock_free(prefix)
        assert other.poll() is None  # a process of no run on this prefix is left alone
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def test_a_run_that_says_done_stops_nothing(tmp_path):
    prefix = tmp_path / "env"
    mine = worker(prefix, True)
    try:
        hold = holder(prefix)
        hold.stdin.write("DONE\n")
        hold.stdin.close()
        assert hold.wait(timeout=30) == 0 and hold.stdout.read() == ""
        time.sleep(0.2)
        assert mine.poll() is None
    finally:
        mine.kill()
        mine.wait()


def test_a_worker_that_ignores_sigterm_is_killed(tmp_path):
    prefix = tmp_path / "env"
    env = {**os.environ, "TMPDIR": str(prefix / ".envbuild" / "tmp")}
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], env=env)
    try:
        t0 = time.monotonic()
        assert stubborn.pid in prefixhold.stop_work(str(prefix), grace_s=1.0)
        assert stubborn.wait(timeout=10) is not None and time.monotonic() - t0 < 10
        assert prefixhold.run_processes(str(prefix)) == []
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
            stubborn.wait()
