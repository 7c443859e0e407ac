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


def test_a_prefix_under_home_keeps_meaning_home_in_scripts_and_the_env_file(tmp_path):
    """Polaris's prefix is planned as ~/.envbuild/envs/... without the node's facts: the rendered
    commands and the env file must reach $HOME, not a folder named '~' (no shell expands a
    quoted ~)."""
    from envbuild.actions.steps import env_file_text
    from envbuild.render.shell import q

    home = tmp_path / "home dir"
    home.mkdir()
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    subprocess.run(["bash", "-c", f"mkdir -p {q('~/.envbuild/envs/p q/state')}"], env=env, cwd=tmp_path, check=True)
    assert (home / ".envbuild" / "envs" / "p q" / "state").is_dir() and not (tmp_path / "~").exists()
    script = tmp_path / "env.sh"
    script.write_text(env_file_text("~/.envbuild/envs/p", {"X": "a b"}))
    out = subprocess.run(["bash", "-c", f'. {q(str(script))}; echo "$VIRTUAL_ENV|${{PATH%%:*}}|$X"'],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == f"{home}/.envbuild/envs/p|{home}/.envbuild/envs/p/bin|a b"
    # an absolute prefix is written as before
    assert "export VIRTUAL_ENV=/opt/e\n" in env_file_text("/opt/e", {})
