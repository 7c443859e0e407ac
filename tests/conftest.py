"""Shared fixtures. ``ssh_nodes``: three real OpenSSH nodes on loopback for the session.

It never skips: without sshd it fails with the install command (CI installs it).
"""

import pytest

from envbuild.errors import EnvironmentProblem


@pytest.fixture(scope="session")
def ssh_nodes():
    """A running ``envbuild.testbed.sshd.SshTestbed`` with 3 nodes (127.0.0.2-4)."""
    from envbuild.testbed.sshd import ssh_nodes as start

    try:
        with start(3) as bed:
            yield bed
    except EnvironmentProblem as exc:
        pytest.fail(f"loopback sshd nodes could not start: {exc} ({exc.hint})", pytrace=False)
