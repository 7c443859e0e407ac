"""The dependencies a source install declares, read from its tree at the pinned commit.

A git source installed with pip (``editable``, ``wheel``) declares its dependencies in
``pyproject.toml`` (``[project].dependencies``), in ``setup.py`` (``install_requires=[...]``)
or in a ``requirements.txt`` that setup.py reads; a Megatron fork installed by path declares
them only in ``requirements.txt``, which its instructions ``pip install -r``. The parsers here
are pure functions of file text: setup.py is read with ``ast``, never run. ``tree_files`` is
the one function that reads a commit, from a local git mirror (``git show SHA:PATH``).

Example::

    >>> read_declared({"pyproject.toml": '[project]\\ndependencies = ["rich", '
    ...                '"enrich @ git+https://github.com/saforem2/enrich"]\\n'}, "metadata")
    ... # doctest: +NORMALIZE_WHITESPACE
    Declared(origin='pyproject.toml [project].dependencies',
             requirements=('rich', 'enrich @ git+https://github.com/saforem2/enrich'), unread=None)
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement

from envbuild import gitsrc

METADATA_FILES = ("pyproject.toml", "setup.py", "requirements.txt")


@dataclass(frozen=True)
class Declared:
    """What one tree declares: the requirement lines as written, and the file they came from."""

    origin: str | None  # "setup.py install_requires", "requirements.txt", ...; None: nothing read
    requirements: tuple[str, ...] = ()
    unread: str | None = None  # why nothing could be read (dynamic metadata, no such file)


@dataclass(frozen=True)
class GitDependency:
    """``name @ git+URL[@REF]`` in a tree's metadata."""

    name: str
    url: str
    ref: str | None  # None: the repository's default branch


def pyproject_requires(text: str) -> list[str] | None:
    """``[project].dependencies`` of a pyproject.toml; None when absent or dynamic."""
    project = tomllib.loads(text).get("project") or {}
    if "dependencies" in (project.get("dynamic") or []) or "dependencies" not in project:
        return None
    return [str(r) for r in project["dependencies"]]


