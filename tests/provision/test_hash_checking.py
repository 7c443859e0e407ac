"""Every package with a hash is installed hash-checked, whatever else is in the step.

A wheel swapped in the wheelhouse (same file name, other bytes) is refused by pip before
anything of it is installed, also when an unverified package (allowed by name) is installed
in the same step; the unverified one goes through its own pip call, never switching hash
checking off for the others.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envbuild.actions.steps import actions
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.testbed.local_plan import run_local_plan


def make_wheel(folder: Path, name: str, version: str, body: str) -> Path:
    """A minimal pure-Python wheel (module ``name`` with ``VALUE = body``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}.py": f"VALUE = {body!r}\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as z:
        for arc, text in files.items():
            z.writestr(arc, text)
        z.writestr(f"{dist}/RECORD", "".join(f"{a},,\n" for a in [*files, f"{dist}/RECORD"]))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pip_step(house: Path, good_sha: str) -> Step:
    return Step(id="pip:packages", title="p", params=P.PipInstallParams(
        requirements=[P.Requirement(name="ebgood", version="1.0", requirement="ebgood==1.0",
                                    hashes=[good_sha]),
                      P.Requirement(name="ebloose", version="1.0", requirement="ebloose==1.0")],
        find_links=[str(house)], no_index=True, unverified=["ebloose"]))


def test_hashed_and_unverified_packages_get_separate_pip_calls(tmp_path):
    acts = actions(pip_step(tmp_path, "ab" * 32), "/e")
    runs = [a for a in acts if a.op == "run"]
    assert len(runs) == 2
    assert "--require-hashes" in runs[0].argv and "--require-hashes" not in runs[1].argv
    files = [a for a in acts if a.op == "write"]
    assert "--hash=sha256:" + "ab" * 32 in files[0].content and "ebloose" not in files[0].content


@pytest.mark.integration
def test_swapped_wheel_is_refused(tmp_path):
    house = tmp_path / "house"
    good = make_wheel(tmp_path / "orig", "ebgood", "1.0", "good")
    make_wheel(house, "ebloose", "1.0", "loose")
    good_sha = sha256(good)
    swapped = make_wheel(house, "ebgood", "1.0", "EVIL")  # same name, other bytes
    assert sha256(swapped) != good_sha
    prefix = str(tmp_path / "env")
    env = Step(id="environment", title="venv", params=P.EnvironmentParams(
        backend="venv", prefix=prefix, python="3.11", interpreter=sys.executable))
    plan = Plan(recipe="t", target="local", host="local", prefix=prefix, backend="venv",
                steps=[env, pip_step(house, good_sha)])
    rc, host, _ = run_local_plan(tmp_path, plan)
    assert rc != 0 and host.failed_step == "pip:packages"
    assert "hash" in host.tail().lower() and "do not match" in host.tail().lower()
    py = f"{prefix}/bin/python"
    assert subprocess.run([py, "-c", "import ebgood"], capture_output=True).returncode != 0

    # the genuine wheel back in the wheelhouse: the same plan installs both
    swapped.write_bytes(good.read_bytes())
    rc, host, _ = run_local_plan(tmp_path / "again", plan)
    assert rc == 0, host.tail()
    out = subprocess.run([py, "-c", "import ebgood, ebloose; print(ebgood.VALUE, ebloose.VALUE)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["good", "loose"]
