"""The image's run-time data prepared once per job (issue 38): the real prepare.sh of
megatron-deepspeed-slurm's image, its steps swapped for ones that write into a folder here
(the originals fetch from the internet), run in its three modes with sh: --stage keeps what the
steps wrote with its SHA256SUMS, --from copies it into another container's tree after checking
every file, a second --stage reuses it, a changed file is refused and prepared again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest



@pytest.fixture(scope="module")
def prepare_text(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("render") / "image"
    got = subprocess.run([sys.executable, "-m", "envbuild", "render", "megatron-deepspeed-slurm", "--target", "slurm",
                          "--format", "dockerfile", "-o", str(out)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ENVBUILD_HOME": str(out.parent / "home")})
    assert got.returncode == 0, got.stderr
    return (out / "envbuild" / "prepare.sh").read_text()


def swapped(text: str, tree: Path, counter: Path) -> str:
    """The script with ROOTS set to ``tree`` and its steps replaced by local writes."""
    text = re.sub(r"^ROOTS=.*$", f"ROOTS='{tree}'", text, count=1, flags=re.M)
    start, end = text.index("# --- the run-time steps\n"), text.index("# --- end of the run-time steps")
    steps = (f"mkdir -p '{tree}/sub'\nprintf 'vocab' > '{tree}/gpt2-vocab.json'\n"
             f"printf 'index' > '{tree}/sub/my-gpt2_text_document.idx'\necho ran >> '{counter}'\n")
    return text[:start] + "# --- the run-time steps\n" + steps + text[end:]


def sh(script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(script), *args], capture_output=True, text=True, timeout=60)


def test_prepared_once_copied_everywhere_and_checked(prepare_text, tmp_path):
    tree, counter, stage = tmp_path / "tree", tmp_path / "ran", tmp_path / "job" / "envbuild-data"
    tree.mkdir()
    (tree / "from-the-image.py").write_text("code\n")  # in the tree before the steps: not data
    os.utime(tree / "from-the-image.py", (1_700_000_000, 1_700_000_000))  # as old as the image
    script = tmp_path / "prepare.sh"
    script.write_text(swapped(prepare_text, tree, counter))

    first = sh(script, "--stage", str(stage))
    assert first.returncode == 0, first.stderr
    sums = (stage / "SHA256SUMS").read_text().splitlines()
    assert len(sums) == 2 and all(f"files{tree}/" in line for line in sums)
    assert "from-the-image.py" not in "".join(sums) and counter.read_text() == "ran\n"

    # another container: its tree holds only what the image holds
    for p in (tree / "gpt2-vocab.json", tree / "sub" / "my-gpt2_text_document.idx"):
        p.unlink()
    copied = sh(script, "--from", str(stage))
    assert copied.returncode == 0, copied.stderr
    assert (tree / "gpt2-vocab.json").read_text() == "vocab" and (tree / "sub" / "my-gpt2_text_document.idx").exists()
    assert counter.read_text() == "ran\n"  # nothing fetched or prepared again

    again = sh(script, "--stage", str(stage))
    assert again.returncode == 0 and "already prepared" in again.stdout and counter.read_text() == "ran\n"

    (stage / "files" / str(tree).lstrip("/") / "gpt2-vocab.json").write_text("tampered")
    (tree / "gpt2-vocab.json").unlink()
    refused = sh(script, "--from", str(stage))
    assert refused.returncode == 1 and "does not hold data matching its SHA256SUMS" in refused.stderr
    assert not (tree / "gpt2-vocab.json").exists()
    redone = sh(script, "--stage", str(stage))
    assert redone.returncode == 0 and counter.read_text() == "ran\nran\n"
    assert sh(script, "--from", str(stage)).returncode == 0 and (tree / "gpt2-vocab.json").read_text() == "vocab"


def test_plain_run_and_bad_arguments(prepare_text, tmp_path):
    tree, counter = tmp_path / "tree", tmp_path / "ran"
    tree.mkdir()
    script = tmp_path / "prepare.sh"
    script.write_text(swapped(prepare_text, tree, counter))
    assert sh(script).returncode == 0 and counter.read_text() == "ran\n" and (tree / "gpt2-vocab.json").exists()
    bad = sh(script, "--bogus")
    assert bad.returncode == 2 and "unknown argument --bogus" in bad.stderr
    assert sh(script, "--from").returncode != 0
