"""Package steps installed by uv through the real executor (render -> ansible-runner -> the
node runner), on this machine: the controller's uv pushed as a step and checked by sha256,
the same hash checking as pip (a swapped wheel is refused), pip kept for a build without
isolation in the same step, and a file changed in the environment repaired by uv.

Wheels are made by the tests (``make_wheel`` of tests/provision/test_hash_checking.py); uv's
cache is the test's own (UV_CACHE_DIR through the step's environment), so nothing touches the
machine's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.facts.model import UvBinary
from envbuild.facts.uvbin import controller_uv
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.testbed.local_plan import run_local_plan
from test_hash_checking import make_wheel, sha256

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def uv():
    path, found = controller_uv()
    if found is None:
        pytest.skip("no uv binary on this controller")
    return found


def hashed_wheel(folder: Path, name: str, version: str, body: str) -> Path:
    """A wheel whose RECORD carries each file's sha256 (as real wheels do: uv keeps the
    wheel's RECORD rows, pip writes its own)."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}.py": f"VALUE = {body!r}\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}

    def row(arc: str, text: str) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        return f"{arc},sha256={digest},{len(text.encode())}\n"

    with zipfile.ZipFile(path, "w") as z:
        for arc, text in files.items():
            z.writestr(arc, text)
        z.writestr(f"{dist}/RECORD", "".join(row(a, t) for a, t in files.items()) + f"{dist}/RECORD,,\n")
    return path


def site(prefix: str) -> Path:
    return next(Path(prefix, "lib").glob("python3*/site-packages"))


def installer_of(prefix: str, name: str) -> str:
    return next(site(prefix).glob(f"{name}-*.dist-info")).joinpath("INSTALLER").read_text().strip()


def uv_plan(tmp_path: Path, uv: UvBinary, house: Path, reqs: list[P.Requirement], *,
            no_isolation: tuple[str, ...] = ()) -> Plan:
    prefix = str(tmp_path / "env")
    tool = f"{prefix}/.envbuild/tools/uv"
    steps = [
        # made --without-pip unless pip builds a package here (ensurepip: ~2.5 CPU-s a venv)
        Step(id="environment", title="venv", params=P.EnvironmentParams(
            backend="venv", prefix=prefix, python="3.11", interpreter=sys.executable, with_pip=bool(no_isolation))),
        Step(id="uv", title="uv", params=P.UvToolParams(dest=tool, version=uv.version, sha256=uv.sha256)),
        Step(id="pip:packages", title="p", params=P.PipInstallParams(
            requirements=reqs, find_links=[str(house)], no_index=True, installer="uv", uv=tool,
            env={"UV_CACHE_DIR": str(tmp_path / "uvcache")}, no_build_isolation=list(no_isolation),
            unverified=[r.name for r in reqs if not r.hashes])),
    ]
    return Plan(recipe="t", target="local", host="local", prefix=prefix, backend="venv", steps=steps)


def test_uv_refuses_a_swapped_wheel_then_installs_the_genuine_one(tmp_path, uv):
    house = tmp_path / "house"
    good = make_wheel(tmp_path / "orig", "ebgood", "1.0", "good")
    swapped = make_wheel(house, "ebgood", "1.0", "EVIL")  # same name, other bytes
    req = P.Requirement(name="ebgood", version="1.0", requirement="ebgood==1.0", hashes=[sha256(good)])
    plan = uv_plan(tmp_path, uv, house, [req])
    rc, host, _ = run_local_plan(tmp_path / "r1", plan)
    assert rc != 0 and host.failed_step == "pip:packages"
    assert "hash" in host.tail().lower() and "uv" in (host.command or "")
    py = f"{plan.prefix}/bin/python"
    assert subprocess.run([py, "-c", "import ebgood"], capture_output=True).returncode != 0
    pushed = Path(plan.prefix, ".envbuild/tools/uv")
    assert sha256(pushed) == uv.sha256 and pushed.stat().st_mode & 0o777 == 0o755

    swapped.write_bytes(good.read_bytes())
    rc, host, _ = run_local_plan(tmp_path / "r2", plan)
    assert rc == 0, host.tail()
    assert subprocess.run([py, "-c", "import ebgood; print(ebgood.VALUE)"], capture_output=True,
                          text=True, check=True).stdout.strip() == "good"
    assert installer_of(plan.prefix, "ebgood") == "uv"  # uv ran, not pip
    log = Path(plan.prefix, ".envbuild/logs/pip-packages.log").read_text()
    assert log.startswith(f"$ {pushed} pip install") and "ebgood==1.0" in log


