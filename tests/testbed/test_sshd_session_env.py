"""A loopback node's sessions start with the testbed's ``session_env`` (sshd's ``SetEnv``):
how a fleet's nodes get a uv cache of their own (envbuild.testbed.uvcache)."""

from __future__ import annotations

import subprocess

import pytest

from envbuild.testbed.sshd import ssh_nodes

pytestmark = pytest.mark.integration


def test_every_session_on_the_node_has_the_variables(tmp_path):
    cache = tmp_path / "uv cache"  # a space survives sshd's quoting
    with ssh_nodes(1, first_address=23, base_dir=str(tmp_path), session_env={"UV_CACHE_DIR": str(cache)}) as bed:
        (node,) = bed.nodes
        p = subprocess.run(["ssh", "-i", node.key_path, "-p", str(node.port), "-o", f"UserKnownHostsFile={bed.known_hosts}",
                            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"{node.user}@{node.host}",
                            "printenv UV_CACHE_DIR"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(cache)


def test_a_value_sshd_cannot_hold_is_refused(tmp_path):
    with pytest.raises(ValueError, match="double quote or a newline"):
        with ssh_nodes(1, first_address=23, base_dir=str(tmp_path), session_env={"X": 'a"b'}):
            pass
