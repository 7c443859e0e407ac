"""setup.py, read with ``ast`` (never run): install_requires and python_requires, literals only.

A literal list (or a name bound once at module level to one) gives one row per string, at its
own line; anything computed (``fetch_requirements("requirements/requirements.txt")``) is a
note naming the files the call's literal arguments name, which the draft then reads itself.

>>> d = parse('from setuptools import setup\\nsetup(\\n    install_requires=[\\n        "six",\\n    ],\\n'
...           '    python_requires=">=3.8",\\n)\\n')
>>> [(r.line, r.text) for r in d.requires], d.python
([(4, 'six')], Read(line=6, text='>=3.8'))
"""

from __future__ import annotations

import ast

from envbuild.draft.cite import Declared, Read


def _strings(node: ast.AST) -> list[Read] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [Read(e.lineno, e.value) for e in node.elts]  # type: ignore[attr-defined]
    return None


def _named_files(node: ast.AST) -> list[str]:
    """String constants of a computed value that look like requirement files."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.endswith((".txt", ".in"))]


def parse(text: str) -> Declared:
    """install_requires and python_requires of a setup.py (see module); a file that does not
    parse as Python is a note."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return Declared(notes=(f"setup.py does not parse as Python (line {exc.lineno}): not read",))
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    requires: list[Read] = []
    python = None
    notes: list[str] = []
    extras: tuple[tuple[str, tuple[Read, ...]], ...] = ()
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if not isinstance(node, ast.Call) or fname != "setup":
            continue
        for kw in node.keywords:
            value = names.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
            if kw.arg == "install_requires":
                literal = _strings(value)
                if literal is not None:
                    requires.extend(literal)
                else:
                    files = _named_files(value)
                    notes.append(f"setup.py:{kw.value.lineno}: install_requires is computed, not a literal"
                                 + (f" (it names {', '.join(files)})" if files else ""))
            elif kw.arg == "python_requires" and isinstance(value, ast.Constant) and isinstance(value.value, str):
                python = Read(value.lineno, value.value)
            elif kw.arg == "extras_require":
                name = kw.value.id if isinstance(kw.value, ast.Name) else None
                extras, skipped = _extras(value, name, tree)
                notes += [f"setup.py:{kw.value.lineno}: extras_require[{k!r}] is computed, not a literal: not read"
                          for k in skipped]
    return Declared(tuple(requires), python, tuple(notes), extras)


def _extras(value: ast.AST, name: str | None, tree: ast.Module) -> tuple[tuple[tuple[str, tuple[Read, ...]], ...],
                                                                          list[str]]:
    """The literal extras of ``extras_require``: a dict literal, or a name bound to one (or to
    ``{}``) and filled by module-level ``NAME['gpu'] = [...]`` assignments (or a copy of an
    extra assigned before: ``copy.deepcopy(NAME['gpu-flash2'])``); ``(extras, the keys whose
    value is computed)``."""
    out: dict[str, tuple[Read, ...]] = {}
    skipped: list[str] = []

    def put(key: ast.AST | None, rows: ast.AST) -> None:
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return
        # extra_deps['gpu'] = copy.deepcopy(extra_deps['gpu-flash2']): the same requirements
        inner = rows.args[0] if isinstance(rows, ast.Call) and len(rows.args) == 1 and not rows.keywords else rows
        if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and inner.value.id == name \
                and isinstance(inner.slice, ast.Constant) and inner.slice.value in out:
            out[key.value] = out[inner.slice.value]
            return
        literal = _strings(rows)
        if literal is None:
            skipped.append(key.value)
        else:
            out[key.value] = tuple(literal)

    if isinstance(value, ast.Dict):
        for k, v in zip(value.keys, value.values):
            put(k, v)
    if name is not None:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                    and isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id == name:
                put(node.targets[0].slice, node.value)
    return tuple(out.items()), skipped


def named_requirement_files(text: str) -> list[str]:
    """The requirement files a setup.py's computed install_requires names (``fetch_requirements(
    "requirements/requirements.txt")``), in order; [] when it does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names = {n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name)}
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            value = names.get(node.value.id, node.value) if isinstance(node.value, ast.Name) else node.value
            out.extend(f for f in _named_files(value) if f not in out)
    return out
