"""The recipe's downloads (``data``) are fetched by a plan step that checks and records their
sha256: planned after the tree's checkout and before its build, from --data-mirror when the
file is there, else from the URL (here a loopback HTTPS server: a file whose sha256 the recipe
does not pin is fetched over TLS only); a digest that differs from the recipe's, or from the one
the first fetch recorded, is refused and nothing is written."""

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

from envbuild.actions.assets import asset_path
from envbuild.actions.steps import actions
from envbuild.facts.profile import from_target
from envbuild.node import actions as node_actions
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.recipes import load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target

TOOL = asset_path("node/fetch_data.py")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), "--record-dir", str(tmp / "records"), *args],
                          capture_output=True, text=True, timeout=60)


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (PEM files), made here."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture
def server(tmp_path: Path, monkeypatch):
    """A loopback HTTPS server over tmp/www (the URL side of a fetch), its certificate trusted by
    the processes the test starts (SSL_CERT_FILE, which the node's Python reads)."""
    import ssl

    www = tmp_path / "www"
    www.mkdir()
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(www), **kw)

        def log_message(self, *a):  # quiet
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield www, f"https://127.0.0.1:{httpd.server_address[1]}"
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
    assert acts[1].asset == "node/fetch_data.py"


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
    assert (f"has sha256 {_sha(b'tampered' + bytes([10]))}, not the recipe's sha256 {_sha(b'original' + bytes([10]))}"
            in proc.stderr)
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
    proc = _fetch(tmp_path, "--name", "x", "--url", "https://127.0.0.1:9/x", "--dest", str(tmp_path / "x"),
                  "--mirror", str(tmp_path / "absent"))
    assert proc.returncode == 3 and "cannot download https://127.0.0.1:9/x and not in the mirror" in proc.stderr


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
    step = plan.downloads()[0]
    acts = [a.model_dump(mode="json") for a in actions(step, str(prefix))]
    tool = next(a for a in acts if a["op"] == "copy")
    Path(tool["dest"]).parent.mkdir(parents=True)
    shutil.copy(TOOL, tool["dest"])  # what the executor's copy does
    for a in acts:
        if a["op"] == "run":
            a["argv"][0] = sys.executable  # the environment's python is not made here
    node_actions.run_actions([a for a in acts if a["op"] != "copy"])
    assert (prefix / "src" / "tree" / "vocab.json").read_text() == '{"!": 0}\n'
    assert (prefix / ".envbuild" / "data" / "vocab.sha256").is_file()


# --- an image bakes a data file only with a recorded sha256 (envbuild.plan.image.split_data) ---


def _mds(digests: dict[str, str] | None = None, install: str | None = None) -> Recipe:
    """megatron-deepspeed-slurm, with the sha256 of some data files recorded (or the tree's install changed)."""
    rec = load_recipe("megatron-deepspeed-slurm")
    data = [d.model_copy(update={"sha256": (digests or {}).get(d.name, d.sha256)}) for d in rec.data]
    sources = [s.model_copy(update={"install": install}) if install and s.name == "megatron-deepspeed" else s
               for s in rec.sources]
    return rec.model_copy(update={"data": data, "sources": sources})


def _context(rec: Recipe):
    from envbuild.render import dockerfile
    from envbuild.plan.image import image_plan

    return dockerfile.render(image_plan(rec, load_target("slurm"), None))


def _runs_of(text: str) -> str:
    """Every RUN instruction of a Dockerfile, continuation lines joined."""
    return "\n".join(block for block in text.replace("\\\n", " ").split("\n") if block.startswith("RUN "))


