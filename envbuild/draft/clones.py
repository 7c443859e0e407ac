"""Which tree each command of a README or Dockerfile runs in, and the clones it installs (pure).

Setup instructions often build a dependency from a clone of its repository rather than from a
``git+URL`` requirement::

    git clone https://github.com/NVIDIA/apex
    cd apex
    git checkout 22.04-dev
    pip install -v --global-option="--cpp_ext" --global-option="--cuda_ext" ./

``attribute(segments, is_main)`` follows ``git clone URL [DIR]`` (with ``-b REF``), ``cd`` /
``pushd`` / ``popd``, ``git checkout REF`` (``switch``, ``reset --hard``) inside a clone, and a
Dockerfile's ``WORKDIR``: every command is marked with the clone it runs in (``Command.inside``,
its URL, the folder as the command starts; None for the drafted tree itself, also when the
instructions clone it), and each ``pip install .`` / ``-e .`` / ``./DIR`` or ``python setup.py
install|develop`` of a clone becomes a ``ClonedInstall`` (URL, ref, editable, the build options
written), which the survey follows as it follows a ``git+URL@REF`` requirement.

>>> from envbuild.draft.cite import Cite
>>> from envbuild.draft.pipcmd import located_commands
>>> lines = ["git clone https://github.com/NVIDIA/apex", "cd apex", "git checkout 22.04-dev",
...          "pip install --global-option=--cpp_ext ./", "cd .."]
>>> cmds = [(Cite("README.md", n), c) for n, c in located_commands(list(enumerate(lines, 1)))]
>>> marked, installs = attribute([("", cmds)], lambda url: url.endswith("/me/setup"))
>>> [(i.url, i.ref, i.editable, i.build_options, str(i.cite)) for i in installs]
[('https://github.com/NVIDIA/apex', '22.04-dev', False, ('--cpp_ext',), 'README.md:4')]
>>> [c.inside for _, c in marked]
[None, None, 'https://github.com/NVIDIA/apex', 'https://github.com/NVIDIA/apex', 'https://github.com/NVIDIA/apex']
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from envbuild.draft.cite import Cite
from envbuild.draft.pipcmd import Command, global_options, program_words

# options of git clone that take a value (the next word is not the URL or the folder)
CLONE_VALUED = {"-b", "--branch", "--depth", "-o", "--origin", "-c", "--config", "-j", "--jobs", "--reference",
                "--shallow-since", "--shallow-exclude", "--separate-git-dir", "-u", "--upload-pack",
                "--template", "--filter", "--server-option"}


@dataclass(frozen=True)
class ClonedInstall:
    """A clone the instructions install: its URL, the ref it was cloned at or checked out (None:
    its default branch), editable or not, and the build options written (pip's
    ``--global-option`` / ``--config-settings --build-option`` values, or the options after
    ``setup.py install``: Apex's ``--cpp_ext --cuda_ext``)."""

    url: str
    ref: str | None
    cite: Cite
    editable: bool
    build_options: tuple[str, ...] = ()


@dataclass
class _Clone:
    url: str
    ref: str | None
    main: bool


def _url(text: str) -> str:
    return text.rstrip("/").removesuffix(".git")


def _clone_args(words: list[str]) -> tuple[str, str | None, str | None] | None:
    """``(url, folder or None, branch or None)`` of ``git clone`` words, else None."""
    rest, branch, plain = words[2:], None, []
    it = iter(rest)
    for w in it:
        if w in CLONE_VALUED:
            value = next(it, "")
            if w in ("-b", "--branch"):
                branch = value
        elif w.startswith("--branch="):
            branch = w.split("=", 1)[1]
        elif not w.startswith("-"):
            plain.append(w)
    if not plain:
        return None
    return plain[0], (plain[1] if len(plain) > 1 else None), branch


def _checkout_ref(words: list[str]) -> str | None:
    """The ref of ``git checkout REF`` / ``git switch --detach REF`` / ``git reset --hard REF``."""
    verb, args = words[1], [w for w in words[2:] if not w.startswith("-")]
    if verb == "checkout" and ("-b" in words or "-B" in words or "--" in words):
        return None
    if verb == "reset" and "--hard" not in words:
        return None
    if verb not in ("checkout", "switch", "reset") or len(args) != 1:
        return None
    return args[0].removeprefix("tags/")


class _Walk:
    """The shell state of one segment: the folder, the folder stack, the clones made so far."""

    def __init__(self, clones: dict[str, _Clone], is_main: Callable[[str], bool], cwd: str):
        self.clones, self.is_main, self.cwd = clones, is_main, cwd
        self.stack: list[str] = []

    def at(self, path: str) -> str:
        if path.startswith("~") or path.startswith("$"):
            return path.split("/", 1)[0]  # a folder the text cannot place; no clone is there
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def clone_of(self, path: str) -> tuple[str, _Clone] | None:
        """The clone that holds ``path`` (the innermost), or None."""
        found = [(p, c) for p, c in self.clones.items() if path == p or path.startswith(p.rstrip("/") + "/")]
        return max(found, key=lambda pc: len(pc[0])) if found else None

    def inside(self) -> _Clone | None:
        held = self.clone_of(self.cwd)
        return held[1] if held else None

    def step(self, cite: Cite, cmd: Command) -> tuple[Command, list[ClonedInstall]]:
        words = program_words(list(cmd.words))
        here = self.inside()
        marked = dataclasses.replace(cmd, inside=here.url if here and not here.main else None)
        installs: list[ClonedInstall] = []
        if words[:2] == ["git", "clone"] and (args := _clone_args(words)):
            url, folder, branch = args
            name = folder or _url(url).rsplit("/", 1)[-1].rsplit(":", 1)[-1]
            self.clones[self.at(name)] = _Clone(_url(url), branch, self.is_main(_url(url)))
        elif words[:1] == ["git"] and len(words) > 2 and words[1] == "-C":
            held = self.clone_of(self.at(words[2]))
            if held and (ref := _checkout_ref(["git", *words[3:]])) is not None:
                held[1].ref = ref
        elif words[:1] == ["git"] and len(words) > 1 and here and (ref := _checkout_ref(words)) is not None:
            here.ref = ref
        elif words[:1] in (["cd"], ["pushd"]):
            if words[0] == "pushd":
                self.stack.append(self.cwd)
            self.cwd = self.at(words[1]) if len(words) > 1 and words[1] != "-" else "~"
        elif words[:1] == ["popd"] and self.stack:
            self.cwd = self.stack.pop()
        elif cmd.pip:
            installs = self._pip(cite, cmd)
        elif cmd.kind == "setup" and here and not here.main:
            editable = len(words) > 2 and words[2] == "develop"
            opts = tuple(w for w in words[3:] if w.startswith("--") and "=" not in w)
            installs = [ClonedInstall(here.url, here.ref, cite, editable, opts)]
        return marked, installs

    def _pip(self, cite: Cite, cmd: Command) -> list[ClonedInstall]:
        assert cmd.pip is not None
        out = []
        for target, editable in [*((p, False) for p in cmd.pip.paths), *((e, True) for e in cmd.pip.editables)]:
            folder = re.sub(r"\[[^\]]*\]$", "", target)
            if "://" in folder or folder.endswith((".whl", ".tar.gz", ".zip")):
                continue
            held = self.clone_of(self.at(folder))
            if held and not held[1].main and self.at(folder) == held[0]:
                out.append(ClonedInstall(held[1].url, held[1].ref, cite, editable, global_options(cmd.pip.options)))
        return out


def attribute(segments: list[tuple[str, list[tuple[Cite, Command]]]],
              is_main: Callable[[str], bool]) -> tuple[list[tuple[Cite, Command]], list[ClonedInstall]]:
    """Each command marked with the clone it runs in, and the clones installed (see module);
    ``is_main(url)``: whether a cloned URL is the drafted repository itself.
    ``segments``: ``(starting folder, commands)``, each run by a shell of its own (a README is
    one; each RUN of a Dockerfile is one, starting at its WORKDIR); clones persist across the
    segments of one list, the folder does not."""
    clones: dict[str, _Clone] = {}
    marked: list[tuple[Cite, Command]] = []
    installs: list[ClonedInstall] = []
    for start, cmds in segments:
        walk = _Walk(clones, is_main, start or ".")
        for cite, cmd in cmds:
            new, found = walk.step(cite, cmd)
            marked.append((cite, new))
            installs += found
    return marked, installs
