"""The known fixes, read from the pinned trees: which rows of ``fixes.yaml`` a component's
tree at its pinned commit needs, found with ``git grep`` and read with ``git show`` in the git
mirror (``envbuild.draft.gitread.Tree``), never guessed. Each hit becomes a declarative patch
(``envbuild.recipes.schema.Patch``) that is tried on the pinned text before it is returned: it
applies, exactly as many times as it was found, and a second time finds it applied.

    tree = Tree(repo, sha)
    hits = scan(tree, "megatron", fixes(), ctx)   # [Hit(fix=torch-six-inf, file=..., count=1), ...]
"""

from __future__ import annotations

import io
import re
import shlex
import tokenize
from dataclasses import dataclass, field
from posixpath import dirname, join, normpath

from envbuild import gitsrc
from envbuild.draft.gitread import Tree
from envbuild.patches import apply_text_patch
from envbuild.port.tables import Fix

#: folders a ``code`` row never patches: the setup neither imports nor runs them
NOT_CODE = ("tests", "test", "docs", "doc")
SCRIPT = re.compile(r"[\w./{}-]+\.(?:sh|py|slurm|pbs)\b")


@dataclass(frozen=True)
class Hit:
    """One fix row found in one file: the patch that carries it out, tried on the pinned text."""

    fix: Fix
    component: str
    file: str
    line: int
    count: int
    kind: str  # replace | regex
    old: str
    new: str


@dataclass(frozen=True)
class ScanContext:
    """What the rows are read against: the node's arch, and per component the files the setup
    starts (``launch`` rows look only at those)."""

    cc: str | None
    launch: dict[str, frozenset[str]] = field(default_factory=dict)
    #: the recipe's own patches per (component, file), applied before the rows are read, so a
    #: fix is tried on the text the node will have: [(kind, old, new, count)]
    carried: dict[tuple[str, str], list[tuple[str, str | None, str | None, int]]] = field(default_factory=dict)


def grep(tree: Tree, needle: str, pathspecs: list[str]) -> list[str]:
    """The files of ``pathspecs`` that hold ``needle`` at the tree's commit (``git grep -F``)."""
    proc = gitsrc.run_git(["grep", "-l", "-I", "-F", "-e", needle, tree.commit, "--", *pathspecs],
                          cwd=tree.repo, check=False)
    if proc.returncode not in (0, 1):
        raise gitsrc.GitError(f"git grep in {tree.repo} failed: {proc.stderr.strip()[-200:]}",
                              hint="check the mirror")
    prefix = tree.commit + ":"
    return sorted(line.removeprefix(prefix) for line in proc.stdout.splitlines() if line)


def _is_code(path: str) -> bool:
    return not any(part in NOT_CODE for part in path.split("/")[:-1])


def not_code(text: str) -> list[tuple[int, int]] | None:
    """The ``(start, end)`` offsets of the string literals and comments of Python source
    ``text``, as Python's tokenizer reads it; None when it does not tokenize (then every match
    counts, as in any other file).

    >>> src = 'x = np.int  # np.int\\nif "np.int" in s: pass\\n'
    >>> [src[a:b] for a, b in not_code(src)]
    ['# np.int', '"np.int"']
    """
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    kinds = {tokenize.STRING, tokenize.COMMENT, *(getattr(tokenize, n) for n in ("FSTRING_MIDDLE", "FSTRING_START",
                                                                                  "FSTRING_END") if hasattr(tokenize, n))}
    spans = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in kinds:
                spans.append((starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1]))
    except (tokenize.TokenError, SyntaxError, IndexError):
        return None
    return spans


def _in(spans: list[tuple[int, int]], at: int) -> bool:
    return any(a <= at < b for a, b in spans)


def _line_patches(text: str, matches: list[re.Match[str]], template: str) -> list[tuple[str, str, str, int, int]]:
    """A literal ``replace`` of each whole line that holds a code match, where the text holds the
    same literal text or string matches too (``x = np.int  # np.int``): the line, with only its
    code matches replaced, when it is unique in the text."""
    by_line: dict[int, list[re.Match[str]]] = {}
    for m in matches:
        by_line.setdefault(text.rfind("\n", 0, m.start()) + 1, []).append(m)
    out = []
    for start, found in by_line.items():
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line, new, at = text[start:end], "", start
        for m in found:
            if m.end() > end:  # a match across lines: not a line literal
                return []
            new += text[at:m.start()] + m.expand(template)
            at = m.end()
        new += text[at:end]
        if text.count(line) != 1:
            return []
        out.append(("replace", line, new, 1, text.count("\n", 0, start) + 1))
    return out


