"""The testbed podman's runroot lies in a short folder of its own, whatever its root: under a
root as deep as the suite's temp folders, every ``podman run`` waited out conmon's 20 s timeout
before it heard that its container had exited (``envbuild.testbed.podman.runroot_of``)."""

from __future__ import annotations

import pytest

from envbuild.testbed.chroot import rootfs
from envbuild.testbed.chroot import why_unavailable as no_rootfs
from envbuild.testbed.podman import Podman, runroot_of, why_unavailable

DEEP = "envbuild-suite-abcdef/pytest/popen-gw0/test_a_container_run_under_a_d0/" + "d" * 40


def test_the_runroot_is_short_and_named_for_its_root(tmp_path):
    deep, other = Podman(tmp_path / DEEP / "podman"), Podman(tmp_path / "other")
    conf = (deep.root / "storage.conf").read_text()
    assert f'runroot = "{deep.runroot}"' in conf and f'graphroot = "{deep.root}/graph"' in conf
    assert deep.runroot == runroot_of(tmp_path / DEEP / "podman")  # the same root: the same folder
    assert deep.runroot != other.runroot
    assert not deep.runroot.is_relative_to(deep.root)
    assert len(str(deep.runroot)) <= 40 < len(str(deep.root))


@pytest.mark.integration
@pytest.mark.skipif(why_unavailable() is not None or no_rootfs() is not None,
                    reason=str(why_unavailable() or no_rootfs()))
def test_a_container_runs_under_a_deep_root_and_its_runroot_goes_with_it(tmp_path):
    pm = Podman(tmp_path / DEEP / "podman")
    pm.import_rootfs(rootfs(), "localhost/envbuild-deep:1",
                     exclude=("./usr/share", "./usr/lib/python3.11", "./var"))
    try:
        out = pm("run", "--rm", "--network=none", "localhost/envbuild-deep:1", "sh", "-c", "echo ran")
        assert out.stdout.strip() == "ran"
        assert pm.runroot.is_dir()
    finally:
        pm.remove_all()
    assert not pm.runroot.exists() and not pm.root.exists()
