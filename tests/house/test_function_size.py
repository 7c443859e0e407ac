"""The house's function-size limit (issue 55): no function or method in envbuild/ is longer than
``LIMIT`` lines, from its ``def`` (decorators not counted) to its last line, docstring included.
A long function is split along its concerns (checks, policy, prose), each a named helper."""

from __future__ import annotations

import ast
from pathlib import Path
from support.paths import ROOT

LIMIT = 100
PACKAGE = ROOT / "envbuild"


def long_functions(root: Path, limit: int) -> list[str]:
    """``path:first-last name (n lines)`` for every function or method under ``root`` longer
    than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    rel = path.relative_to(root.parent).as_posix()
                    found.append(f"{rel}:{node.lineno}-{node.end_lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_the_limit():
    long = long_functions(PACKAGE, LIMIT)
    assert not long, f"functions over {LIMIT} lines (split them along their concerns):\n" + "\n".join(long)


def test_the_walk_finds_a_long_function_and_a_long_method(tmp_path):
    """The check itself: a function and a method one line past the limit are named; one at the
    limit is not."""
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT - 1))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "def at_limit():\n" + body
        + "def over():\n" + body + "    return 0\n"
        + "class C:\n    def method(self):\n" + "".join("    " + line + "\n" for line in body.splitlines())
        + "        return 0\n")
    found = long_functions(tmp_path / "pkg", LIMIT)
    assert [f.split()[1] for f in found] == ["over", "method"]
    assert found[0] == f"pkg/m.py:{LIMIT + 1}-{2 * LIMIT + 1} over ({LIMIT + 1} lines)"
