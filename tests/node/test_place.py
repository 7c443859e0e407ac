"""The node runner's ``place`` action (envbuild.node.actions): the file ``envbuild_put``
transferred, put at its path only when its bytes are the ones sent."""

from __future__ import annotations

import hashlib

import pytest

from envbuild.node import actions as node_actions


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _place(src, dest, data, perm="0755"):
    return node_actions.run_actions([{"op": "place", "src": str(src), "path": str(dest), "perm": perm,
                                      "sha256": _sha(data)}])


def test_the_bytes_sent_are_put_with_their_mode_then_left_as_they_are(tmp_path):
    src, dest = tmp_path / "arrived", tmp_path / "tools" / "uv"
    dest.parent.mkdir()
    data = b"\x7fELF\x00binary\n\n"
    src.write_bytes(data)
    assert _place(src, dest, data)["changed"] is True
    assert dest.read_bytes() == data and oct(dest.stat().st_mode & 0o7777) == "0o755"
    assert not (tmp_path / "tools" / "uv.envbuild-tmp").exists()
    assert _place(src, dest, data)["changed"] is False  # the same bytes and mode: not changed
    assert _place(src, dest, data, perm="0644")["changed"] is True  # the mode differs: put again
    assert oct(dest.stat().st_mode & 0o7777) == "0o644"


def test_bytes_that_differ_from_the_ones_sent_are_refused_and_the_file_kept(tmp_path):
    src, dest = tmp_path / "arrived", tmp_path / "uv"
    dest.write_bytes(b"the node's own\n")
    src.write_bytes(b"truncated in transit")
    with pytest.raises(node_actions.ActionFailed, match="arrived with sha256 .* not the .* sent"):
        _place(src, dest, b"truncated in transit, and the rest")
    assert dest.read_bytes() == b"the node's own\n"
    assert not (tmp_path / "uv.envbuild-tmp").exists()


def test_a_mode_that_is_not_an_octal_string_is_refused(tmp_path):
    src = tmp_path / "arrived"
    src.write_bytes(b"x")
    with pytest.raises(node_actions.ActionFailed, match="must be an octal string"):
        node_actions.run_actions([{"op": "place", "src": str(src), "path": str(tmp_path / "y"), "perm": 493,
                                   "sha256": _sha(b"x")}])


def test_a_place_that_cannot_be_written_fails_cleanly_and_leaves_no_part(tmp_path):
    src, dest = tmp_path / "arrived", tmp_path / "uv"
    src.write_bytes(b"x")
    dest.mkdir()  # a folder where the file should go: the rename fails
    with pytest.raises(node_actions.ActionFailed, match="placing .* failed"):
        _place(src, dest, b"x")
    assert dest.is_dir() and not (tmp_path / "uv.envbuild-tmp").exists()


def _capture(tmp_path, name, argv, cwd=None):
    return {"op": "capture", "name": name, "argv": argv, "cwd": str(cwd or tmp_path), "dir": str(tmp_path / "out")}


def test_captures_report_what_they_wrote_also_when_one_fails(tmp_path):
    """``captured`` (each file's sha256 as written) comes with success and with the failure of a
    captured run, and with a later action's failure: envbuild_fetch brings back what was
    reported, the task then says why it failed."""
    from envbuild.node import task as node_task

    (tmp_path / "out").mkdir()
    ok, bad = _capture(tmp_path, "ok", ["sh", "-c", "echo fine"]), _capture(tmp_path, "bad", ["sh", "-c", "exit 3"])
    done = node_actions.run_actions([ok])
    written = {str(tmp_path / "out" / f"ok.{ext}") for ext in ("out", "err", "rc")}
    assert set(done["captured"]) == written
    for path, digest in done["captured"].items():
        assert hashlib.sha256(open(path, "rb").read()).hexdigest() == digest
    res = node_task.actions_task({"actions": [ok, bad], "node_path": None, "repair": False, "record": None}, False)
    assert res["failed"] and res["msg"].startswith("smoke failed: bad (exit 3)")
    assert set(res["captured"]) == written | {str(tmp_path / "out" / f"bad.{ext}") for ext in ("out", "err", "rc")}
    lost = _capture(tmp_path, "lost", ["true"], cwd=tmp_path / "no-such-folder")
    with pytest.raises(node_actions.ActionFailed) as failed:
        node_actions.run_actions([ok, lost])
    assert set(failed.value.captured) == written  # the first capture's files, reported
