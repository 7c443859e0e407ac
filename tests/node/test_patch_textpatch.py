"""Declarative text patches: replace, regex, expect; idempotency; diffs (the module keeps to the node
package's rules: tests/node/test_node_package.py)."""

from __future__ import annotations


import pytest

from envbuild.node.textpatch import apply_text_patch, unified_diff
from support.paths import DATA

SRC = "import os\nDEBUG = False\nLEVEL = 1\n"


@pytest.mark.parametrize("kind,old,new,count", [
    ("replace", "DEBUG = False", "DEBUG = True", 1),
    ("regex", r"^LEVEL = \d+$", "LEVEL = 3", 1),
    ("replace", "import os\n", "import os\nimport sys\n", 1),  # new contains old
])
def test_apply_twice_is_already_applied_and_identical(kind, old, new, count):
    status, once = apply_text_patch(SRC, kind, old, new, count)
    assert status == "applied" and once != SRC
    status2, twice = apply_text_patch(once, kind, old, new, count)
    assert status2 == "already-applied" and twice == once


def test_replace_missing_text_fails_and_keeps_text():
    status, out = apply_text_patch(SRC, "replace", "VERBOSE = 0", "VERBOSE = 1", 1)
    assert status.startswith("failed: ") and "not found" in status and out == SRC


def test_replace_count_mismatch_fails():
    status, out = apply_text_patch("a\na\n", "replace", "a", "b", 1)
    assert status == "failed: expected 1 occurrence(s) of 'a', found 2" and out == "a\na\n"
    assert apply_text_patch("a\na\n", "replace", "a", "b", 0) == ("applied", "b\nb\n")


def test_regex_count_and_bad_regex():
    assert apply_text_patch(SRC, "regex", r"^\w+ = ", "X = ", 1)[0].startswith("failed: expected 1 match")
    assert apply_text_patch(SRC, "regex", r"(", "x", 1)[0].startswith("failed: bad regex")


def test_regex_that_matches_its_own_output_is_refused():
    status, out = apply_text_patch("x = 1\n", "regex", r"x = (\d)", r"x = \g<1>1", 1)
    assert "not idempotent" in status and out == "x = 1\n"


def test_regex_with_backrefs_applies_once():
    status, out = apply_text_patch(SRC, "regex", r"^DEBUG = (False)$", r"DEBUG = not \1", 1)
    assert status == "applied" and "DEBUG = not False" in out
    assert apply_text_patch(out, "regex", r"^DEBUG = (False)$", r"DEBUG = not \1", 1)[0].startswith("failed")


def test_expect_checks_presence_only():
    assert apply_text_patch(SRC, "expect", None, "LEVEL = 1", 1) == ("already-applied", SRC)
    status, out = apply_text_patch(SRC, "expect", None, "LEVEL = 2", 1)
    assert status.startswith("failed: expected text not found") and out == SRC


def test_unknown_kind_fails():
    assert apply_text_patch(SRC, "sed", "a", "b", 1)[0].startswith("failed: unknown patch kind")


def test_apex_kind_through_the_generic_entry():
    text = (DATA / "apex_shapes/d_2022_version/setup.py").read_text()
    status, out = apply_text_patch(text, "apex-cuda-check", None, None, 1)
    assert status == "applied"
    assert apply_text_patch(out, "apex-cuda-check", None, None, 1) == ("already-applied", out)
    other = (DATA / "apex_shapes/unknown_shape/setup.py").read_text()
    assert apply_text_patch(other, "apex-cuda-check", None, None, 1)[0].startswith("failed: unknown comparison")


def test_unified_diff_shape():
    _, after = apply_text_patch(SRC, "replace", "DEBUG = False", "DEBUG = True", 1)
    diff = unified_diff(SRC, after, "pkg/conf.py")
    assert diff.splitlines()[:2] == ["--- a/pkg/conf.py", "+++ b/pkg/conf.py"]
    assert "-DEBUG = False\n+DEBUG = True\n" in diff
    assert unified_diff(SRC, SRC, "x") == ""
    assert "\\ No newline at end of file" in unified_diff("a", "b", "x")
