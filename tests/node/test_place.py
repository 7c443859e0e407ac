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
