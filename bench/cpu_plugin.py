"""A pytest plugin for bench/suite_bench.py: the CPU time each test costs, children included.

    python -m pytest -p bench.cpu_plugin ...   (suite_bench.py --cpu adds it)

For every test (setup, call and teardown, so a session fixture is charged to the first test that
asks for it), the worker's own user+system time and that of its waited-for descendants
(``RUSAGE_CHILDREN``: ansible-playbook, podman, the nodes' sshd and what they ran, once reaped)
are read before and after. One JSON line per test goes to ``$ENVBUILD_CPU_LOG/<worker>.jsonl``.
What a daemon that outlives the test does (a Slurm controller a fixture keeps for the run) is
charged when it is reaped, to whichever test is running then; what is never reaped is missed.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get("ENVBUILD_CPU_LOG")
    if not folder:
        yield
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    own0, kids0 = _cpu()
    t0 = time.monotonic()
    yield
    own1, kids1 = _cpu()
    row = {"test": item.nodeid, "wall_s": round(time.monotonic() - t0, 2),
           "own_cpu_s": round(own1 - own0, 2), "children_cpu_s": round(kids1 - kids0, 2)}
    with (Path(folder) / f"{worker}.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