def test_a_build_without_isolation_keeps_pip_in_a_uv_step(tmp_path, uv):
    house = tmp_path / "house"
    a = make_wheel(house, "ebuvpkg", "1.0", "a")
    make_wheel(house, "ebpippkg", "2.0", "b")
    reqs = [P.Requirement(name="ebuvpkg", version="1.0", requirement="ebuvpkg==1.0", hashes=[sha256(a)]),
            P.Requirement(name="ebpippkg", version="2.0", requirement="ebpippkg==2.0")]
    plan = uv_plan(tmp_path, uv, house, reqs, no_isolation=("ebpippkg",))
    rc, host, _ = run_local_plan(tmp_path / "r", plan)
    assert rc == 0, host.tail()
    assert installer_of(plan.prefix, "ebuvpkg") == "uv"
    assert installer_of(plan.prefix, "ebpippkg") == "pip"


def test_a_file_changed_in_place_is_repaired_by_uv(tmp_path, uv):
    house = tmp_path / "house"
    good = hashed_wheel(house, "ebfix", "1.0", "good")
    req = P.Requirement(name="ebfix", version="1.0", requirement="ebfix==1.0", hashes=[sha256(good)])
    plan = uv_plan(tmp_path, uv, house, [req])
    rc, host, _ = run_local_plan(tmp_path / "r1", plan)
    assert rc == 0, host.tail()
    module = site(plan.prefix) / "ebfix.py"
    with open(module, "r+") as fh:  # in place: the same inode (uv may have hard-linked it from its cache)
        fh.write("VALUE = 'bad!'\n")
    rc, host, events = run_local_plan(tmp_path / "r2", plan)
    assert rc == 0, host.tail()
    assert any(e["kind"] == "changed" and e["step"] == "pip:packages" for e in events), events
    log = Path(plan.prefix, ".envbuild/logs/pip-packages.log").read_text()
    assert "--reinstall --no-cache" in log.splitlines()[0]  # the repair: uv reinstalls from the wheel
    py = f"{plan.prefix}/bin/python"
    assert subprocess.run([py, "-c", "import ebfix; print(ebfix.VALUE)"], capture_output=True,
                          text=True, check=True).stdout.strip() == "good"
    assert installer_of(plan.prefix, "ebfix") == "uv"


def test_installed_files_share_no_inode_with_uvs_cache(tmp_path, uv):
    """Copies, not links: an in-place edit in one environment cannot change uv's cache, nor any
    other environment made from it (two environments from one cache, every file st_nlink 1)."""
    house = tmp_path / "house"
    good = hashed_wheel(house, "ebcopy", "1.0", "good")
    req = P.Requirement(name="ebcopy", version="1.0", requirement="ebcopy==1.0", hashes=[sha256(good)])
    prefixes = []
    for n in ("a", "b"):
        plan = uv_plan(tmp_path / n, uv, house, [req])
        plan = plan.model_copy(update={"steps": [s.model_copy(update={"params": s.params.model_copy(update={
            "env": {"UV_CACHE_DIR": str(tmp_path / "uvcache")}})}) if s.id == "pip:packages" else s
            for s in plan.steps]})
        rc, host, _ = run_local_plan(tmp_path / f"r-{n}", plan)
        assert rc == 0, host.tail()
        prefixes.append(plan.prefix)
    files = [p for prefix in prefixes for p in (site(prefix)).rglob("*") if p.is_file()
             and "ebcopy" in str(p.relative_to(site(prefix)))]
    assert files and all(p.stat().st_nlink == 1 for p in files), [(str(p), p.stat().st_nlink) for p in files]
    with open(site(prefixes[0]) / "ebcopy.py", "r+") as fh:
        fh.write("VALUE = 'bad!'\n")
    assert "good" in (site(prefixes[1]) / "ebcopy.py").read_text()
