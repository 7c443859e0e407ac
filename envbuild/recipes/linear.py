"""Patterns that run in time linear in the text: RE2, with the ``re`` methods the log readers use.

Every pattern that reads a benchmark's output (the built-in readers in ``envbuild.smoke``, the
rules a recipe declares in ``benchmark.log``) is compiled here: ``compile_linear(pattern)``
refuses what RE2 cannot run in linear time (backreferences, lookaround) and patterns longer than
``MAX_PATTERN``, and gives a ``Linear`` with ``search``, ``match``, ``finditer``, ``findall``
and ``sub`` on str, as ``re`` offers them. No line shaped against a pattern can make it
backtrack: RE2 has no backtracking. A line is cut at ``MAX_LINE`` characters before any rule
sees it (``envbuild.smoke.logread`` where a log file is read).

RE2 matches UTF-8 bytes. The ``re2`` module maps byte offsets back to characters at a cost of
several microseconds a call; an ASCII text (nearly every log line) is matched as its bytes,
whose offsets are the characters', and only other text takes the module's mapping. Classes are
RE2's: ``\\d``, ``\\s``, ``\\w`` and ``\\b`` are ASCII (``re`` on str reads them as Unicode).

A built-in reader's pattern (``linear``) also knows the longest run of characters every match
holds (``required``, read from the pattern by Python's own parser): a text without it is not
given to RE2 at all, which is what keeps reading a log of millions of lines fast. A pattern a
recipe declares gets no such test (``compile_linear``): RE2's syntax is not Python's everywhere
(``[[:digit:]]``, ``\\Q...\\E``), and a test read wrongly would lose lines.

>>> rx = compile_linear(r"iteration\\s+(?P<step>\\d+)")
>>> rx.search(" iteration 12/ 20 |").group("step")
'12'
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Callable, Iterator

# characters of a line any log rule sees, the built-in readers' and the declared ones: one cap,
# applied where a log file is read (envbuild.smoke.logread) and again where a line is matched;
# metaseq's config line is ~13K characters, an envbuild.smoke/1 record ~3K
MAX_LINE = 16384
MAX_PATTERN = 1000


class Match:
    """One match: ``group``, ``groups``, ``groupdict``, ``start``, ``end``, ``span`` as ``re``'s."""

    __slots__ = ("re", "string", "_m")

    def __init__(self, rx: "Linear", text: str, m: Any):
        self.re, self.string, self._m = rx, text, m

    def _index(self, group: int | str) -> int:
        return self.re.groupindex[group] if isinstance(group, str) else group

    def __getitem__(self, group: int | str) -> str | None:
        start, end = self._m.span(self._index(group))
        return None if start < 0 else self.string[start:end]

    def group(self, *groups: int | str) -> Any:
        if len(groups) <= 1:
            return self[groups[0] if groups else 0]
        return tuple(self[g] for g in groups)

    def groups(self, default: Any = None) -> tuple:
        return tuple(default if (v := self[i]) is None else v for i in range(1, self.re.groups + 1))

    def groupdict(self, default: Any = None) -> dict[str, Any]:
        return {name: default if (v := self[i]) is None else v for name, i in self.re.groupindex.items()}

    def start(self, group: int | str = 0) -> int:
        return self._m.span(self._index(group))[0]

    def end(self, group: int | str = 0) -> int:
        return self._m.span(self._index(group))[1]

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return self._m.span(self._index(group))


class Linear:
    """A pattern compiled by RE2 (``compile_linear``)."""

    __slots__ = ("pattern", "groups", "groupindex", "required", "_rx")

    def __init__(self, pattern: str, rx: Any, required: str = ""):
        self.pattern, self._rx, self.required = pattern, rx, required
        self.groups: int = rx.groups
        self.groupindex: dict[str, int] = dict(rx.groupindex)

    def __repr__(self) -> str:
        return f"Linear({self.pattern!r})"

    def _text(self, text: str) -> Any:
        """What RE2 is given: the bytes of an ASCII text (the same offsets), else the str."""
        return text.encode("ascii") if text.isascii() else text

    def search(self, text: str) -> Match | None:
        if self.required not in text:
            return None
        m = self._rx.search(self._text(text))
        return None if m is None else Match(self, text, m)

    def match(self, text: str) -> Match | None:
        if self.required not in text:
            return None
        m = self._rx.match(self._text(text))
        return None if m is None else Match(self, text, m)

    def finditer(self, text: str) -> Iterator[Match]:
        if self.required not in text:
            return
        for m in self._rx.finditer(self._text(text)):
            yield Match(self, text, m)

    def findall(self, text: str) -> list[Any]:
        if self.groups == 0:
            return [m.group() for m in self.finditer(text)]
        if self.groups == 1:
            return [m.groups("")[0] for m in self.finditer(text)]
        return [m.groups("") for m in self.finditer(text)]

    def sub(self, repl: str | Callable[[Match], str], text: str) -> str:
        """``text`` with every match replaced by ``repl`` (a literal string, or a function of the match)."""
        if isinstance(repl, str) and "\\" in repl:
            raise ValueError("a replacement with escapes: pass a function of the match")
        pieces, end = [], 0
        for m in self.finditer(text):
            pieces += [text[end:m.start()], repl(m) if callable(repl) else repl]
            end = m.end()
        return "".join(pieces) + text[end:]


def linear(pattern: str) -> Linear:
    """A built-in reader's ``pattern``: ``compile_linear``, with the characters every match holds
    (``required``) tested before RE2 runs."""
    return compile_linear(pattern, required=required_literal(pattern))


def required_literal(pattern: str) -> str:
    """The longest run of characters every match of ``pattern`` holds, as Python's parser reads
    the pattern ("" where it finds none, reads the pattern otherwise, or letters may be any case).

    >>> required_literal(r"^\\s*(\\w+) \\.{2,} (\\S.*?)$"), required_literal(r"(?i)nan")
    (' ..', '')
    """
    # private modules, absent from typeshed's stubs
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]  # the parser of re since Python 3.11 (sre_parse before)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = _parser.parse(pattern)
    except Exception:  # noqa: BLE001 - a syntax Python does not read: no test, RE2 reads every text
        return ""
    if parsed.state.flags & re.IGNORECASE:
        return ""
    runs: list[str] = []

    def walk(items: Any) -> None:
        run = ""
        for op, av in items:
            if op is sre.LITERAL:
                run += chr(av)
                continue
            if (op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[0] >= 1 and len(av[2]) == 1
                    and av[2][0][0] is sre.LITERAL):
                run += chr(av[2][0][1]) * av[0]  # x{2,}: "xx" here, and maybe more x after
                if av[0] == av[1]:
                    continue
            runs.append(run)
            run = ""
            if op is sre.SUBPATTERN and not av[1] & re.IGNORECASE:
                walk(av[3])  # a group that is not repeated nor optional: its runs are required too
        runs.append(run)

    walk(parsed)
    return max(runs, key=len, default="")


def compile_linear(pattern: str, required: str = "") -> Linear:
    """``pattern`` compiled by RE2 (linear time); ValueError with RE2's reason when it refuses.
    ``required``: characters every match holds (``required_literal``), tested first."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print its refusal on stderr
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"a pattern of {len(pattern)} characters (at most {MAX_PATTERN})")
    try:
        return Linear(pattern, re2.compile(pattern, options=options), required)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"{pattern!r} is not a linear-time pattern (RE2: {reason}); backreferences and "
                         "lookaround are not allowed") from None
