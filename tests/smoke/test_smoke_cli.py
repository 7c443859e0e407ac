"""``envbuild smoke`` through the real CLI entry point."""

import json
import subprocess
import sys

import pytest
from support.clirun import envbuild as run_envbuild

pytestmark = pytest.mark.torch


def envbuild(*args, timeout=300):
    return run_envbuild(*args)


@pytest.mark.slow
def test_smoke_local_gpt_and_collective_json_and_out_file(tmp_path):
    out = tmp_path / "node" / "smoke.json"
    p = envbuild("smoke", "--local", "--preset", "tiny", "--json", "--out", str(out))
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert set(res) == {"gpt", "collective"}
    assert res["gpt"]["ok"] and res["gpt"]["tokens_per_s"] > 0
    assert res["collective"]["ok"] and res["collective"]["world_size"] == 2
    assert json.loads(out.read_text()) == res


def test_smoke_without_local_is_refused_with_a_hint():
    p = envbuild("smoke")
    assert p.returncode == 2 and "hint:" in p.stderr and "Traceback" not in p.stderr


def test_smoke_bad_interpreter_and_interpreter_without_torch(tmp_path):
    p = envbuild("smoke", "--local", "--python", str(tmp_path / "nope"))
    assert p.returncode == 2 and "not found" in p.stderr
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    p = envbuild("smoke", "--local", "--python", str(venv / "bin" / "python"), "--kind", "gpt")
    assert p.returncode == 3 and "no torch" in p.stderr and "hint:" in p.stderr


def test_smoke_apex_kind_prints_skipped():
    p = envbuild("smoke", "--local", "--kind", "apex")
    assert p.returncode == 0 and "apex not installed" in p.stdout
