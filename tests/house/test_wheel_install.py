"""The built wheel provisions on its own: installed into a fresh venv outside the checkout, run
from a folder outside it, ``envbuild provision --target local`` (README's first commands) gives a
PASS report with the lock, playbook and collection the wheel carries.

The wheel is built from a copy of this checkout's files (``pip wheel --no-deps``: setuptools from
the pip cache or PyPI); envbuild's dependencies come from PyPI through uv's cache, torch from ``/opt/wheels``
(the CI image's CPU wheel, as in the README). Nothing of the checkout is importable in the run:
no PYTHONPATH, no VIRTUAL_ENV, the venv's own bin first on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envbuild.execute.prefixlock import lock_dir
from envbuild.testbed.writes import created, outside, traced
from support.paths import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WHEELHOUSE = Path("/opt/wheels")


def run(argv: list, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900, **kw)
    assert r.returncode == 0, f"{argv}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_wheel_holds_what_provisioning_reads(built_wheel):
    """The checkout's top-level lockfiles/ and playbooks/ are in the wheel inside the package
    (setup.py maps them), where envbuild.shipped looks in an installed envbuild; the test bed is
    not."""
    names = set(zipfile.ZipFile(built_wheel).namelist())
    shipped = {f"envbuild/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / "lockfiles").rglob("*.lock")}
    assert shipped and shipped <= names, f"locks missing from the wheel: {sorted(shipped - names)}"
    playbooks = ROOT / "playbooks"
    wanted = {f"envbuild/{p.relative_to(ROOT).as_posix()}" for p in playbooks.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")}
    assert {"envbuild/playbooks/provision.yml", "envbuild/playbooks/ansible.cfg",
            "envbuild/playbooks/ansible_collections/envbuild/node/galaxy.yml"} <= wanted
    assert wanted <= names, f"playbooks/ files missing: {sorted(wanted - names)}"
    # module_utils are links in the checkout; in the wheel they are the files themselves
    links = [p for p in (playbooks / "ansible_collections").rglob("*") if p.is_symlink()]
    assert len(links) == len(list((ROOT / "envbuild" / "node").glob("*.py")))
    with zipfile.ZipFile(built_wheel) as z:
        for link in links:
            info = z.getinfo(f"envbuild/{link.relative_to(ROOT).as_posix()}")
            assert (info.external_attr >> 16) & 0o170000 == 0o100000, f"{info.filename} is not a file"
            assert z.read(info) == link.resolve().read_bytes()
    # everything is the package's or its metadata: no top-level playbooks/ or lockfiles/
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"envbuild"}
    # the test bed serves the checkout's tests and is not shipped (setup.py)
    assert "envbuild/shipped.py" in names and not [n for n in names if n.startswith("envbuild/testbed/")]
    # the judge's same-GPU references (docs/results, where their records lie, is not shipped)
    assert "envbuild/smoke/references.json" in names and not [n for n in names if n.startswith("docs/")]


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> Path:
    """Built from a copy of the checkout's files (tracked, or new and not ignored; links kept):
    setuptools builds in the source folder and never empties its build/lib, so a wheel built
    in place would also carry what an earlier build of another layout left there."""
    src = tmp_path_factory.mktemp("src")
    files = run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout
    for rel in filter(None, files.split("\0")):
        if (ROOT / rel).is_symlink() or (ROOT / rel).is_file():  # a deleted file is still "cached"
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel, follow_symlinks=False)
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, src])
    (wheel,) = dist.glob("envbuild-*.whl")
    return wheel


def test_installed_wheel_provisions_the_default_from_outside_the_checkout(built_wheel, tmp_path):
    from uv import find_uv_bin

    venv = tmp_path / "venv"
    uv = find_uv_bin()
    # with uv, nothing in this venv runs pip: made without it (ensurepip is ~4.7 s on 2 cores)
    run([shutil.which("python3") or sys.executable, "-m", "venv", *(["--without-pip"] if uv else []), venv])
    py = venv / "bin" / "python"
    if uv:  # uv's cache makes this seconds; pip's cache would too, slower
        run([uv, "pip", "install", "-q", "--python", py, built_wheel])
    else:
        run([py, "-m", "pip", "install", "-q", built_wheel])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "ENVBUILD_LOCKDIR")}
    env.update(PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", ENVBUILD_HOME=str(tmp_path / "home"))
    where = run([py, "-c", "import envbuild; print(envbuild.__file__)"], cwd=elsewhere, env=env).stdout
    assert Path(where.strip()).is_relative_to(venv), where
    # the locator's one rule, installed: the top-level folders are the package's own copies
    found = run([py, "-c", "import importlib.util as u, json, envbuild.shipped as s; print(json.dumps("
                 "[s.INSTALLED, str(s.PLAYBOOKS), str(s.LOCKFILES), u.find_spec('envbuild.testbed') is None]))"],
                cwd=elsewhere, env=env).stdout
    package = Path(where.strip()).resolve().parent
    assert json.loads(found) == [True, str(package / "playbooks"), str(package / "lockfiles"), True], found

    envbuild = venv / "bin" / "envbuild"
    env["ENVBUILD_CACHE_DIR"] = str(tmp_path / "cache")
    trace = tmp_path / "strace.txt"
    argv = [str(a) for a in (envbuild, "provision", "--target", "local", "--prefix", tmp_path / "prefix",
                             "--wheelhouse", WHEELHOUSE)]
    prov = run(traced(argv, trace) or argv, cwd=elsewhere, env=env)
    said = prov.stdout + prov.stderr
    assert "local: ok" in said, said[-2000:]
    run_dir = Path(said.rsplit("run directory: ", 1)[1].split()[0])
    record = json.loads((run_dir / "run.json").read_text())
    assert Path(record["lock_path"]).is_relative_to(venv), record["lock_path"]  # the wheel's lock
    assert "no lockfile" not in said  # nothing was resolved anew
    report = run([envbuild, "report"], cwd=elsewhere, env=env).stdout
    assert "## Verdict: PASS" in report, report[:2000]
    assert not (elsewhere / "lockfiles").exists() and list(elsewhere.iterdir()) == []

    # every file the run left lies in the prefix, ENVBUILD_HOME (the run directory), envbuild's
    # cache, the prefix locks or the node's uv cache: none in the working folder, none in /tmp
    if not trace.is_file():
        pytest.skip("strace not installed: the files the run left were not traced (.ci/apt-packages.txt has it)")
    uv_cache = run([find_uv_bin(), "cache", "dir"], env=env).stdout.strip()
    allowed = [tmp_path / "prefix", tmp_path / "home", tmp_path / "cache", lock_dir(), Path(uv_cache),
               Path("/dev"), Path("/proc")]
    left = outside(created(trace.read_text()), allowed)
    # less Python's bytecode cache of the controller's own install (uv installed the wheel without
    # compiling it, as pip would have, and this suite's Pythons write bytecode): anything else
    # written into the venv, a lock in site-packages say, is still left over
    left = [p for p in left if not (Path(p).is_relative_to(venv) and bytecode_cache(Path(p)))]
    assert left == [], left[:40]


def bytecode_cache(path: Path) -> bool:
    """A ``__pycache__`` folder or a ``.pyc`` file in one."""
    return path.name == "__pycache__" or (path.parent.name == "__pycache__" and path.suffix == ".pyc")
