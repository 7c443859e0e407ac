"""A benchmark's output file read for judging: streamed, each line cut, the whole bounded.

``read_log(path) -> Log``: the file read in blocks of ``CHUNK`` bytes, each line cut at
``MAX_LINE`` characters as it streams (what follows in a longer line is read past, never held),
decoded as UTF-8 (bytes that are not are replaced, as the judge always read them), with the
SHA-256 of the file's bytes. The text held is at most ``max_chars`` bytes of UTF-8
(``ENVBUILD_MAX_LOG_MIB``, default ``MAX_LOG_MIB`` MiB): a file whose lines hold more is refused
(``LogTooLarge``, an ``InputError`` naming the file and the bound, exit status 2) as soon as the
bound is passed, never read whole. ``envbuild parse``, ``envbuild report`` of committed results
(``envbuild.report.rejudge``), the judging of a submitted job (``launch --submit``) and of a
node's fetched smoke output read their logs here.

``LineReader`` is the stream: it yields a file's lines one at a time and holds at most one block
and one cut line (``held_max`` says the most it held).

>>> import io
>>> reader = LineReader(io.BytesIO(b"a\\n" + b"x" * 100 + b"\\nb"), cap=8, chunk=16)
>>> [(line, cut) for line, cut in reader], reader.held_max <= 16 + 4 * 8
([(b'a', False), (b'xxxxxxxx', True), (b'b', False)], True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from envbuild.errors import InputError
from envbuild.fsio import sha256_stream
from envbuild.recipes.linear import MAX_LINE

CHUNK = 1 << 20  # bytes read at a time
# the text a log may hold, in MiB, unless ENVBUILD_MAX_LOG_MIB says otherwise: the judge holds about 5
# to 6 times the text at its peak (the text with and without srun -l labels, a row per iteration
# line; bench/parse_big.py measures it)
MAX_LOG_MIB = 128
ENV = "ENVBUILD_MAX_LOG_MIB"


class LogTooLarge(InputError):
    """A log whose lines hold more text than the judge holds."""


@dataclass(frozen=True)
class Log:
    """What ``read_log`` read: the ``text`` (each line cut at ``MAX_LINE`` characters), the
    file's ``sha256`` and ``size`` in bytes, how many ``lines`` it has and how many were ``cut``."""

    path: str
    text: str
    sha256: str
    size: int
    lines: int
    cut: int


class LineReader:
    """The lines of a binary stream, each (its bytes without the newline, whether it was cut):
    cut at ``cap`` characters of UTF-8 (bytes that are not UTF-8 count one character each, as
    they decode to one replacement character). It holds at most one block of ``chunk`` bytes and
    ``4 * cap`` bytes of one line (UTF-8 spends at most 4 a character); ``held_max`` is the most
    it held, ``size`` the bytes read, ``digest`` their SHA-256, ``newline_last`` whether the
    last byte was a newline."""

    def __init__(self, stream: BinaryIO, *, cap: int = MAX_LINE, chunk: int = CHUNK):
        self.stream, self.cap, self.chunk = stream, cap, chunk
        self.limit = 4 * cap
        self.held_max = 0
        self.size = 0
        self.digest = sha256_stream()
        self.newline_last = False

    def _line(self, part: bytes, over: bool) -> tuple[bytes, bool]:
        if len(part) <= self.cap and not over:  # at most cap bytes: at most cap characters
            return part, False
        text = part.decode("utf-8", errors="replace")
        return text[:self.cap].encode("utf-8"), over or len(text) > self.cap

    def __iter__(self) -> Iterator[tuple[bytes, bool]]:
        part, over = b"", False  # the line so far (at most limit bytes), bytes skipped
        while block := self.stream.read(self.chunk):
            self.size += len(block)
            self.digest.update(block)
            self.newline_last = block.endswith(b"\n")
            start = 0
            while (end := block.find(b"\n", start)) >= 0:
                room = self.limit - len(part)
                over = over or end - start > room
                part += block[start:start + min(end - start, room)]
                self.held_max = max(self.held_max, len(block) + len(part))
                yield self._line(part, over)
                part, over, start = b"", False, end + 1
            room = self.limit - len(part)
            over = over or len(block) - start > room
            part += block[start:start + min(len(block) - start, room)]
            self.held_max = max(self.held_max, len(block) + len(part))
        if part or over:
            yield self._line(part, over)


# what str.splitlines() breaks a line at
BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def lines(text: str) -> Iterator[str]:
    """``text.splitlines()``, one line at a time: a text whose only line break is ``\\n`` (what
    ``read_log`` gives, nearly always) is never held twice as a list of its lines."""
    if any(c in text for c in BREAKS[1:]):
        yield from text.splitlines()
        return
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    if start < len(text):
        yield text[start:]


def max_chars() -> int:
    """The text a log may hold (``ENVBUILD_MAX_LOG_MIB``, else ``MAX_LOG_MIB``), in bytes of UTF-8."""
    raw = os.environ.get(ENV, "").strip()
    try:
        mib = float(raw) if raw else MAX_LOG_MIB
    except ValueError:
        raise InputError(f"{ENV}={raw!r} is not a number of MiB", hint=f"e.g. {ENV}={MAX_LOG_MIB}") from None
    if mib <= 0:
        raise InputError(f"{ENV}={raw!r}: give a positive number of MiB", hint=f"e.g. {ENV}={MAX_LOG_MIB}")
    return int(mib * 1024 * 1024)


def read_log(path: str | Path, *, limit: int | None = None, what: str = "benchmark output") -> Log:
    """The log at ``path`` (module docstring); ``limit``: the bytes of text it may hold (default
    ``max_chars()``). InputError naming the file when it cannot be read or holds more."""
    limit = max_chars() if limit is None else limit
    held = bytearray()  # the lines, cut, as bytes: decoded once at the end (a line's bytes decode alike)
    count = cut = 0
    try:
        with open(path, "rb") as fh:
            reader = LineReader(fh)
            for line, was_cut in reader:
                if len(held) + len(line) + 1 > limit:  # bytes: at least as many as the characters
                    raise LogTooLarge(
                        f"{path}: the {what} holds more than {limit / 2**20:g} MiB of text (lines cut at "
                        f"{MAX_LINE} characters); it is not read further",
                        hint=f"judge the run's own part of the file (the judged run is the last one), or "
                             f"raise the bound: {ENV}=<MiB>")
                held += line
                held += b"\n"
                count += 1
                cut += was_cut
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}", hint=f"give the {what} file") from None
    if held and not reader.newline_last:
        del held[-1]
    text = held.decode("utf-8", errors="replace")
    del held
    return Log(path=str(path), text=text, sha256=reader.digest.hexdigest(), size=reader.size, lines=count, cut=cut)
