"""Declarative text patches as pure functions on file text (stdlib only).

It is part of envbuild's node package: it also runs on GPU nodes under the node's own Python
(the package's floor or newer: ``envbuild/node/__init__.py``), so it imports nothing outside
the standard library. Every function takes text and returns text; reading and writing files is
the caller's job (``actions.do_patch``).

Statuses returned by :func:`apply_text_patch`:
    ``"applied"``          the text changed
    ``"already-applied"``  the text already is in the desired state (nothing to do)
    ``"failed: <why>"``    the patch does not fit this text; the text is returned unchanged

Example::

    >>> apply_text_patch("a = 1\\n", "replace", "a = 1", "a = 2", 1)
    ('applied', 'a = 2\\n')
    >>> apply_text_patch("a = 2\\n", "replace", "a = 1", "a = 2", 1)
    ('already-applied', 'a = 2\\n')

The patch tool of the shell and container renderers is the node tool (``__main__.py``), which
applies a patch with ``envbuild.node.actions.do_patch``, as Ansible's module does.
"""

from __future__ import annotations

import ast
import difflib
import re
from typing import List, Optional, Tuple

KINDS = ("replace", "regex", "expect", "apex-cuda-check")


def apply_text_patch(
    text: str, kind: str, old: Optional[str], new: Optional[str], count: int = 1
) -> Tuple[str, str]:
    """Apply one declarative patch to ``text``; return ``(status, new_text)``.

    ``kind`` is ``replace`` (literal), ``regex`` (``old`` is a regex with MULTILINE, ``new`` a
    replacement template), ``expect`` (``new`` must be present; never changes the text) or
    ``apex-cuda-check`` (see :func:`neutralize_apex_cuda_check`). ``count`` is the number of
    matches expected (0 = any number). Applying a patch twice gives ``already-applied`` and
    identical text.
    """
    if kind == "replace":
        return _replace(text, old or "", new or "", count)
    if kind == "regex":
        return _regex(text, old or "", new or "", count)
    if kind == "expect":
        if new is None or new == "":
            return "failed: an expect patch needs the text that must be present", text
        if new in text:
            return "already-applied", text
        return "failed: expected text not found: %s" % _short(new), text
    if kind == "apex-cuda-check":
        status, new_text, detail = neutralize_apex_cuda_check(text)
        if status in ("applied", "already-applied"):
            return status, new_text
        if status == "not-needed":
            return "already-applied", text
        return "failed: %s" % detail, text
    return "failed: unknown patch kind %r (known: %s)" % (kind, ", ".join(KINDS)), text


def _replace(text: str, old: str, new: str, count: int) -> Tuple[str, str]:
    if not old:
        return "failed: a replace patch needs a non-empty 'old'", text
    n_old = text.count(old)
    if new and new in text:
        # Done already when old is gone, or when every remaining old is part of a new.
        if n_old == 0 or (old in new and n_old == text.count(new) * new.count(old)):
            return "already-applied", text
    if n_old == 0:
        return "failed: text to replace not found: %s" % _short(old), text
    if count and n_old != count:
        return "failed: expected %d occurrence(s) of %s, found %d" % (count, _short(old), n_old), text
    return "applied", text.replace(old, new)


def _regex(text: str, pattern: str, template: str, count: int) -> Tuple[str, str]:
    try:
        rx = re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        return "failed: bad regex %s: %s" % (_short(pattern), exc), text
    matches = list(rx.finditer(text))
    if not matches:
        literal = "\\" not in template
        if literal and template and template in text:
            return "already-applied", text
        return "failed: regex %s matches nothing" % _short(pattern), text
    try:
        new_text = rx.sub(template, text)
    except (re.error, IndexError) as exc:
        return "failed: bad replacement %s: %s" % (_short(template), exc), text
    if new_text == text:
        return "already-applied", text
    if count and len(matches) != count:
        return "failed: expected %d match(es) of %s, found %d" % (count, _short(pattern), len(matches)), text
    if rx.sub(template, new_text) != new_text:
        return (
            "failed: regex %s is not idempotent (it matches its own replacement; anchor it)"
            % _short(pattern),
            text,
        )
    return "applied", new_text


def unified_diff(before: str, after: str, path: str) -> str:
    """A ``git diff``-style unified diff of ``before`` -> ``after`` for ``path`` ('' if equal)."""
    if before == after:
        return ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="a/" + path,
        tofile="b/" + path,
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _short(s: str, n: int = 60) -> str:
    s = s.replace("\n", "\\n")
    return repr(s if len(s) <= n else s[: n - 3] + "...")


# --- Apex's CUDA-vs-torch check -------------------------------------------------------------

CHECK_FN = "check_cuda_torch_binary_vs_bare_metal"
MARKER = "# envbuild: major-only CUDA check (a minor nvcc/torch mismatch is tolerated)"