def _literal_strings(node: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def setup_py_requires(text: str) -> tuple[list[str] | None, bool]:
    """``(install_requires, reads_requirements_txt)`` of a setup.py, read with ``ast``.

    The list is returned when it is a literal, or a name bound once at module level to a
    literal; ``None`` when setup() has no install_requires or computes it. The flag says
    whether install_requires is computed by a file that names ``requirements.txt`` (setup.py
    that reads it, e.g. fairscale's ``fetch_requirements()``).
    """
    tree = ast.parse(text)
    names: dict[str, list[str] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = _literal_strings(node.value)
    names_txt = any(isinstance(n, ast.Constant) and n.value == "requirements.txt" for n in ast.walk(tree))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if fname != "setup":
            continue
        for kw in node.keywords:
            if kw.arg != "install_requires":
                continue
            value = kw.value
            if isinstance(value, ast.Name) and names.get(value.id) is not None:
                return names[value.id], False
            literal = _literal_strings(value)
            # computed (a call, or a name bound to one): it reads requirements.txt when the
            # file names it (fairscale's fetch_requirements())
            return literal, literal is None and names_txt
    return None, False


def requirements_txt(text: str) -> list[str]:
    """Requirement lines of a requirements file: comments, options (-r, -e, --index-url) and
    blank lines dropped; a trailing ``# comment`` cut."""
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        out.append(line)
    return out


def read_declared(files: dict[str, str], mode: str,
                  requirements: tuple[str, ...] = ("requirements.txt",)) -> Declared:
    """What a tree declares, from the text of its metadata files (pure).

    ``mode`` ``metadata`` (a pip install of the tree): pyproject's static dependencies, else
    setup.py's literal install_requires, else the requirements.txt that setup.py reads.
    ``requirements``: the tree's requirements files (what its instructions ``pip install -r``):
    ``requirements`` names them (the source's ``requirements:`` field), by default
    requirements.txt; every one must be there.
    """
    if mode == "requirements":
        missing = [name for name in requirements if name not in files]
        if missing:
            return Declared(None, unread=f"no {', '.join(missing)} at this commit")
        lines = tuple(line for name in requirements for line in requirements_txt(files[name]))
        return Declared(", ".join(requirements), lines)
    if "pyproject.toml" in files and (reqs := pyproject_requires(files["pyproject.toml"])) is not None:
        return Declared("pyproject.toml [project].dependencies", tuple(reqs))
    if "setup.py" in files:
        reqs, reads_txt = setup_py_requires(files["setup.py"])
        if reqs is not None:
            return Declared("setup.py install_requires", tuple(reqs))
        if reads_txt and "requirements.txt" in files:
            return Declared("requirements.txt (read by setup.py)",
                            tuple(requirements_txt(files["requirements.txt"])))
        return Declared(None, unread="setup.py computes install_requires (not a literal) "
                                     "and reads no requirements.txt")
    if "pyproject.toml" in files:
        return Declared(None, unread="pyproject.toml declares no static [project].dependencies")
    return Declared(None, unread="no pyproject.toml, setup.py or requirements.txt at this commit")


# pip's build backend for a tree that names none (PEP 517/518: setup.py, or a pyproject.toml
# without [build-system]); the tree builds with --no-build-isolation, so it must be installed
LEGACY_BUILD_REQUIRES = ("setuptools>=40.8.0",)


def read_build_requires(files: dict[str, str]) -> Declared:
    """What building a tree needs in the environment, from its metadata files' text (pure):
    ``[build-system].requires`` of its pyproject.toml, else setuptools as pip's legacy backend
    (PEP 518) when it has a setup.py or a pyproject.toml."""
    if "pyproject.toml" in files:
        system = tomllib.loads(files["pyproject.toml"]).get("build-system") or {}
        if "requires" in system:
            return Declared("pyproject.toml [build-system].requires", tuple(str(r) for r in system["requires"]))
    if "setup.py" in files or "pyproject.toml" in files:
        return Declared("no [build-system]: pip's setuptools backend (PEP 518)", LEGACY_BUILD_REQUIRES)
    return Declared(None, unread="nothing to build from at this commit")


def target_markers(python: str) -> dict[str, str]:
    """The marker environment of the target: its Python on Linux x86_64, CPython."""
    return {"python_version": python, "python_full_version": f"{python}.0",
            "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
            "platform_machine": "x86_64", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "extra": ""}


def split(requirements: tuple[str, ...], python: str) -> tuple[list[Requirement], list[GitDependency], list[str]]:
    """``(index requirements, git dependencies, skipped)`` for the target's Python (pure).

    Requirements whose marker is false for the target are skipped; ``name @ git+URL[@REF]``
    becomes a git dependency; an unparsable line is skipped with its reason.
    """
    index: list[Requirement] = []
    git: list[GitDependency] = []
    skipped: list[str] = []
    env = target_markers(python)
    for line in requirements:
        try:
            req = Requirement(line)
        except (InvalidRequirement, InvalidMarker) as exc:
            skipped.append(f"{line}: not a requirement ({exc})")
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            skipped.append(f"{line}: marker false for Python {python}")
            continue
        if req.url:
            url = req.url.removeprefix("git+")
            if not req.url.startswith("git+"):
                skipped.append(f"{line}: direct URL that is not git")
                continue
            base, _, ref = url.partition("@") if url.count("@") == 1 and "://" in url.split("@")[0] \
                else (url, "", "")
            git.append(GitDependency(name=req.name, url=base.removesuffix(".git"), ref=ref or None))
            continue
        index.append(req)
    return index, git, skipped


def tree_files(repo: str | Path, sha: str, names: tuple[str, ...] = METADATA_FILES) -> dict[str, str]:
    """The text of the metadata files present at ``sha`` in the local repository ``repo``."""
    out = {}
    for name in names:
        proc = gitsrc.run_git(["show", f"{sha}:{name}"], cwd=repo, check=False)
        if proc.returncode == 0:
            out[name] = proc.stdout
    return out


def default_branch_as_of(repo: str | Path, date: str | None) -> str:
    """The default branch's commit as of ``date`` (first parent, committer date), or its head."""
    args = ["rev-list", "-1", "--first-parent"] + ([f"--before={date}T23:59:59Z"] if date else []) + ["HEAD"]
    sha = gitsrc.run_git(args, cwd=repo).stdout.strip()
    if not sha:
        from envbuild.errors import CheckFailed

        raise CheckFailed(f"{repo} has no commit on its default branch before {date}",
                          hint="the dependency is younger than the recipe's resolve_as_of")
    return sha
