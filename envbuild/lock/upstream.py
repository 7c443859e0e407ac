"""Where a wheelhouse file lives upstream: its index's URL for the same bytes.

A ``--wheelhouse`` is only a place to find bytes; the lock records the file's upstream URL
(and the sha256 of the bytes), so that a lock made with a wheelhouse exports, bundles and
installs elsewhere without naming a local path.

* The index answers: when its page for the project (a PEP 503 page, or the find-links page
  itself) links the file, the link is the URL, and when the link carries ``#sha256=`` it must
  equal the wheelhouse file's (``checked``; other bytes under the same name are refused).
* The index does not answer from here: the URL is derived from a known layout (``derived``):
  a flat find-links page links its files beside itself, and PyTorch's indexes keep every file
  under the index folder (rows below, with sources).
* Neither (a wheel built locally, a ``+cpu`` build the recipe names no index for, an index of
  unknown layout that does not answer): ``none``, with why; the lock keeps the file name, and
  exporting or bundling it needs the wheelhouse again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urljoin, urlparse

from envbuild import http

from envbuild.errors import CheckFailed
from envbuild.lock.indexes import PYPI_SIMPLE, is_pypi, unreachable
from envbuild.lock.schema import normalize

TIMEOUT = 15.0


@dataclass(frozen=True)
class Layout:
    """An index whose file URLs follow from the index URL and the file name."""

    host: str
    path_prefix: str
    rule: str
    source: str


# PyTorch's per-variant indexes (``/whl/cpu``, ``/whl/cu118``, ...) link each file as
# ``/whl/<variant>/<file>`` (a ``+`` quoted as ``%2B``).
LAYOUTS = (
    Layout(host="download.pytorch.org", path_prefix="/whl/",
           rule="files under the index folder: <index>/<file, %2B for +>",
           source="https://github.com/ben-hayes/neural-field-synth/blob/main/setup.py "
                  "(torch@https://download.pytorch.org/whl/cu113/torch-1.10.1%2Bcu113-cp39-cp39-"
                  "linux_x86_64.whl); https://pytorch.org/get-started/previous-versions/ "
                  "(pip install ... --index-url https://download.pytorch.org/whl/cpu)"),
)


@dataclass(frozen=True)
class Upstream:
    """The upstream URL of a wheelhouse file and how it was found."""

    url: str | None  # None: no upstream could be named (status none)
    status: str  # checked: listed with this sha256; listed: linked without one; derived: a layout; none
    how: str


def page_of(index: str | None, kind: str, project: str) -> str:
    """The page that links ``project``'s files: PyPI's or an index's PEP 503 project page, or a
    find-links page itself (pure)."""
    if index is None or is_pypi(index):
        return f"{PYPI_SIMPLE}/{normalize(project)}/"
    if kind == "find-links":
        return index
    return f"{index.rstrip('/')}/{normalize(project)}/"


def linked(html: str, page: str, filename: str) -> tuple[str, str | None] | None:
    """``(absolute URL, sha256 or None)`` of the link to ``filename`` on a PEP 503 or find-links
    page (pure)."""
    for href in re.findall(r'href="([^"]+)"', html):
        target, _, fragment = href.partition("#")
        if unquote(target.rsplit("/", 1)[-1]) != filename:
            continue
        sha = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        return urljoin(page, target), sha
    return None


def derived(index: str | None, kind: str, filename: str) -> Upstream | None:
    """The URL a known layout gives ``filename`` when the index cannot be asked (pure)."""
    if index is None or is_pypi(index):
        return None  # PyPI's file URLs hold a content path: only PyPI can say
    name = quote(filename)
    if kind == "find-links":
        base = index if index.endswith("/") else index.rsplit("/", 1)[0] + "/"
        return Upstream(url=urljoin(base, name), status="derived",
                        how=f"derived: a flat find-links page ({index}) links its files beside itself")
    parsed = urlparse(index)
    for row in LAYOUTS:
        if parsed.hostname == row.host and parsed.path.startswith(row.path_prefix):
            return Upstream(url=f"{index.rstrip('/')}/{name}", status="derived",
                            how=f"derived: {row.host} keeps {row.rule} ({row.source})")
    return None


def upstream(project: str, filename: str, sha256: str, index: str | None, kind: str) -> Upstream:
    """Where the bytes of wheelhouse file ``filename`` (sha256 ``sha256``) live upstream."""
    page = page_of(index, kind, project)
    down = unreachable(page) if index is not None and not is_pypi(index) else None
    html = None
    if down is None:
        try:
            resp = http.get(page, timeout=TIMEOUT)
            html = resp.text if resp.status_code == 200 else None
            if html is None:
                down = f"{page} answered HTTP {resp.status_code}"
        except http.RequestException as exc:
            down = f"{page} did not answer ({type(exc).__name__})"
    if html is not None:
        found = linked(html, page, filename)
        if found is None:
            return Upstream(url=None, status="none",
                            how=f"{page} does not list {filename}: known here by its sha256 only "
                                "(give the package the index that serves it to record where it lives)")
        url, listed = found
        if listed is not None and listed != sha256:
            raise CheckFailed(f"{project}: the wheelhouse file {filename} is not the file {page} "
                              f"serves (sha256 {sha256[:12]}... there {listed[:12]}...)",
                              hint="replace the wheelhouse file with the index's")
        return Upstream(url=url, status="checked" if listed else "listed",
                        how=f"listed by {page}" + (" with this sha256" if listed else " (no sha256 on the page)"))
    guess = derived(index, kind, filename)
    if guess is None:
        return Upstream(url=None, status="none",
                        how=f"no upstream URL: {down}, and its layout is not known here (lock where "
                            "the index answers to record where the file lives)")
    return Upstream(url=guess.url, status="derived", how=f"{guess.how}; not compared with the index: {down}")
