"""A loopback node's sessions start with the testbed's ``session_env`` (sshd's ``SetEnv``):
how a fleet's nodes get a uv cache of their own (envbuild.testbed.uvcache), and the
controller's CA bundle variables (``envbuild.testbed.sshd.ca_bundle_env``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envbuild.testbed.sshd import ssh_nodes

pytestmark = pytest.mark.integration


def _printenv(bed, *names: str) -> subprocess.CompletedProcess:
    (node,) = bed.nodes
    return subprocess.run(["ssh", "-i", node.key_path, "-p", str(node.port), "-o", f"UserKnownHostsFile={bed.known_hosts}",
                           "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"{node.user}@{node.host}",
                           "printenv " + " ".join(names)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_every_session_on_the_node_has_the_variables(tmp_path, monkeypatch):
    """Every pair reaches the session (sshd reads only its first SetEnv line), the controller's
    CA bundle variable among them (``ca_bundle_env``: what makes a node behind this machine's
    network install with uv rather than pip)."""
    cache = tmp_path / "uv cache"  # a space survives sshd's quoting
    bundle = tmp_path / "ca bundle.pem"
    monkeypatch.setenv("PIP_CERT", str(bundle))
    with ssh_nodes(1, first_address=23, base_dir=str(tmp_path),
                   session_env={"UV_CACHE_DIR": str(cache), "ENVBUILD_TEST_MARK": "two"}) as bed:
        p = _printenv(bed, "UV_CACHE_DIR", "ENVBUILD_TEST_MARK", "PIP_CERT")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [str(cache), "two", str(bundle)]


def test_a_named_ca_variable_wins_and_an_unset_one_is_not_made(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_CERT", "/controller/bundle.pem")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with ssh_nodes(1, first_address=23, base_dir=str(tmp_path), session_env={"PIP_CERT": "/node/bundle.pem"}) as bed:
        assert _printenv(bed, "PIP_CERT").stdout.strip() == "/node/bundle.pem"
        assert _printenv(bed, "SSL_CERT_FILE").returncode == 1  # printenv: not set


def test_a_value_sshd_cannot_hold_is_refused(tmp_path):
    with pytest.raises(ValueError, match="double quote or a newline"):
        with ssh_nodes(1, first_address=23, base_dir=str(tmp_path), session_env={"X": 'a"b'}):
            pass


def test_a_command_runs_without_the_users_bashrc(tmp_path):
    """sshd runs a command as ``bash -c`` at shell level 1, which reads ~/.bashrc; the bed's
    sessions start at SHLVL=1 (``NON_INTERACTIVE``), so it is not read: the PATH is sshd's own.
    Seen by the PATH: a bed made with ``read_bashrc=True`` has the bashrc's additions."""
    home = Path.home() / ".bashrc"
    if not home.exists() or "PATH" not in home.read_text():
        pytest.skip("this user's ~/.bashrc sets no PATH to tell it by")
    with ssh_nodes(1, first_address=23, base_dir=str(tmp_path)) as bed:
        p = _printenv(bed, "SHLVL", "PATH")
        with ssh_nodes(1, first_address=24, base_dir=str(tmp_path), read_bashrc=True) as read:
            q = _printenv(read, "PATH")
    assert p.returncode == 0 and q.returncode == 0, p.stderr + q.stderr
    shlvl, path = p.stdout.splitlines()
    read_path = q.stdout.strip().split(":")
    assert shlvl == "1" and set(read_path) - set(path.split(":")), (path, read_path)  # what the bashrc adds
