"""A wheelhouse file is locked under its upstream URL (envbuild.lock.upstream): read from the
index's page when it answers (a real HTTP server here), with its sha256 compared; derived from a
known layout when it does not; refused when the index lists other bytes or no such file."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from envbuild.errors import CheckFailed
from envbuild.lock.upstream import derived, linked, page_of, upstream

FILE = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def test_pages_of_pypi_an_index_and_a_find_links_page():
    assert page_of(None, "index-url", "Foo_Bar") == "https://pypi.org/simple/foo-bar/"
    assert page_of("https://download.pytorch.org/whl/cpu", "index-url", "torch") == \
        "https://download.pytorch.org/whl/cpu/torch/"
    assert page_of("https://download.pytorch.org/whl/torch_stable.html", "find-links", "torch") == \
        "https://download.pytorch.org/whl/torch_stable.html"


def test_a_link_is_found_by_its_unquoted_file_name_and_made_absolute():
    html = ('<a href="/whl/cpu/torch-2.12.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=' + "a" * 64 + '">x</a>'
            '<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=' + "b" * 64 + '">y</a>')
    url, sha = linked(html, "https://download.pytorch.org/whl/cpu/torch/", FILE)
    assert url == "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert sha == "b" * 64
    assert linked('<a href="other.whl">', "https://x/", FILE) is None


def test_known_layouts_derive_a_url_and_unknown_ones_do_not():
    got = derived("https://download.pytorch.org/whl/cpu", "index-url", FILE)
    assert got.url == "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert got.status == "derived" and "https://" in got.how  # the row's source is named
    flat = derived("https://download.pytorch.org/whl/torch_stable.html", "find-links", "a-1.0-py3-none-any.whl")
    assert flat.url == "https://download.pytorch.org/whl/a-1.0-py3-none-any.whl"
    assert derived("https://example.org/simple", "index-url", FILE) is None  # layout unknown
    assert derived(None, "index-url", FILE) is None  # PyPI: only PyPI can say


@pytest.fixture()
def index(tmp_path):
    """A PEP 503 index served over HTTP from tmp_path/index (pages written by each test)."""
    root = tmp_path / "index"
    (root / "probe").mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _page(root: Path, href: str) -> None:
    (root / "probe" / "index.html").write_text(f'<html><body><a href="{href}">f</a></body></html>')


def test_a_file_the_index_lists_with_its_sha256_is_checked(index):
    root, url = index
    sha = hashlib.sha256(b"bytes").hexdigest()
    _page(root, f"../files/probe-1.0-py3-none-any.whl#sha256={sha}")
    got = upstream("probe", "probe-1.0-py3-none-any.whl", sha, url, "index-url")
    assert got.url == f"{url}files/probe-1.0-py3-none-any.whl" and got.status == "checked"


def test_other_bytes_under_the_listed_name_are_refused(index):
    root, url = index
    _page(root, "../files/probe-1.0-py3-none-any.whl#sha256=" + "0" * 64)
    with pytest.raises(CheckFailed, match="is not the file"):
        upstream("probe", "probe-1.0-py3-none-any.whl", "1" * 64, url, "index-url")


def test_a_file_the_index_does_not_list_has_no_upstream_and_says_why(index):
    """A wheel built locally, or a +cpu build for a package with no index in the recipe: the
    lock knows it by its sha256 only."""
    root, url = index
    _page(root, "../files/probe-1.0-py3-none-any.whl")
    got = upstream("probe", "probe-2.0-py3-none-any.whl", "1" * 64, url, "index-url")
    assert got.url is None and got.status == "none" and "does not list probe-2.0" in got.how


def test_an_unreachable_index_of_unknown_layout_names_no_upstream():
    got = upstream("probe", "probe-1.0-py3-none-any.whl", "1" * 64, "http://127.0.0.1:9/simple", "index-url")
    assert got.url is None and got.status == "none" and "unreachable" in got.how
