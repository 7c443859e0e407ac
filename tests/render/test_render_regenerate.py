"""A rendered Dockerfile names the command that renders it again, exactly (the recipe as the user
gave it, its --lock), and its labels say what they hold: ``io.envbuild.lock.sha256`` is what
``sha256sum`` prints for the lock the context (and the image) carries, ``io.envbuild.lock.digest``
the lock's canonical digest (issue 53)."""

from __future__ import annotations

import shlex
import shutil
import subprocess

from envbuild.bundle.imageprov import LABELS, dockerfile_labels
from envbuild.render.regenerate import render_command
from support.clirun import envbuild
from support.paths import ROOT



def test_the_regenerate_line_renders_the_same_context_again_and_the_labels_say_what_they_hold(tmp_path) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "my locks").mkdir()
    shutil.copy(ROOT / "envbuild/recipes/data/cpu-reference.yaml", tmp_path / "env" / "cpu-reference.yaml")
    shutil.copy(ROOT / "lockfiles/cpu-reference/local.lock", tmp_path / "my locks" / "local.lock")
    r = envbuild("render", "env/cpu-reference.yaml", "--target", "local", "--lock", "my locks/local.lock",
                 "--format", "dockerfile", "-o", "ctx", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "ctx" / "Dockerfile").read_text()
    line = next(x for x in text.splitlines() if x.startswith("# Regenerate: "))
    command = line.removeprefix("# Regenerate: ")
    assert command == ("envbuild render env/cpu-reference.yaml --target local --lock 'my locks/local.lock' "
                       "--format dockerfile")
    # the line, run as written (plus where to write), renders the same context
    again = envbuild(*shlex.split(command)[1:], "-o", "again", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    files = {p.relative_to(tmp_path / "ctx"): p.read_bytes() for p in (tmp_path / "ctx").rglob("*") if p.is_file()}
    redone = {p.relative_to(tmp_path / "again"): p.read_bytes() for p in (tmp_path / "again").rglob("*") if p.is_file()}
    assert files == redone
    # the lock's labels: the file's sha256 as sha256sum prints it, and the canonical digest apart
    labels = dockerfile_labels(text)
    printed = subprocess.run(["sha256sum", "envbuild.lock"], cwd=tmp_path / "ctx", capture_output=True,
                             text=True, check=True).stdout.split()[0]
    assert labels["io.envbuild.lock.sha256"] == printed
    digest = text.split("(lock digest ", 1)[1].split(")", 1)[0]
    assert labels["io.envbuild.lock.digest"] == digest != printed
    assert {"io.envbuild.lock.sha256", "io.envbuild.lock.digest"} <= set(LABELS)  # image-provenance compares both


def test_the_command_quotes_every_input_and_names_only_what_was_given() -> None:
    assert render_command("cpu-reference", "local", "shell") == "envbuild render cpu-reference --target local --format shell"
    cmd = render_command("a b.yaml", "t", "apptainer", lock="x.lock", base="img:1", facts="f.json",
                         wheelhouse="/w h", allow_unverified=("torch", "apex"))
    assert shlex.split(cmd) == ["envbuild", "render", "a b.yaml", "--target", "t", "--lock", "x.lock", "--base",
                                "img:1", "--facts", "f.json", "--wheelhouse", "/w h", "--allow-unverified", "torch",
                                "--allow-unverified", "apex", "--format", "apptainer"]