def test_data_without_a_recorded_digest_is_fetched_when_the_container_starts_not_baked() -> None:
    """megatron-deepspeed-slurm's three downloads have no sha256 in the recipe: no layer fetches
    them or runs the preprocessing that reads them; the image's prepare.sh does both, and the
    Dockerfile says so (a note at the top, a comment at the COPY)."""
    ctx = _context(load_recipe("megatron-deepspeed-slurm"))
    text = ctx.files["Dockerfile"]
    runs = _runs_of(text)
    assert "fetch_data.py" not in runs and "preprocess_data.py" not in runs and "oscar-1GB" not in runs
    assert "# note: data without a sha256 in the recipe (oscar-1gb, gpt2-vocab, gpt2-merges) is not baked" in text
    assert "prepare.sh fetches the data files the image does not hold" in text
    prepare = ctx.files["envbuild/prepare.sh"].splitlines()
    fetches = [n for n, line in enumerate(prepare) if "fetch_data.py --name" in line]
    assert [prepare[n].split("--name ")[1].split()[0] for n in fetches] == ["oscar-1gb", "gpt2-vocab", "gpt2-merges"]
    assert not any("--sha256" in prepare[n] for n in fetches)
    build = next(n for n, line in enumerate(prepare) if "preprocess_data.py" in line)
    assert build > max(fetches) and prepare[0] == "#!/bin/sh" and "set -eu" in prepare
    assert ctx.modes["envbuild/prepare.sh"] == 0o755
    assert "envbuild/assets/node/fetch_data.py" in ctx.copies
    # the run stage's user writes the records and its copy of the fetch tool
    chown = next(line for line in text.splitlines() if line.strip().startswith("chown -R envbuild:envbuild"))
    assert "/.envbuild/data" in chown and "/.envbuild/tools" in chown


def test_data_with_a_recorded_digest_is_baked_and_checked_at_build() -> None:
    """With every digest recorded the files and the preprocessing are layers again, each fetch
    checked against its sha256, and there is no prepare.sh; with one recorded (oscar), only that
    file is baked and the rest, with the build step that reads them, wait for run time."""
    every = {"oscar-1gb": "a" * 64, "gpt2-vocab": "b" * 64, "gpt2-merges": "c" * 64}
    ctx = _context(_mds(every))
    runs = _runs_of(ctx.files["Dockerfile"])
    for name, sha in every.items():
        assert f"--name {name} " in runs and f"--sha256 {sha}" in runs
    assert "preprocess_data.py" in runs and "envbuild/prepare.sh" not in ctx.files
    assert "not baked" not in ctx.files["Dockerfile"]

    ctx = _context(_mds({"oscar-1gb": "a" * 64}))
    runs = _runs_of(ctx.files["Dockerfile"])
    assert "--name oscar-1gb " in runs and "--sha256 " + "a" * 64 in runs and "gpt2-vocab" not in runs
    assert "preprocess_data.py" not in runs
    prepare = ctx.files["envbuild/prepare.sh"]
    assert "--name gpt2-vocab " in prepare and "--name gpt2-merges " in prepare and "oscar-1gb" not in prepare.split("set -eu")[1]
    assert "preprocess_data.py" in prepare
    assert "# step data:megatron-deepspeed: 2 data file(s) for megatron-deepspeed" in prepare


def test_a_tree_installed_after_data_without_a_digest_is_refused_with_the_fix() -> None:
    from envbuild.errors import InputError

    with pytest.raises(InputError) as exc:
        _context(_mds(install="editable"))
    assert "install:megatron-deepspeed needs the tree" in str(exc.value)
    assert "record each file's sha256 in the recipe's data section" in exc.value.hint