def _patches_of(text: str, fix: Fix, cc: str | None, path: str = "") -> list[tuple[str, str, str, int, int]]:
    """``[(kind, old, new, count, first line)]``: the patches ``fix`` makes in ``text`` (the
    file ``path``). A literal ``replace`` per distinct match where the literal says exactly what
    the regex found (a second run then finds it applied); else the row's regex, when its
    replacement is a literal (the same holds); else nothing (a match ``textpatch`` could not
    tell applied). In a Python file a row that ``matches: code`` skips the matches inside string
    literals and comments; where such ones remain, each line holding a code match is replaced
    whole."""
    if fix.requires is not None and fix.requires not in text:
        return []
    matches = list(fix.regex().finditer(text))
    skipped = False
    if matches and fix.matches == "code" and path.endswith(".py"):
        spans = not_code(text)
        if spans:
            kept = [m for m in matches if not _in(spans, m.start())]
            skipped, matches = len(kept) < len(matches), kept
    if not matches:
        return []
    template = fix.replacement(cc)
    if skipped:
        return _line_patches(text, matches, template)
    pairs: dict[tuple[str, str], list[int]] = {}
    for m in matches:
        pairs.setdefault((m.group(0), m.expand(template)), []).append(text.count("\n", 0, m.start()) + 1)
    if all(text.count(old) == len(lines) for (old, _), lines in pairs.items()) and \
            len({old for old, _ in pairs}) == len(pairs):
        return [("replace", old, new, len(lines), lines[0]) for (old, new), lines in pairs.items()]
    if "\\" not in template:
        first = text.count("\n", 0, matches[0].start()) + 1
        return [("regex", fix.pattern, template, len(matches), first)]
    return []


def scan(tree: Tree, component: str, rows: list[Fix] | tuple[Fix, ...], ctx: ScanContext) -> list[Hit]:
    """Every row of ``rows`` (already known to hold on the stack) that the tree needs, in row
    order per file. A patch that would not apply to the pinned text is never returned: that
    is a bug in the row (ValueError naming it)."""
    launch = ctx.launch.get(component, frozenset())
    texts: dict[str, str] = {}
    hits: list[Hit] = []
    for fix in rows:
        for path in grep(tree, fix.grep, fix.files):
            if (fix.scope == "launch" and path not in launch) or (fix.scope == "code" and not _is_code(path)):
                continue
            if path not in texts:
                text = tree.read(path)
                if text is None:
                    continue
                for kind, old, new, count in ctx.carried.get((component, path), []):
                    text = apply_text_patch(text, kind, old, new, count)[1]
                texts[path] = text
            for kind, old, new, count, line in _patches_of(texts[path], fix, ctx.cc, path):
                status, after = apply_text_patch(texts[path], kind, old, new, count)
                again, _ = apply_text_patch(after, kind, old, new, count)
                if status != "applied" or again != "already-applied":
                    raise ValueError(f"fix {fix.id} on {component}:{path}: {status}; again: {again}")
                texts[path] = after
                hits.append(Hit(fix=fix, component=component, file=path, line=line, count=count,
                                kind=kind, old=old, new=new))
    return hits


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def launch_files(tree: Tree, start: list[str], base: str, *, depth: int = 3) -> frozenset[str]:
    """The files a setup starts: ``start`` (paths in the tree), and the scripts those name,
    followed ``depth`` levels through shell scripts (paths relative to the script's folder,
    to ``base``, the command's working folder, or to the tree's top)."""
    present = set(tree.files())
    found: set[str] = {p for p in start if p in present}
    todo = [p for p in found if p.endswith((".sh", ".slurm", ".pbs"))]
    for _ in range(depth):
        nxt = []
        for script in todo:
            text = tree.read(script) or ""
            for word in SCRIPT.findall(text):
                for cand in (join(dirname(script), word), join(base, word), word):
                    cand = normpath(cand)
                    if cand in present and cand not in found:
                        found.add(cand)
                        if cand.endswith((".sh", ".slurm", ".pbs")):
                            nxt.append(cand)
        todo = nxt
    return frozenset(found)


def command_files(command: str, base: str) -> list[str]:
    """Paths a command line names (``python benchmark_gpt.py``, ``bash run_single.sh``), as
    paths in the tree of its working folder ``base``."""
    out = []
    for word in _words(command):
        if SCRIPT.fullmatch(word) and "{" not in word:
            out.append(normpath(join(base, word)))
    return out
