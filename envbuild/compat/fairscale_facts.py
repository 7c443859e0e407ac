"""The version fairscale declares at a commit, read from its own files; the committed facts.

fairscale declares its version in its tree, in one of three ways over its history (read in
facebookresearch/fairscale): ``__version__ = "0.4.1"`` in fairscale/__init__.py up to 0.4.2,
``__version_tuple__ = (0, 4, 3)`` in fairscale/__init__.py at 68d10f73 (0.4.3), and
``__version_tuple__ = (0, 4, 6)`` in fairscale/version.py from 49eacf12 (2021-12-21) on, which
__init__.py joins into ``__version__``. ``declared_version`` is a pure parser of those files'
texts. ``generate`` reads them at each fairscale commit a shipped recipe pins (and the few
``ALSO_READ``) from a git mirror (``git show SHA:PATH``) and returns the fact that
``python -m envbuild.compat.fairscale_facts --git-mirror DIR`` writes to
``envbuild/compat/fairscale_versions.yaml``. CI has no GitHub, so that file is committed, and
the preflight rows read it (``load``), never the mirror.

Example::

    >>> declared_version({"fairscale/version.py": "__version_tuple__ = (0, 4, 6)\\n"})
    ('0.4.6', 'fairscale/version.py', '__version_tuple__ = (0, 4, 6)')
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import yaml

from envbuild import gitsrc
from envbuild.compat import commits as cm
from envbuild.errors import CheckFailed, EnvbuildError, InputError
from envbuild.fsio import write_atomic
from envbuild.recipes import all_recipes, load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.shipped import COMPAT

FACT_PATH = COMPAT / "fairscale_versions.yaml"
REPO = "https://github.com/facebookresearch/fairscale"
# where fairscale declares its version, in the order fairscale itself reads it: version.py when
# the tree has one (__init__.py then only imports its tuple), else __init__.py
PATHS = ("fairscale/version.py", "fairscale/__init__.py")
REGENERATE = "python -m envbuild.compat.fairscale_facts --git-mirror DIR (or set ENVBUILD_GIT_MIRROR)"
# reads the pins of one more recipe (a shipped name or a recipe file) into the facts file
READ_RECIPE = "python -m envbuild.compat.fairscale_facts RECIPE --git-mirror DIR (or set ENVBUILD_GIT_MIRROR)"
# commits no shipped recipe pins that the facts keep: the fairscale pins metaseq's own files name
ALSO_READ = {
    "91132c7e997c5affe97ce002e52cadd798220b06":
        "head of fixing_memory_issues_with_keeping_overlap_may24; metaseq@a5783a1:Dockerfile names it",
    "1bc96fa8c69def6d990e42bfbd75f86146ce29bd": "metaseq CI's pin (metaseq@a1a4e733:.circleci/config.yml)",
    "8820049331331c773077c257667aa81baf4cc9f9":
        "head of prefetch_fsdp_params_simple; metaseq@4fba1df:Dockerfile clones that branch",
}


@dataclass(frozen=True)
class FairscaleVersion:
    """One row of the facts: the version fairscale declares at ``sha`` and where."""

    repo: str
    sha: str
    version: str
    path: str  # the file it was read from, e.g. fairscale/version.py
    declared: str  # the declaring line, e.g. __version_tuple__ = (0, 4, 6)
    why: str  # why the commit is read: the recipe that pins it, or ALSO_READ's note

    @property
    def source(self) -> str:
        slug = gitsrc.github_slug(self.repo)
        return f"{'/'.join(slug) if slug else self.repo}@{self.sha[:8]}:{self.path}"


def file_version(text: str, path: str = "<file>") -> tuple[str, str] | None:
    """``(version, declaring line)`` from one file's text (pure), or None when it declares none.

    Reads module-level literal assignments only: ``__version__ = "X"`` or
    ``__version_tuple__ = (0, 4, 6)`` (joined with dots, as fairscale's __init__.py does). A
    literal ``__version__`` wins over a tuple; a computed ``__version__`` is not a declaration.
    A file that does not parse is a CheckFailed naming it.
    """
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise CheckFailed(f"{path}:{exc.lineno}: not Python this parser reads ({exc.msg})",
                          hint="is this fairscale's own file?") from None
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name = node.targets[0].id
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue  # computed, e.g. ".".join(...)
        line = ast.get_source_segment(text, node) or name
        if name == "__version__" and isinstance(value, str):
            found[name] = (value, line)
        elif name == "__version_tuple__" and isinstance(value, tuple) and value \
                and all(isinstance(x, (int, str)) for x in value):
            found[name] = (".".join(str(x) for x in value), line)
    return found.get("__version__") or found.get("__version_tuple__")


def declared_version(files: Mapping[str, str | None]) -> tuple[str, str, str] | None:
    """``(version, path, declaring line)`` from the texts of ``PATHS`` at one commit (pure;
    a path absent at that commit maps to None or is left out)."""
    for path in PATHS:
        text = files.get(path)
        if text is not None:
            got = file_version(text, path)
            if got:
                return got[0], path, got[1]
    return None


def read_at(repo: Path, sha: str) -> dict[str, str | None]:
    """The texts of ``PATHS`` at ``sha`` in the repository ``repo`` (None: not in that tree)."""
    if not gitsrc.has_commit(repo, sha):
        raise CheckFailed(f"commit {sha[:12]} is not in {repo}", hint="fetch the repository into the mirror first")
    out: dict[str, str | None] = {}
    for path in PATHS:
        proc = gitsrc.run_git(["show", f"{sha}:{path}"], cwd=repo, check=False)
        out[path] = proc.stdout if proc.returncode == 0 else None
    return out


def commits_to_read(recipes: Iterable[Recipe]) -> dict[tuple[str, str], str]:
    """``{(repo URL, sha): why}``: every fairscale commit the recipes pin, then ``ALSO_READ``."""
    out: dict[tuple[str, str], str] = {}
    for rec in recipes:
        for src in rec.sources:
            if cm.is_fairscale(src) and src.sha:
                why = f"{rec.name} pins it ({src.ref})"
                key = (src.url, src.sha)
                out[key] = f"{out[key]}; {why}" if key in out else why
    for sha, why in ALSO_READ.items():
        out.setdefault((REPO, sha), why)
    return out


def generate(recipes: Iterable[Recipe], mirror_dir: Path) -> dict:
    """The facts: per commit to read, the version fairscale declares there and the file;
    CheckFailed when a repository or commit is not in the mirror or declares no version."""
    rows = []
    for (url, sha), why in commits_to_read(recipes).items():
        repo = gitsrc.mirror_path(url, mirror_dir)
        if repo is None:
            raise CheckFailed(f"no mirror of {url} in {mirror_dir}", hint="fetch the repository into the mirror folder first")
        got = declared_version(read_at(repo, sha))
        if got is None:
            raise CheckFailed(f"{url} @ {sha[:12]} declares no __version__ or __version_tuple__ in {' or '.join(PATHS)}",
                              hint="read the tree: where does this commit declare its version?")
        version, path, line = got
        rows.append({"repo": url, "sha": sha, "version": version, "path": path, "declared": line, "why": why})
    return {"schema": "envbuild.fairscale-versions/1", "commits": rows}


def dump(fact: dict) -> str:
    head = ("# DO NOT EDIT: generated by envbuild from fairscale's files at the commits below; regenerate with:\n"
            f"#   {REGENERATE}\n")
    return head + yaml.safe_dump(fact, sort_keys=False, width=120)


def load(path: Path = FACT_PATH) -> dict[str, FairscaleVersion]:
    """The committed facts by commit SHA (empty when the file is absent)."""
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    return {row["sha"]: FairscaleVersion(**row) for row in data.get("commits", [])}


def main(argv: list[str] | None = None) -> int:
    """Write (or ``--check``) the facts for the shipped recipes and any RECIPE named."""
    parser = argparse.ArgumentParser(prog="python -m envbuild.compat.fairscale_facts", description=__doc__.split("\n")[0])
    parser.add_argument("recipes", nargs="*", metavar="RECIPE", help="also read the fairscale pins of these (name or file)")
    parser.add_argument("--git-mirror", type=Path, default=os.environ.get("ENVBUILD_GIT_MIRROR"),
                        help="folder of git mirrors (OWNER/NAME[.git] or OWNER+NAME/); also $ENVBUILD_GIT_MIRROR")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the committed file differs")
    args = parser.parse_args(argv)
    try:
        if not args.git_mirror or not Path(args.git_mirror).is_dir():
            raise InputError("no git mirror folder", hint="pass --git-mirror DIR or set ENVBUILD_GIT_MIRROR")
        recipes = [*all_recipes(), *(load_recipe(r) for r in args.recipes)]
        text = dump(generate(recipes, Path(args.git_mirror)))
    except EnvbuildError as exc:
        print(f"error: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return exc.exit_code
    old = FACT_PATH.read_text() if FACT_PATH.is_file() else None
    if args.check:
        print(f"{'up to date' if old == text else 'out of date'}: {FACT_PATH}", file=sys.stderr)
        return 0 if old == text else 1
    if old != text:
        write_atomic(FACT_PATH, text)
    print(f"{'wrote' if old != text else 'unchanged'} {FACT_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
