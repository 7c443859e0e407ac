"""The recipe's downloads (``data``) are fetched by a plan step that checks and records their
sha256: planned after the tree's checkout and before its build, from --data-mirror when the
file is there, else from the URL (here a loopback HTTP server); a digest that differs from the
recipe's, or from the one the first fetch recorded, is refused and nothing is written."""

from __future__ import annotations

import hashlib
import http.server
import json
import lzma
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from envbuild.actions import onnode
from envbuild.actions.assets import asset_path
from envbuild.actions.steps import actions
from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.recipes import load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target

TOOL = asset_path("tools/fetch_data.py")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), "--record-dir", str(tmp / "records"), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def server(tmp_path: Path):
    """A loopback HTTP server over tmp/www (the URL side of a fetch)."""
    www = tmp_path / "www"
    www.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(www), **kw)

        def log_message(self, *a):  # quiet
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_mds_plan_fetches_the_readme_downloads_before_preprocessing() -> None:
    rec, tgt = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
    plan = build_plan(rec, tgt, from_target(tgt), None, PlanOptions(backend="venv", prefix="/e",
                                                                     data_mirror="/srv/data"))
    ids = [s.id for s in plan.steps]
    assert ids.index("git:megatron-deepspeed") < ids.index("data:megatron-deepspeed") < ids.index("build:megatron-deepspeed")
    data = plan.steps[ids.index("data:megatron-deepspeed")].params
    by_name = {f.name: f for f in data.files}
    assert set(by_name) == {"oscar-1gb", "gpt2-vocab", "gpt2-merges"}
    assert by_name["gpt2-vocab"].dest == "/e/src/megatron-deepspeed/gpt2-vocab.json"
    assert by_name["gpt2-vocab"].mirror == "/srv/data/gpt2-vocab.json"
    assert by_name["oscar-1gb"].decompress == "xz"
    build = plan.steps[ids.index("build:megatron-deepspeed")].params.commands
    assert not any("wget" in c for c in build)  # the downloads are the data step's, checked
    assert data.record_dir == "/e/.envbuild/data"
    acts = actions(plan.steps[ids.index("data:megatron-deepspeed")], "/e")
    assert [a.op for a in acts] == ["mkdir", "copy"] + ["run"] * 3
    assert acts[1].asset == "tools/fetch_data.py"


def test_mirror_first_then_recorded_and_checked(tmp_path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "vocab.json").write_bytes(b'{"a": 1}\n')
    dest = tmp_path / "tree" / "vocab.json"
    args = ["--name", "vocab", "--url", "http://127.0.0.1:9/vocab.json", "--dest", str(dest),
            "--mirror", str(mirror / "vocab.json")]
    proc = _fetch(tmp_path, *args, "--sha256", _sha(b'{"a": 1}\n'))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["origin"] == "mirror" and out["checked"] == "recipe"
    assert (tmp_path / "records" / "vocab.sha256").read_text().split()[0] == _sha(b'{"a": 1}\n')
    again = json.loads(_fetch(tmp_path, *args, "--sha256", _sha(b'{"a": 1}\n')).stdout.splitlines()[-1])
    assert again["origin"] == "present"  # already there with the right digest: nothing fetched


def test_a_digest_other_than_the_recipes_is_refused(tmp_path) -> None:
    mirror = tmp_path / "m.json"
    mirror.write_bytes(b"tampered\n")
    dest = tmp_path / "tree" / "m.json"
    proc = _fetch(tmp_path, "--name", "m", "--url", "http://127.0.0.1:9/m.json", "--dest", str(dest),
                  "--mirror", str(mirror), "--sha256", _sha(b"original\n"))
    assert proc.returncode == 1
    assert f"has sha256 {_sha(b'tampered' + bytes([10]))}, not the recipe's sha256 {_sha(b'original' + bytes([10]))}" in proc.stderr
    assert not dest.exists() and not (dest.parent / "m.json.partial").exists()


def test_without_a_recipe_digest_the_first_fetch_is_recorded_and_later_ones_must_match(server, tmp_path) -> None:
    www, url = server
    (www / "merges.txt").write_text("#version: 0.2\nĠ t\n")
    dest = tmp_path / "tree" / "merges.txt"
    args = ["--name", "merges", "--url", f"{url}/merges.txt", "--dest", str(dest)]
    first = json.loads(_fetch(tmp_path, *args).stdout.splitlines()[-1])
    assert first["origin"] == "url" and first["checked"] == "first-fetch"
    dest.unlink()
    (www / "merges.txt").write_text("#version: 0.2\nĠ a\n")  # the server now serves other bytes
    proc = _fetch(tmp_path, *args)
    assert proc.returncode == 1 and "the one recorded by the first fetch" in proc.stderr
    assert not dest.exists()


def test_unreachable_url_and_no_mirror_copy(tmp_path) -> None:
    proc = _fetch(tmp_path, "--name", "x", "--url", "http://127.0.0.1:9/x", "--dest", str(tmp_path / "x"),
                  "--mirror", str(tmp_path / "absent"))
    assert proc.returncode == 3 and "cannot download http://127.0.0.1:9/x and not in the mirror" in proc.stderr


def test_xz_is_unpacked_after_the_check(server, tmp_path) -> None:
    www, url = server
    raw = b'{"text": "hello"}\n' * 100
    (www / "oscar.jsonl.xz").write_bytes(lzma.compress(raw))
    dest = tmp_path / "tree" / "oscar.jsonl.xz"
    sha = _sha((www / "oscar.jsonl.xz").read_bytes())
    proc = _fetch(tmp_path, "--name", "oscar", "--url", f"{url}/oscar.jsonl.xz", "--dest", str(dest),
                  "--sha256", sha, "--decompress", "xz")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "tree" / "oscar.jsonl").read_bytes() == raw


def test_step_actions_run_on_the_node(server, tmp_path) -> None:
    """The data step of a recipe, planned and run by the node-side executor."""
    www, url = server
    (www / "vocab.json").write_text('{"!": 0}\n')
    rec = Recipe.model_validate({
        "schema": 1, "name": "tiny", "title": "t", "description": "d", "published": {"url": "u"},
        "python": "3.11", "targets": ["local"],
        "sources": [{"name": "tree", "url": "https://github.com/acme/tree", "ref": "main",
                     "sha": "0" * 40, "install": "none", "why": "w"}],
        "data": [{"name": "vocab", "url": f"{url}/vocab.json", "component": "tree", "path": "vocab.json",
                  "sha256": _sha(b'{"!": 0}\n'), "why": "w"}]})
    prefix = tmp_path / "env"
    plan = build_plan(rec, load_target("local"), from_target(load_target("local")), None,
                      PlanOptions(prefix=str(prefix), smoke=False))
    step = next(s for s in plan.steps if s.kind == "data")
    acts = [a.model_dump(mode="json") for a in actions(step, str(prefix))]
    tool = next(a for a in acts if a["op"] == "copy")
    Path(tool["dest"]).parent.mkdir(parents=True)
    shutil.copy(TOOL, tool["dest"])  # what the executor's copy does
    for a in acts:
        if a["op"] == "run":
            a["argv"][0] = sys.executable  # the environment's python is not made here
    onnode.run_actions([a for a in acts if a["op"] != "copy"])
    assert (prefix / "src" / "tree" / "vocab.json").read_text() == '{"!": 0}\n'
    assert (prefix / ".envbuild" / "data" / "vocab.sha256").is_file()
