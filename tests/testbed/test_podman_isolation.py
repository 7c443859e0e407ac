"""Two testbed podmans on one machine do not share libpod's temp dir: CI failed when one test's
``podman system reset`` deleted /run/libpod (the default, machine-wide) while another worker's
containers ran ("creating runtime status file: open /run/libpod/alive")."""

from __future__ import annotations

import pytest

from envbuild.testbed.podman import Podman, why_unavailable

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable()))]


def test_one_podmans_reset_leaves_anothers_runtime_files(tmp_path):
    kept, reset = Podman(tmp_path / "kept"), Podman(tmp_path / "reset")
    for pm in (kept, reset):
        pm("info")
    alive = kept.root / "libpod" / "alive"
    assert alive.is_file()
    reset.remove_all()
    assert alive.is_file()
    assert not (reset.root / "libpod").exists()
    assert kept("info").returncode == 0
