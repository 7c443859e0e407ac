"""The controller's lock folder is in a place only its user can create (issue 54): never a name
in the shared /tmp, which another local user could make first and so block every run of this
user's until ``ENVBUILD_LOCK_DIR`` is set. Without a private ``$XDG_RUNTIME_DIR`` the locks go
to ``$ENVBUILD_HOME/locks``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.execute import prefixlock


def test_an_xdg_runtime_dir_others_may_write_in_is_not_used(tmp_path, monkeypatch):
    monkeypatch.delenv("ENVBUILD_LOCK_DIR", raising=False)
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp is
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    assert prefixlock.lock_dir() == tmp_path / "home" / "locks"
    private = tmp_path / "run-user"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))
    assert prefixlock.lock_dir() == private / "envbuild" / "locks"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert prefixlock.lock_dir() == tmp_path / "home" / "locks"
    assert not str(prefixlock.lock_dir()).startswith("/tmp/envbuild-")


@pytest.mark.process
@pytest.mark.skipif(os.getuid() != 0, reason="making a folder another user owns needs root")
def test_a_folder_another_user_made_in_tmp_does_not_block_a_run(tmp_path):
    """Another user (uid 65534) made /tmp/envbuild-<uid> first, as anyone may in a shared /tmp;
    a run of this user's, in a session without XDG_RUNTIME_DIR (cron, a plain ssh command),
    still takes its locks, in its ENVBUILD_HOME."""
    squatted = Path(f"/tmp/envbuild-{os.getuid()}")
    if os.path.lexists(squatted):
        pytest.skip(f"{squatted} exists already: not ours to change")
    squatted.mkdir(mode=0o755)
    try:
        os.chown(squatted, 65534, 65534)
        code = ("from envbuild.execute import prefixlock\nfrom envbuild.connect.nodes import Node\n"
                f"with prefixlock.held([(Node(name='local', connection='local'), {str(tmp_path / 'env')!r})], 'r'):\n"
                "    print(prefixlock.lock_dir())\n")
        env = {k: v for k, v in os.environ.items() if k not in ("ENVBUILD_LOCK_DIR", "XDG_RUNTIME_DIR")}
        env["ENVBUILD_HOME"] = str(tmp_path / "home")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.strip() == str(tmp_path / "home" / "locks")
        assert list((tmp_path / "home" / "locks").glob("*.lock")) and not list(squatted.iterdir())
        assert (os.stat(tmp_path / "home" / "locks").st_mode & 0o777) == 0o700
    finally:
        shutil.rmtree(squatted, ignore_errors=True)
