"""Package indexes seen from here: is an index reachable, which versions exist, local wheelhouses.

The only network code of the lock besides uv itself: a short reachability probe for non-PyPI
indexes (download.pytorch.org is not reachable from every machine) and PyPI's JSON simple API
to name the versions that exist when a pin asks for one that does not.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

from envbuild import http
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename
from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envbuild.lock.schema import normalize

PROBE_TIMEOUT = 6.0
PYPI_SIMPLE = "https://pypi.org/simple"
PYPI_HOSTS = ("pypi.org", "files.pythonhosted.org")


def is_pypi(url: str | None) -> bool:
    """Whether ``url`` (an index or a file URL) is PyPI itself."""
    return url is None or urlparse(url).hostname in PYPI_HOSTS


@lru_cache(maxsize=64)
def unreachable(url: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """None when ``url`` answers over HTTP(S) (any status below 500), else why it does not."""
    if url.startswith("file://") or "://" not in url:
        path = Path(url.removeprefix("file://"))
        return None if path.exists() else f"{path} does not exist"
    host = urlparse(url).hostname or url
    try:
        resp = http.get(url, timeout=timeout, stream=True)
        resp.close()
    except http.ConnectionError as exc:
        text = str(exc)
        if "NameResolution" in text or "Name or service not known" in text or "resolve" in text:
            return f"index {host} unreachable from here (DNS lookup failed)"
        return f"index {host} unreachable from here (connection failed)"
    except http.Timeout:
        return f"index {host} unreachable from here (no answer in {timeout:.0f} s)"
    except http.RequestException as exc:
        return f"index {host} unreachable from here ({type(exc).__name__})"
    if resp.status_code >= 500:
        return f"index {host} answered HTTP {resp.status_code}"
    return None


@lru_cache(maxsize=256)
def pypi_versions(name: str, timeout: float = 15.0) -> tuple[str, ...] | None:
    """Versions of ``name`` on PyPI (PEP 503 simple page), oldest first; None when unreachable."""
    try:
        resp = http.get(f"{PYPI_SIMPLE}/{normalize(name)}/", timeout=timeout)
    except http.RequestException:
        return None
    if resp.status_code == 404:
        return ()
    if resp.status_code != 200:
        return None
    return versions_from_simple_html(resp.text)


def cp_wheel_on_pypi(name: str, version: str, python: str, timeout: float = 15.0) -> bool:
    """Whether PyPI has a wheel of ``name`` ``version`` for CPython ``python`` (``"3.9"``)."""
    try:
        resp = http.get(f"{PYPI_SIMPLE}/{normalize(name)}/", timeout=timeout)
    except http.RequestException:
        return False
    return resp.status_code == 200 and has_cp_wheel(resp.text, name, version, python)


def pypi_cp_wheel(name: str, version: str, python: str, arch: str,
                  timeout: float = 15.0) -> tuple[str, str, str] | None:
    """``(filename, url, sha256)`` of PyPI's Linux wheel of ``name`` ``version`` for CPython
    ``python`` on ``arch``; None when it has none or PyPI does not answer."""
    try:
        resp = http.get(f"{PYPI_SIMPLE}/{normalize(name)}/", timeout=timeout)
    except http.RequestException:
        return None
    return linux_cp_wheel(resp.text, version, python, arch) if resp.status_code == 200 else None


def linux_cp_wheel(html: str, version: str, python: str, arch: str) -> tuple[str, str, str] | None:
    """The first wheel a PEP 503 page links for ``version``, CPython ``python``, Linux ``arch``,
    with the sha256 of its link (pure)."""
    tag = "cp" + python.replace(".", "")
    for href, sha in re.findall(r'href="([^"#]+)#sha256=([0-9a-f]{64})', html):
        filename = href.rsplit("/", 1)[-1]
        if not filename.endswith(".whl"):
            continue
        try:
            _, ver, _, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if str(ver) == version and any(t.interpreter == tag and "linux" in t.platform
                                       and t.platform.endswith(arch) for t in tags):
            return filename, href, sha
    return None


def has_cp_wheel(html: str, name: str, version: str, python: str) -> bool:
    """Whether a PEP 503 page links a wheel of ``version`` tagged for CPython ``python`` (pure)."""
    tag = "cp" + python.replace(".", "")
    for href in re.findall(r'href="([^"#]+)', html):
        filename = href.rsplit("/", 1)[-1]
        if not filename.endswith(".whl"):
            continue
        try:
            _, ver, _, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if str(ver) == version and any(t.interpreter == tag for t in tags):
            return True
    return False


def versions_from_simple_html(html: str) -> tuple[str, ...]:
    """Distinct versions named by the file links of a PEP 503 project page, oldest first."""
    found: dict[Version, str] = {}
    for href in re.findall(r'href="([^"#]+)', html):
        filename = href.rsplit("/", 1)[-1]
        try:
            if filename.endswith(".whl"):
                version = parse_wheel_filename(filename)[1]
            elif filename.endswith((".tar.gz", ".zip")):
                version = parse_sdist_filename(filename)[1]
            else:
                continue
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
        found.setdefault(version, str(version))
    return tuple(found[v] for v in sorted(found))


def describe_versions(versions: tuple[str, ...] | None, around: str | None = None, limit: int = 12) -> str:
    """A short human list of versions, the newest ``limit`` (or those nearest ``around``)."""
    if versions is None:
        return "(PyPI could not be asked for the list)"
    if not versions:
        return "(no release at all: check the project name)"
    shown = list(versions)
    if around:
        prefix = re.match(r"\d+(\.\d+)?", around)
        near = [v for v in versions if prefix and v.startswith(prefix.group(0))]
        shown = near or shown
    shown = shown[-limit:]
    more = "" if len(shown) == len(versions) else f" ({len(versions)} in all)"
    return ", ".join(shown) + more



def wheelhouse_projects(folder: Path) -> dict[str, list[Path]]:
    """Distribution files in a local wheelhouse, grouped by normalized project name."""
    out: dict[str, list[Path]] = {}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            if path.suffix == ".whl":
                name = parse_wheel_filename(path.name)[0]
            elif path.name.endswith((".tar.gz", ".zip")):
                name = parse_sdist_filename(path.name)[0]
            else:
                continue
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
        out.setdefault(normalize(str(name)), []).append(path)
    return out
