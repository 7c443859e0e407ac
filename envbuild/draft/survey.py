"""Read one tree's files (through ``gitread.Tree``) with the parsers, follow ``-r`` includes
inside the tree, and follow pinned VCS dependencies into their own trees in the git mirror.

``survey(tree, mirror_dir)`` returns a ``Survey``: for the main tree every kind of file the
draft reads; for each followed dependency the requirement files it declares. Nothing of the
repository runs: files are text given to the pure parsers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from envbuild import gitsrc
from envbuild.draft import (
    clones,
    condaenv,
    dockerfile,
    gitmodules,
    readme,
    requirements,
    setupcfg,
    setuppy,
)
from envbuild.draft import pyproject as pyproject_parser
from envbuild.draft.cite import Cite, Declared, inside
from envbuild.draft.gitread import Tree, follow
from envbuild.draft.pipcmd import Command, global_options
from envbuild.draft.requirements import ReqRow, Vcs

REQ_FILE = re.compile(r"^(?:requirements/[^/]+\.txt|(?:[^/]+/)?requirements[^/]*\.(?:txt|in))$")
DOCKERFILE = re.compile(r"^(?:[^/]+/)?(?:Dockerfile[^/]*|[^/]+\.Dockerfile)$")
README = re.compile(r"^README(?:\.md|\.rst|\.txt)?$", re.IGNORECASE)
CONDA = re.compile(r"^(?:environment[^/]*|conda[^/]*)\.ya?ml$")
MAX_DEPTH = 3  # VCS dependencies followed this deep (a dependency of a dependency of ...)


@dataclass
class Requirements:
    """The rows of a closure of requirement files (``-r`` followed inside the tree)."""

    files: list[str] = field(default_factory=list)
    rows: list[tuple[Cite, ReqRow]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Dependency:
    """A VCS dependency: where it is required, and its tree when the mirror has it."""

    vcs: Vcs
    cite: Cite
    editable: bool
    tree: Tree | None
    unread: str = ""
    requirements: Requirements | None = None
    metadata: str | None = None  # "setup.py install_requires" when its metadata is a literal
    global_options: tuple[str, ...] = ()  # the --global-option values of the pip command that names it
    cloned: bool = False  # installed from a clone (git clone URL; cd; pip install .), not a git+URL


@dataclass
class Survey:
    tree: Tree
    files: list[str]
    requirements: Requirements
    other_requirement_files: list[str]
    metadata: dict[str, Declared] = field(default_factory=dict)  # setup.py / setup.cfg / pyproject.toml
    conda: dict[str, condaenv.CondaEnv] = field(default_factory=dict)
    dockerfiles: dict[str, dockerfile.Dockerfile] = field(default_factory=dict)
    commands: list[tuple[Cite, Command]] = field(default_factory=list)  # README, then Dockerfile RUN lines
    cloned: list[clones.ClonedInstall] = field(default_factory=list)  # clones the instructions install
    # pip install git+URL of the drafted repository itself: (where, the URL, editable)
    self_installs: list[tuple[Cite, str, bool]] = field(default_factory=list)
    submodules: list[tuple[gitmodules.Submodule, str | None]] = field(default_factory=list)
    dependencies: list[Dependency] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def closure(tree: Tree, start: list[str], label: str | None = None) -> Requirements:
    """The requirement files ``start`` and every file they ``-r`` include, inside the tree; an
    include that leaves the tree or is absent is a note."""
    out = Requirements()
    queue = list(start)
    while queue:
        path = queue.pop(0)
        if path in out.files:
            continue
        text = tree.read(path)
        if text is None:
            out.notes.append(f"{path}: not in the tree at {tree.commit[:12]}")
            continue
        out.files.append(path)
        for row in requirements.parse(text):
            cite = Cite(path, row.line, label)
            if row.kind in ("include", "constraint"):
                target = inside(path, row.target)
                if target is None:
                    out.notes.append(f"{cite}: {row.text}: outside the repository, not read")
                elif row.kind == "include":
                    queue.append(target)
                else:
                    out.notes.append(f"{cite}: constraints file {target}: not a requirement, not read")
                continue
            out.rows.append((cite, row))
    return out


def drafted_repository(tree: Tree, mirror_dir: str | Path | None):  # noqa: ANN201
    """``is_main(url)``: whether a URL the instructions clone is the drafted repository itself:
    its mirror is the tree's repository, or it names the repository's own name (the folder of a
    local clone, ``OWNER+NAME`` of a mirror folder holding it, or its origin's URL)."""
    repo = tree.repo.resolve()
    names = {repo.name.removesuffix(".git").lower()}
    if repo.parent.name and "+" in repo.parent.name:
        names.add(repo.parent.name.split("+", 1)[1].lower())
    origin = gitsrc.run_git(["config", "--get", "remote.origin.url"], cwd=repo, check=False).stdout.strip()
    if origin:
        names.add(origin.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower())

    def is_main(url: str) -> bool:
        mirrored = gitsrc.mirror_path(url, mirror_dir) if mirror_dir else None
        if mirrored is not None:
            return mirrored.resolve() == repo
        return url.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower() in names
    return is_main


def _runs(path: str, parsed: dockerfile.Dockerfile) -> list[tuple[str, list[tuple[Cite, Command]]]]:
    """A Dockerfile's commands by RUN instruction, each with the WORKDIR it starts in."""
    segments: list[tuple[str, list[tuple[Cite, Command]]]] = [(w, []) for _, w in parsed.runs] or [("", [])]
    starts = [line for line, _ in parsed.runs]
    for line, cmd in parsed.commands:
        at = max((i for i, s in enumerate(starts) if s <= line), default=0)
        segments[at][1].append((Cite(path, line), cmd))
    return segments


def _installed_files(commands: list[tuple[Cite, Command]], conda: dict[str, condaenv.CondaEnv]) -> list[str]:
    """The requirement files the instructions ``pip install -r`` in the drafted tree (paths as
    from the root; a file installed inside another clone is that clone's)."""
    out: list[str] = []
    for _cite, cmd in commands:
        if cmd.pip and cmd.inside is None:
            out += [f.removeprefix("./") for f in cmd.pip.files]
    for path, env in conda.items():
        out += [inside(path, r.text.split(None, 1)[1]) or "" for r in env.pip if r.text.startswith("-r ")]
    return [f for f in dict.fromkeys(out) if f]


def in_tree(path: str, files: list[str]) -> str:
    """``path`` as a file of the tree: a Dockerfile's ``/requirements/requirements.txt`` (copied
    into the image) is the tree's file that ends so, when exactly one does; else ``path``.

    >>> in_tree("/requirements/requirements.txt", ["requirements/requirements.txt", "README.md"])
    'requirements/requirements.txt'
    """
    if path in files:
        return path
    tail = path.lstrip("/").removeprefix("./")
    found = [f for f in files if f == tail or f.endswith("/" + tail)]
    return found[0] if len(found) == 1 else path


def survey(tree: Tree, mirror_dir: str | Path | None) -> Survey:
    """Everything the draft reads of the main tree, and its VCS dependencies followed."""
    files = tree.files()
    found = Survey(tree=tree, files=files, requirements=Requirements(), other_requirement_files=[])
    is_main = drafted_repository(tree, mirror_dir)
    for path in sorted(f for f in files if README.match(f)):
        read = readme.read(tree.read(path) or "")
        marked, cloned = clones.attribute([("", [(Cite(path, r.line), r.command) for r in read.commands])], is_main)
        found.commands += marked
        found.cloned += cloned
        if read.skipped:
            found.notes.append(f"{path}: {len(read.skipped)} code block(s) without a language skipped, their "
                               "lines not commands (output or prose): opened at line(s) "
                               + ", ".join(map(str, read.skipped)))
    for path in sorted(f for f in files if DOCKERFILE.match(f)):
        parsed = dockerfile.parse(tree.read(path) or "")
        found.dockerfiles[path] = parsed
        marked, cloned = clones.attribute(_runs(path, parsed), is_main)
        found.commands += marked
        found.cloned += cloned
    for path in sorted(f for f in files if CONDA.match(f)):
        found.conda[path] = condaenv.parse(tree.read(path) or "", path)
    for name, parser in (("setup.py", setuppy.parse), ("setup.cfg", setupcfg.parse),
                         ("pyproject.toml", pyproject_parser.parse)):
        if name in files:
            found.metadata[name] = parser(tree.read(name) or "")
    if ".gitmodules" in files:
        for sub in gitmodules.parse(tree.read(".gitmodules") or ""):
            found.submodules.append((sub, tree.gitlink(sub.path) if sub.path else None))
    for cite, cmd in found.commands:
        for v in cmd.pip.vcs if cmd.pip else ():
            if is_main(v.url):
                found.self_installs.append((cite, v.url, any(v.url in e for e in cmd.pip.editables)))
    req_files = sorted(f for f in files if REQ_FILE.match(f))
    start = [in_tree(f, files) for f in _installed_files(found.commands, found.conda)]
    if not start:
        start = [f for f in ("requirements.txt", "requirements/requirements.txt") if f in files]
        if start:
            found.notes.append(f"no instruction installs a requirements file: {start[0]} taken")
    found.requirements = closure(tree, start)
    found.other_requirement_files = [f for f in req_files if f not in found.requirements.files]
    _follow_all(found, mirror_dir)
    return found


def _vcs_rows(found: Survey) -> list[tuple[Cite, Vcs, bool, tuple[str, ...]]]:
    rows: list[tuple[Cite, Vcs, bool, tuple[str, ...]]] = [
        (cite, row.vcs, row.kind == "editable", ()) for cite, row in found.requirements.rows if row.vcs]
    for cite, cmd in found.commands:
        if cmd.pip:
            rows += [(cite, v, any(v.url in e for e in cmd.pip.editables), global_options(cmd.pip.options))
                     for v in cmd.pip.vcs if (cite, v.url) not in {(c, u) for c, u, _ in found.self_installs}]
    for c in found.cloned:  # git clone URL && cd NAME && pip install . : as git+URL@REF
        rows.append((c.cite, Vcs(None, c.url, c.ref), c.editable, c.build_options))
    return rows


def dependency_requirements(tree: Tree) -> tuple[Requirements | None, str | None]:
    """What a followed dependency declares: ``(None, origin)`` when its metadata is a literal the
    lock reads itself, else the closure of the requirement files its setup.py names (or its
    requirements.txt / requirements/requirements.txt)."""
    files = tree.files()
    setup = tree.read("setup.py") if "setup.py" in files else None
    if setup is not None and setuppy.parse(setup).requires:
        return None, "setup.py install_requires"
    if "pyproject.toml" in files and pyproject_parser.parse(tree.read("pyproject.toml") or "").requires:
        return None, "pyproject.toml [project].dependencies"
    named = [f for f in (setuppy.named_requirement_files(setup) if setup else []) if f in files]
    start = named or [f for f in ("requirements.txt", "requirements/requirements.txt") if f in files][:1]
    return (closure(tree, start, tree.label) if start else None), None


def _follow_all(found: Survey, mirror_dir: str | Path | None) -> None:
    seen: set[str] = set()
    queue = [(cite, vcs, editable, opts, 0) for cite, vcs, editable, opts in _vcs_rows(found)]
    while queue:
        cite, vcs, editable, opts, depth = queue.pop(0)
        if vcs.url.lower() in seen:
            continue
        seen.add(vcs.url.lower())
        label = (vcs.name or vcs.url.rsplit("/", 1)[-1]).lower()
        tree, why = follow(vcs.url, vcs.ref, mirror_dir, label) if depth < MAX_DEPTH else (None, "too deep")
        cloned = any(c.cite == cite and c.url == vcs.url for c in found.cloned)
        dep = Dependency(vcs, cite, editable, tree, why, global_options=opts, cloned=cloned)
        if tree is not None:
            dep.requirements, dep.metadata = dependency_requirements(tree)
            for sub_cite, row in dep.requirements.rows if dep.requirements else []:
                if row.vcs:
                    queue.append((sub_cite, row.vcs, row.kind == "editable", (), depth + 1))
        found.dependencies.append(dep)
