"""Rendered shell words run as written: build parallelism planned for a bigger target is capped
at the builder's cores when the script or image is built elsewhere (envbuild.render.shell)."""

from __future__ import annotations

import os
import subprocess

import pytest

from envbuild.render.shell import argv_line


@pytest.mark.parametrize("planned", [1, 96])
def test_max_jobs_is_the_planned_value_or_the_builders_cores(planned):
    line = argv_line(["sh", "-c", 'echo "$MAX_JOBS $X"'], env={"MAX_JOBS": str(planned), "X": "a b; c"})
    for shell in ("sh", "bash"):
        out = subprocess.run([shell, "-c", line], capture_output=True, text=True, check=True).stdout.split(" ", 1)
        assert int(out[0]) == min(planned, len(os.sched_getaffinity(0))), (shell, line, out)
        assert out[1] == "a b; c\n"
