"""What a setup's own entry scripts import, read with ``ast`` at the pinned commit.

The recipe names its entry scripts (``entry_scripts``: the programs its launch commands run,
e.g. metaseq's ``metaseq_cli/train.py``). ``script_imports`` is a pure parser of one
script's text: every absolute ``import X.Y`` / ``from X.Y import Z`` anywhere in the file,
each marked ``optional`` when it sits in a ``try`` whose handler catches ImportError (the
script runs without it). ``generate`` reads the scripts from a git mirror (``git show
SHA:PATH``) and returns the fact that ``envbuild imports`` writes to
``envbuild/recipes/imports/<recipe>.yaml``: repository, commit, script paths and modules. CI
has no GitHub, so the fact file is committed and the import proof reads it.

Example::

    >>> [m.name for m in script_imports("import os\\nfrom megatron import get_args\\n")]
    ['os', 'megatron']
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import yaml

from envbuild import gitsrc
from envbuild.errors import CheckFailed, InputError
from envbuild.recipes.schema import Recipe
from envbuild.shipped import SCRIPT_IMPORTS

FACT_DIR = SCRIPT_IMPORTS
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Imported:
    name: str  # dotted module name, e.g. "megatron.model"
    optional: bool  # inside try/except ImportError: the script runs without it


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kind = handler.type
    if kind is None:
        return True
    names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(isinstance(n, ast.Name) and n.id in IMPORT_ERRORS for n in names)


def script_imports(text: str, filename: str = "<script>") -> list[Imported]:
    """Absolute imports of a Python script in first-seen order, each once (pure).

    A module imported both guarded and unguarded counts as required. Relative imports and
    ``__future__`` are left out; a script that does not parse is an InputError naming it.
    """
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        raise InputError(f"{filename}:{exc.lineno}: not Python this parser reads ({exc.msg})",
                         hint="entry_scripts must name Python scripts") from None
    found: dict[str, bool] = {}

    def visit(node: ast.AST, guarded: bool) -> None:
        child: ast.AST
        if isinstance(node, ast.Try):
            inner = guarded or any(_catches_import_error(h) for h in node.handlers)
            for child in node.body:
                visit(child, inner)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, guarded)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for name in names:
            if name != "__future__":
                found[name] = found.get(name, True) and guarded
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return [Imported(name, optional) for name, optional in found.items()]


def generate(recipe: Recipe, mirror_dir: Path) -> dict:
    """The import fact of ``recipe``: per entry script its repository, commit, path and
    modules (required and optional), read from ``mirror_dir``; CheckFailed when a script or
    its commit is not there."""
    scripts = []
    for entry in recipe.entry_scripts:
        src = recipe.source(entry.component)
        if src is None or src.sha is None:
            raise InputError(f"recipe {recipe.name}: entry script {entry.path} names component "
                             f"{entry.component!r}, which is not a pinned git source",
                             hint="entry_scripts[].component must be one of sources[].name")
        repo = gitsrc.mirror_path(src.url, mirror_dir)
        if repo is None or not gitsrc.has_commit(repo, src.sha):
            raise CheckFailed(f"{src.url} @ {src.sha[:12]} is not in the mirror {mirror_dir}",
                              hint="fetch the repository into the mirror folder first")
        proc = gitsrc.run_git(["show", f"{src.sha}:{entry.path}"], cwd=repo, check=False)
        if proc.returncode != 0:
            raise CheckFailed(f"{entry.path} does not exist at {src.sha[:12]} in {src.url}",
                              hint="fix entry_scripts[].path in the recipe")
        found = script_imports(proc.stdout, f"{entry.component}:{entry.path}")
        tops = _tree_tops(repo, src.sha, [str(Path(entry.path).parent), ""])
        scripts.append({"component": entry.component, "repo": src.url, "sha": src.sha,
                        "path": entry.path,
                        "modules": [m.name for m in found if not m.optional],
                        "optional": [m.name for m in found if m.optional],
                        "local": [m.name for m in found if m.name.split(".", 1)[0] in tops]})
    return {"schema": "envbuild.imports/1", "recipe": recipe.name, "scripts": scripts}


def _tree_tops(repo: Path, sha: str, roots: list[str]) -> set[str]:
    """Module names a script finds in its own tree: the entries of its folder and of the
    repository root (``X/`` or ``X.py``), as Python's sys.path[0] and a run from the root."""
    out: set[str] = set()
    for root in dict.fromkeys(r for r in roots if r != "."):
        spec = f"{sha}:{root}" if root else sha
        proc = gitsrc.run_git(["ls-tree", "--name-only", spec], cwd=repo, check=False)
        out.update(n.removesuffix(".py") for n in proc.stdout.split())
    return out


def fact_path(recipe: str) -> Path:
    """``envbuild/recipes/imports/<recipe>.yaml`` (shipped with the package)."""
    return FACT_DIR / f"{recipe}.yaml"


def dump(fact: dict) -> str:
    head = (f"# DO NOT EDIT: generated by envbuild from the scripts at the commits below; regenerate with:\n"
            f"#   envbuild imports {fact['recipe']} --git-mirror DIR\n")
    return head + yaml.safe_dump(fact, sort_keys=False, width=100)


def read_fact(recipe: str) -> dict | None:
    """The committed import fact of ``recipe``, or None when it has none."""
    path = fact_path(recipe)
    if not path.is_file():
        return None
    return yaml.safe_load(path.read_text())
