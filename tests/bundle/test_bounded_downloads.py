"""Downloads are bounded (issue 54, item 4): a locked wheel or a recipe's data file served by a
mirror that streams without end, or that announces more than the stated maximum, is stopped
there, the partial file removed and named; ``http://`` is taken only where a sha256 pins the
bytes. Served by a real HTTP server thread on loopback; the node's fetcher runs as the node
runs it (its own Python process)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envbuild.bundle import fetch
from envbuild.errors import CheckFailed, InputError
from envbuild.lock.schema import Dist, LockedPackage
from support.paths import ROOT

CAP = 4 << 20  # the stated maximum for these tests (ENVBUILD_MAX_DOWNLOAD_BYTES)
SMALL = b"a small honest file\n"


class Mirror(BaseHTTPRequestHandler):
    """/endless: chunks without end; /huge: Content-Length of 1 TiB; /small: SMALL."""

    requests: list[str] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Mirror.requests.append(self.path)
        path = self.path.split("?")[0]
        self.send_response(200)
        if path.endswith("/small"):
            self.send_header("Content-Length", str(len(SMALL)))
            self.end_headers()
            self.wfile.write(SMALL)
            return
        if path.endswith("/huge"):
            self.send_header("Content-Length", str(1 << 40))
            self.end_headers()
        else:
            self.end_headers()  # no length: read until the connection closes, which it never does
        block = b"x" * (1 << 16)
        try:
            while True:
                self.wfile.write(block)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    monkeypatch.setenv("ENVBUILD_MAX_DOWNLOAD_BYTES", str(CAP))
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    Mirror.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _pkg(url: str, sha256: str = "0" * 64) -> LockedPackage:
    return LockedPackage(name="evil", version="1.0", source="pypi", verified=True,
                         dist=Dist(kind="wheel", filename="evil-1.0-py3-none-any.whl", url=url, sha256=sha256))


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_a_wheel_streamed_without_end_is_stopped_at_the_cap(mirror, tmp_path):
    with pytest.raises(CheckFailed) as err:
        fetch.fetch_dist(_pkg(f"{mirror}/endless"), tmp_path / "out.whl", None)
    assert f"sent more than {CAP} bytes" in err.value.message and "the partial file" in err.value.message
    partial = err.value.message.split("the partial file ")[1].split(" removed")[0]
    assert ".part-" in partial and not os.path.lexists(partial)
    assert _files(tmp_path / "cache") == [] and not (tmp_path / "out.whl").exists()


def test_a_wheel_announcing_more_than_the_cap_is_refused_at_once(mirror, tmp_path):
    with pytest.raises(CheckFailed, match=f"announces {1 << 40} bytes, more than the {CAP}"):
        fetch.fetch_dist(_pkg(f"{mirror}/huge"), tmp_path / "out.whl", None)
    assert _files(tmp_path / "cache") == []


def test_a_pinned_file_still_comes_over_http_and_is_checked(mirror, tmp_path):
    good = hashlib.sha256(SMALL).hexdigest()
    assert fetch.fetch_dist(_pkg(f"{mirror}/small", good), tmp_path / "out.whl", None) == "download"
    assert (tmp_path / "out.whl").read_bytes() == SMALL
    with pytest.raises(CheckFailed, match="the download removed"):
        fetch.fetch_dist(_pkg(f"{mirror}/small?other", "1" * 64), tmp_path / "bad.whl", None)
    assert [p.name for p in _files(tmp_path / "cache")] == ["evil-1.0-py3-none-any.whl"]  # the good one only


def test_an_unpinned_data_file_is_not_taken_over_http(mirror, tmp_path):
    with pytest.raises(InputError, match="only https:// is fetched for a file without a recorded sha256"):
        fetch.fetch_data_file("corpus", f"{mirror}/small", None, tmp_path / "data" / "corpus.bin", None)
    assert Mirror.requests == [] and _files(tmp_path / "data") == []
    origin, digest = fetch.fetch_data_file("corpus", f"{mirror}/small", hashlib.sha256(SMALL).hexdigest(),
                                           tmp_path / "data" / "corpus.bin", None)
    assert (tmp_path / "data" / "corpus.bin").read_bytes() == SMALL and digest == hashlib.sha256(SMALL).hexdigest()


def test_a_pinned_data_file_streamed_without_end_leaves_nothing(mirror, tmp_path):
    with pytest.raises(CheckFailed, match=f"sent more than {CAP} bytes"):
        fetch.fetch_data_file("corpus", f"{mirror}/endless", "0" * 64, tmp_path / "data" / "corpus.bin", None)
    assert _files(tmp_path / "data") == []


@pytest.mark.process
def test_the_nodes_fetcher_stops_an_endless_file_and_refuses_unpinned_http(mirror, tmp_path):
    tool = ROOT / "envbuild" / "node" / "fetch_data.py"
    dest = tmp_path / "tree" / "corpus.bin"

    def node(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(tool), "--name", "corpus", "--dest", str(dest),
                               "--record-dir", str(tmp_path / "records"), "--max-bytes", str(CAP), *extra],
                              capture_output=True, text=True, timeout=120)

    p = node("--url", f"{mirror}/endless", "--sha256", "0" * 64)
    assert p.returncode == 3, p.stderr
    assert f"sent more than {CAP} bytes" in p.stderr and f"the partial file {dest}.partial removed" in p.stderr
    assert _files(tmp_path / "tree") == []
    p = node("--url", f"{mirror}/huge", "--sha256", "0" * 64)
    assert p.returncode == 3 and "announces" in p.stderr and _files(tmp_path / "tree") == []
    asked = len(Mirror.requests)
    p = node("--url", f"{mirror}/small")  # no sha256 pinned, none recorded: not over http
    assert p.returncode == 2 and "only https:// is fetched" in p.stderr and len(Mirror.requests) == asked
    p = node("--url", f"{mirror}/small", "--sha256", hashlib.sha256(SMALL).hexdigest())
    assert p.returncode == 0, p.stderr
    assert dest.read_bytes() == SMALL
