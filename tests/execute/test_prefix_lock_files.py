"""The controller's prefix locks no one else can bend (issue 41): the lock folder must be this
user's own real folder (a link or another user's folder in a shared /tmp is refused), a link
planted where a lock file goes is never followed, and one prefix written several ways is one lock."""

from __future__ import annotations

import os

import pytest

from envbuild.connect.nodes import Node
from envbuild.errors import EnvironmentProblem
from envbuild.execute import prefixlock

NODE = Node(name="n1", host="Node1", user="root", port=22)


@pytest.fixture
def tmp_lock_home(tmp_path, monkeypatch):
    """The default layout (/tmp/envbuild-<uid>/locks) under tmp_path: no ENVBUILD_LOCK_DIR."""
    monkeypatch.delenv("ENVBUILD_LOCK_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    return tmp_path / "run" / "envbuild"


def test_one_prefix_written_several_ways_is_one_lock():
    keys = {prefixlock.key(NODE, p) for p in ("/opt/env", "/opt/env/", "//opt//env", "/opt/./env")}
    assert len(keys) == 1
    assert prefixlock.key(Node(name="n1", host="node1", user="root"), "/opt/env") in keys
    assert prefixlock.key(NODE, "/opt/other") not in keys


def test_a_link_where_the_lock_folder_goes_is_refused(tmp_lock_home, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tmp_lock_home.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(EnvironmentProblem) as err:
        with prefixlock.held([(NODE, "/opt/env")], "run-1"):
            pass
    assert "is a link" in err.value.message and not list(elsewhere.iterdir())


def test_another_users_lock_folder_is_refused(tmp_lock_home):
    tmp_lock_home.mkdir(mode=0o777)
    os.chown(tmp_lock_home, 65534, 65534)
    with pytest.raises(EnvironmentProblem) as err:
        with prefixlock.held([(NODE, "/opt/env")], "run-1"):
            pass
    assert "owned by uid 65534" in err.value.message


def test_a_wide_open_folder_of_ours_is_narrowed(tmp_lock_home):
    tmp_lock_home.mkdir()
    os.chmod(tmp_lock_home, 0o777)
    with prefixlock.held([(NODE, "/opt/env")], "run-1"):
        assert (tmp_lock_home.stat().st_mode & 0o777) == 0o700
        assert ((tmp_lock_home / "locks").stat().st_mode & 0o777) == 0o700


def test_a_link_planted_where_the_lock_file_goes_is_not_followed(tmp_lock_home, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    locks = prefixlock.private_dir(tmp_lock_home / "locks")
    (locks / f"{prefixlock.key(NODE, '/opt/env')}.lock").symlink_to(victim)
    with pytest.raises(EnvironmentProblem) as err:
        with prefixlock.held([(NODE, "/opt/env")], "run-1"):
            pass
    assert "cannot open the lock file" in err.value.message and victim.read_text() == "keep me\n"