def test_prepare_sh_runs_in_a_container_layout_fetching_recording_and_building(server, tmp_path) -> None:
    """The rendered prepare.sh, run as a container runs it: the context's envbuild/ folder where
    the Dockerfile's COPY puts it, the image's prefix moved under tmp (the only edit), the URL a
    loopback server. The file is fetched and its digest recorded and printed; the tree's build
    step reads it; a later fetch of other bytes is refused."""
    www, url = server
    (www / "vocab.json").write_text('{"!": 0}\n')
    rec = Recipe.model_validate({
        "schema": 1, "name": "tiny", "title": "t", "description": "d", "published": {"url": "https://x.org"},
        "python": "3.11", "targets": ["local"],
        "sources": [{"name": "tree", "url": "https://github.com/acme/tree", "ref": "main", "sha": "0" * 40,
                     "install": "none", "build": ["wc -c < vocab.json > built.txt"], "why": "w"}],
        "data": [{"name": "vocab", "url": f"{url}/vocab.json", "component": "tree", "path": "vocab.json",
                  "sha256": None, "unverified": "test", "why": "w"}]})
    from envbuild.render import dockerfile
    from envbuild.plan.image import image_plan

    ip = image_plan(rec, load_target("local"), None)
    ctx = dockerfile.render(ip)
    assert "vocab.json" not in _runs_of(ctx.files["Dockerfile"])
    prefix = tmp_path / "opt" / "tiny"
    files = prefix / ".envbuild" / "files"
    for rel, text in ctx.files.items():
        if rel.startswith("envbuild/"):
            (files / rel[len("envbuild/"):]).parent.mkdir(parents=True, exist_ok=True)
            (files / rel[len("envbuild/"):]).write_text(text.replace(ip.prefix, str(prefix)))
    for rel, path in ctx.copies.items():
        if rel.startswith("envbuild/"):
            (files / rel[len("envbuild/"):]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, files / rel[len("envbuild/"):])
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to(sys.executable)
    (prefix / "src" / "tree").mkdir(parents=True)  # the checkout, baked
    run = subprocess.run(["sh", str(files / "prepare.sh")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout.splitlines()[-1])
    assert printed["checked"] == "first-fetch" and printed["sha256"] == _sha(b'{"!": 0}\n')
    assert (prefix / ".envbuild" / "data" / "vocab.sha256").read_text().split()[0] == printed["sha256"]
    assert (prefix / "src" / "tree" / "built.txt").read_text().strip() == "9"
    (prefix / "src" / "tree" / "vocab.json").unlink()
    (www / "vocab.json").write_text('{"?": 1}\n')
    again = subprocess.run(["sh", str(files / "prepare.sh")], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "not the one recorded by the first fetch" in again.stderr


@pytest.mark.parametrize("layout", ["file-link", "folder-link", "partial-link"])
def test_a_link_the_tree_carries_never_writes_outside_it(tmp_path, layout) -> None:
    """A pinned commit can carry a symbolic link where a data file goes (or a folder on its way,
    or a leftover '.partial'): with --root (the plan passes the component's tree) nothing is
    written outside the tree, and the file outside keeps its bytes (issue 41)."""
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me\n")
    mirror = tmp_path / "vocab.json"
    mirror.write_bytes(b"payload\n")
    dest = tree / "vocab.json"
    if layout == "file-link":
        dest.symlink_to(victim)
    elif layout == "folder-link":
        (tree / "sub").symlink_to(outside, target_is_directory=True)
        dest = tree / "sub" / "victim.txt"
    else:
        (tree / "vocab.json.partial").symlink_to(victim)
    proc = _fetch(tmp_path, "--name", "vocab", "--url", "http://127.0.0.1:9/v.json", "--dest", str(dest),
                  "--mirror", str(mirror), "--sha256", _sha(b"payload\n"), "--root", str(tree))
    assert victim.read_text() == "keep me\n"
    if layout == "partial-link":  # the leftover link is removed, the file written inside the tree
        assert proc.returncode == 0 and dest.read_bytes() == b"payload\n" and not dest.is_symlink()
    else:
        assert proc.returncode == 4 and "refusing to write" in proc.stderr, proc.stderr


def test_the_plan_passes_the_components_tree_as_the_root() -> None:
    rec, tgt = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
    plan = build_plan(rec, tgt, from_target(tgt), None, PlanOptions(backend="venv", prefix="/e"))
    step = plan.downloads()[0]
    assert step.params.tree == "/e/src/megatron-deepspeed"
    runs = [a for a in actions(step, "/e") if a.op == "run"]
    assert all(a.argv[-2:] == ["--root", "/e/src/megatron-deepspeed"] for a in runs)


@pytest.mark.parametrize("entry,needle", [
    ({"url": "file:///etc/shadow"}, "url must be an http(s) address"),
    ({"url": "https://example.org/x", "file": "../../etc/passwd"}, "one plain file name"),
    ({"url": "https://example.org/a/.."}, "one plain file name"),
])
def test_a_recipe_names_only_remote_files_with_plain_names(entry, needle) -> None:
    from pydantic import ValidationError

    from envbuild.recipes.schema import DataFile

    with pytest.raises(ValidationError) as err:
        DataFile.model_validate({"name": "d", "component": "c", "path": "d.bin", "sha256": None,
                                 "unverified": "t", "why": "t", **entry})
    assert needle in str(err.value)
