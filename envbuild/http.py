"""envbuild's one HTTP client for its own downloads: index probes and pages (``lock``), the
files of a bundle and a recipe's data (``bundle.fetch``).

Every request goes through ``get`` (requests), with TLS verified against the system's trust
store (``truststore``: the operating system's certificates, as pip, uv with native TLS and the
node's own Python see them; not certifi's bundle), so envbuild answers the same as the other
tools behind a TLS-inspecting proxy whose certificate the site installed. uv, which envbuild
runs to resolve, is asked for the same store (``UV_NATIVE_TLS``, envbuild.lock.uvresolve).
"""

from __future__ import annotations

import requests

from envbuild import __version__

RequestException = requests.exceptions.RequestException
ConnectionError = requests.exceptions.ConnectionError  # noqa: A001 - requests' name, re-exported
Timeout = requests.exceptions.Timeout

_SESSION: requests.Session | None = None


def session() -> requests.Session:
    """The process's session, its TLS verified by the system's trust store."""
    global _SESSION
    if _SESSION is None:
        import truststore

        truststore.inject_into_ssl()  # ssl's contexts (and so requests', urllib3's) use the system store
        _SESSION = requests.Session()
        _SESSION.headers["User-Agent"] = f"envbuild/{__version__}"
    return _SESSION


def get(url: str, *, timeout: float, stream: bool = False) -> requests.Response:
    """GET ``url`` (redirects followed); the caller closes a streamed response."""
    return session().get(url, timeout=timeout, stream=stream, allow_redirects=True)
