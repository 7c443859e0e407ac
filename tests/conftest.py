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


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running ``envbuild.testbed.slurm.SlurmCluster``: 2 nodes (network namespaces), 2 fake
    GPUs (gres on /dev/tty0-1) and 16 CPUs each, shared by every Slurm test of the session.

    It never skips: without slurm-wlm/munge it installs them (root) or fails with the command.
    """
    from envbuild.testbed.slurm import slurm_cluster as start

    try:
        with start(2, gpus_per_node=2, cpus_per_node=16) as cluster:
            yield cluster
    except EnvironmentProblem as exc:
        pytest.fail(f"the Slurm test cluster could not start: {exc} ({exc.hint})", pytrace=False)