def neutralize_apex_cuda_check(text: str) -> Tuple[str, str, str]:
    """Make Apex's setup.py tolerate a minor CUDA mismatch; keep the major check.

    Rewrites the comparison inside ``check_cuda_torch_binary_vs_bare_metal`` so that only a
    different CUDA *major* between nvcc and torch raises. Knows every historic shape: the
    ``(bare_metal_major != torch_binary_major) or (bare_metal_minor != ...)`` test (2019-05
    #323 to 2022-10), tuples of majors/minors, the exact ``packaging`` Version comparison
    (5f1a73ec, 2022-10 onwards), whatever the line breaks and parentheses, and whether the
    call passes ``torch.utils.cpp_extension.CUDA_HOME`` (before 2021-09) or ``CUDA_HOME``.

    Returns ``(status, new_text, detail)`` with status ``applied``, ``already-applied``,
    ``not-needed`` (warning-only 2019 check, check never called, or already major-only; text
    unchanged) or ``unrecognized`` (no known shape; text unchanged; ``detail`` says why).
    """
    if CHECK_FN not in text:
        return "unrecognized", text, ("no %s in this file: not an Apex setup.py, or an Apex "
                                      "from before the check (2019-03-21, 5b8faa29)" % CHECK_FN)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return "unrecognized", text, "setup.py does not parse (%s, line %s)" % (exc.msg, exc.lineno)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == CHECK_FN), None)
    if fn is None:
        return "unrecognized", text, "%s is mentioned but never defined" % CHECK_FN
    lines = _LineIndex(text)
    if MARKER in lines.segment(fn):
        return "already-applied", text, "%s already raises only on a major mismatch" % CHECK_FN
    calls = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == CHECK_FN
    ]
    if not calls:
        return ("not-needed", text, "%s is defined but never called (the call was removed, e.g. by a "
                "published sed): no CUDA check runs, not even the major one" % CHECK_FN)
    call_as = "%s(%s)" % (CHECK_FN, ", ".join(lines.segment(a) for a in calls[0].args))
    raising = [n for n in ast.walk(fn) if isinstance(n, ast.If) and _raises(n.body)]
    if not raising:
        if any(isinstance(n, ast.Raise) for n in ast.walk(fn)):
            return "unrecognized", text, "%s raises outside an if-test; unknown shape" % CHECK_FN
        return ("not-needed", text, "warning-only check (2019 shape): a mismatch only prints a "
                "warning, nothing to relax")
    if len(raising) != 1:
        return "unrecognized", text, "%s has %d raising if-tests; unknown shape" % (CHECK_FN, len(raising))
    node = raising[0]
    test = node.test
    if isinstance(test, ast.Constant) and test.value is False:
        return ("not-needed", text, "the check is disabled entirely ('if False:', e.g. by a published "
                "sed): not even a major mismatch is caught")
    new_cond, shape = _major_only(test, lines)
    if new_cond is None:
        return "unrecognized", text, "unknown comparison %r in %s (line %d)" % (
            lines.segment(test), CHECK_FN, test.lineno)
    if new_cond == "":
        return "not-needed", text, "%s already compares only the CUDA major" % CHECK_FN
    span = _header_span(text, lines, node)
    if span is None:
        return "unrecognized", text, "cannot delimit the if-header at line %d" % node.lineno
    start, end = span
    new_text = text[:start] + "if %s:  %s" % (new_cond, MARKER) + text[end:]
    try:
        ast.parse(new_text)
    except SyntaxError as exc:  # never hand back broken code
        return "unrecognized", text, "rewrite would not parse (%s); left unchanged" % exc.msg
    return "applied", new_text, "line %d: %s -> major-only (called as %s)" % (node.lineno, shape, call_as)


def _raises(body: List[ast.stmt]) -> bool:
    return any(isinstance(m, ast.Raise) for b in body for m in ast.walk(b))


def _major_only(test: ast.expr, lines: "_LineIndex") -> Tuple[Optional[str], str]:
    """The major-only condition for ``test``: (source, shape), ("", ...) if already so, (None, "")."""
    src = lines.segment
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) == 2:
        parts = [v for v in test.values if _is_ne(v)]
        major = [v for v in parts if "major" in src(v) and "minor" not in src(v)]
        minor = [v for v in parts if "minor" in src(v) and "major" not in src(v)]
        if len(parts) == 2 and len(major) == 1 and len(minor) == 1:
            return src(major[0]), "major/minor comparison (2019 #323 to 2022)"
        return None, ""
    if _is_ne(test):
        left, right = test.left, test.comparators[0]
        if isinstance(left, ast.Tuple) and isinstance(right, ast.Tuple) and left.elts and right.elts:
            return "%s != %s" % (src(left.elts[0]), src(right.elts[0])), "(major, minor) tuple comparison"
        whole = src(test)
        if "minor" in whole:
            return None, ""
        if "major" in whole:
            return "", ""
        return ('str(%s).split(".")[0] != str(%s).split(".")[0]' % (src(left), src(right)),
                "exact version comparison (packaging Version, 5f1a73ec and later)")
    return None, ""


def _is_ne(node: ast.expr) -> bool:
    return isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.NotEq)


def _header_span(text: str, lines: "_LineIndex", node: ast.If) -> Optional[Tuple[int, int]]:
    """Character span of ``if <test>:`` including parentheses and line breaks around the test."""
    start = lines.offset(node.lineno, node.col_offset)
    if not text.startswith("if", start):
        return None
    test_start = lines.offset(node.test.lineno, node.test.col_offset)
    opened = text[start + 2:test_start]
    if opened.strip(" \t\r\n\\("):
        return None
    i = lines.offset(node.test.end_lineno, node.test.end_col_offset)
    closes = 0
    while i < len(text) and text[i] != ":":
        if text[i] == ")":
            closes += 1
        elif text[i] not in " \t\r\n\\":
            return None
        i += 1
    if i >= len(text) or closes != opened.count("("):
        return None
    return start, i + 1


class _LineIndex:
    """Maps ast (line, UTF-8 byte column) positions to offsets in ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for m in re.finditer("\n", text):
            self.starts.append(m.end())

    def offset(self, lineno: int, col: int) -> int:
        base = self.starts[lineno - 1]
        end = self.starts[lineno] if lineno < len(self.starts) else len(self.text)
        line = self.text[base:end]
        return base + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    def segment(self, node: ast.AST) -> str:
        a = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        b = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return self.text[a:b]
