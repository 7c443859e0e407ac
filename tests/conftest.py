"""Shared fixtures. ``ssh_nodes``: three real OpenSSH nodes on loopback for the session.

It never skips: without sshd it fails with the install command (CI installs it).
"""

import os
import sys
from pathlib import Path

import pytest

# The nodes these tests stand for write bytecode when a module is first imported, as Python does
# by default. A shell that exports PYTHONDONTWRITEBYTECODE=1 (this machine's does) would make
# every Python started by a test (the CLI, ansible-playbook, a provisioned environment's
# import check and smoke run) compile its imports again: torch 2.13's import takes 4.5 s
# instead of 1.8 s on 2 cores, and a cold re-provision of cpu-reference ~30 % longer.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from envbuild.errors import EnvironmentProblem  # noqa: E402 - imported once bytecode is written again


@pytest.fixture(scope="session", autouse=True)
def _own_envbuild_home(tmp_path_factory):
    """Each test process (each xdist worker) gets its own ENVBUILD_HOME unless the environment
    names one: two workers never share runs/ and its ``latest`` link. A test that sets its own
    (monkeypatch, env=) still wins. The download and proof caches (ENVBUILD_CACHE_DIR) stay the
    machine's, shared."""

    if "ENVBUILD_LOCK_DIR" not in os.environ:
        # the prefix locks too (envbuild.execute.prefixlock): two workers' test clusters in their
        # own network namespaces may reuse one address and prefix, and are not one node
        os.environ["ENVBUILD_LOCK_DIR"] = str(tmp_path_factory.mktemp("envbuild-locks"))
    if "ENVBUILD_HOME" in os.environ:
        yield
        return
    os.environ["ENVBUILD_HOME"] = str(tmp_path_factory.mktemp("envbuild-home"))
    try:
        yield
    finally:
        os.environ.pop("ENVBUILD_HOME", None)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    """``module_tmp(name)``: a new folder, like ``tmp_path_factory.mktemp(name)``, deleted when the
    module's tests are done (after the fixtures that asked for it are torn down). The chroot, offline
    and container clusters leave GBs each (~20 GB over the suite); pytest itself deletes factory
    folders only at the session's end, so a machine with less free disk filled up before the suite
    ended. ``ENVBUILD_KEEP_TMP=1`` keeps them for a look afterwards. A folder with something still
    mounted inside is left where it is: deleting through a bind mount would reach the host's files."""

    made = []

    def make(name: str):
        path = tmp_path_factory.mktemp(name)
        made.append(path)
        return path

    yield make
    if os.environ.get("ENVBUILD_KEEP_TMP"):
        return
    for path in made:
        _remove_tree(path)


def _remove_tree(path) -> None:
    import shutil
    import subprocess
    import warnings

    def mounted() -> list[str]:
        with open("/proc/self/mounts") as f:
            points = [line.split()[1].replace("\\040", " ") for line in f]
        return [m for m in points if m == str(path) or m.startswith(f"{path}/")]

    for point in sorted(mounted(), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    left = mounted()
    if left:
        warnings.warn(f"{path} kept: still mounted inside it: {left[:3]}", stacklevel=2)
        return
    # renamed at once, then deleted by an rm of its own while the next tests run: a cluster's
    # folder (GBs, 100k+ files, its inodes long out of the cache on this disk) took a module's
    # teardown up to 76 s; pytest_sessionfinish waits for every one of them
    trash = path.with_name(f".{path.name}.deleting-{len(_DELETING)}")
    try:
        path.rename(trash)
        _DELETING.append(subprocess.Popen(["nice", "-n", "10", "rm", "-rf", "--one-file-system", str(trash)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


_DELETING: list = []  # the rm processes of _remove_tree, waited for when the session ends


@pytest.fixture(scope="session")
def remove_tree():
    """``remove_tree(path)``: the folder is gone at once (renamed) and deleted in the background,
    as module_tmp's folders are (``_remove_tree``); for teardowns that free GBs mid-module."""
    return lambda path: _remove_tree(Path(path))


def _wait_for_deletions() -> None:
    for proc in _DELETING:
        proc.wait()
    _DELETING.clear()


@pytest.fixture(scope="session")
def ssh_nodes():
    """A running ``envbuild.testbed.sshd.SshTestbed`` with 3 nodes (127.0.0.2-4)."""
    from envbuild.testbed.sshd import ssh_nodes as start

    try:
        with start(3) as bed:
            yield bed
    except EnvironmentProblem as exc:
        pytest.fail(f"loopback sshd nodes could not start: {exc} ({exc.hint})", pytrace=False)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running ``envbuild.testbed.slurm.SlurmCluster``: 2 nodes (network namespaces), 2 fake
    GPUs (gres on /dev/tty0-1) and 16 CPUs each, shared by every Slurm test of the session.

    It never skips: without slurm-wlm/munge it installs them (root) or fails with the command.
    """
    from envbuild.testbed.slurm import slurm_cluster as start

    try:
        with start(2, gpus_per_node=2, cpus_per_node=16) as cluster:
            yield cluster
    except EnvironmentProblem as exc:
        pytest.fail(f"the Slurm test cluster could not start: {exc} ({exc.hint})", pytrace=False)


def _proofs_all(config) -> bool:

    return "proof" in (config.getoption("markexpr") or "") or os.environ.get("ENVBUILD_PROOFS") == "all"


def _proof_selection(config):
    from envbuild.testbed.proofrecord import proof_pairs, select

    cached = getattr(config, "_envbuild_proofs", None)
    if cached is None:
        cached = config._envbuild_proofs = select(proof_pairs(), run_all=_proofs_all(config))
    return cached




@pytest.fixture(scope="session")
def proof_selection(pytestconfig):
    """The import proofs this run carries out (changed inputs, the rotation's turn, or all)."""
    return _proof_selection(pytestconfig)


def pytest_terminal_summary(terminalreporter, config):
    """Which CPU import proofs this run carried out, and why (envbuild.testbed.proofrecord)."""
    reports = [r for key, got in terminalreporter.stats.items() if key != "deselected"
               for r in got if hasattr(r, "nodeid")]
    if any("test_import_proof.py" in r.nodeid for r in reports):  # also as xdist's controller
        terminalreporter.write_line(_proof_selection(config).header())


SUITE_RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "suite.json"


def measured_module_times(path: Path = SUITE_RESULTS) -> dict[str, float]:
    """Each test module's time in the newest row of bench/results/suite.json that has them
    (``modules``, written by bench/suite_bench.py from the run's JUnit report) and did not fail
    (a failed test ends early: its module's time is not the module's), else {}."""
    import json

    try:
        runs = json.loads(path.read_text()).get("runs", [])
    except (OSError, ValueError):
        return {}
    return next((dict(r["modules"]) for r in reversed(runs) if r.get("modules") and r.get("exit", 0) == 0), {})


def by_current_path(times: dict[str, float], modules) -> dict[str, float]:
    """``times`` with each of ``modules`` (the collected modules' paths) that has no time of its
    own given the one recorded under its file name: rows made before the modules went into
    folders by layer (``tests/<layer>/test_x.py``) name ``tests/test_x.py``, and recorded rows are
    never rewritten. A file name recorded under two paths names neither (no guess)."""
    from pathlib import PurePosixPath

    named: dict[str, list[float]] = {}
    for key, seconds in times.items():
        named.setdefault(PurePosixPath(key).name, []).append(seconds)
    out = dict(times)
    for module in modules:
        found = named.get(PurePosixPath(module).name, [])
        if module not in out and len(found) == 1:
            out[module] = found[0]
    return out


def longest_first(items: list, times: dict[str, float]) -> list:
    """``items`` grouped by the unit a worker is handed (``scope_of``: a module, or one import
    proof), the units in the order of their measured time, longest first; a unit with no
    measured time (new since the row) goes before all of them, as it may be long. Within a unit
    the order is pytest's. Stable: equal times keep file order."""
    order: dict[str, list] = {}
    for item in items:
        order.setdefault(scope_of(item.nodeid), []).append(item)
    known = [m for m in order if m in times]
    ranked = [m for m in order if m not in times] + sorted(known, key=lambda m: -times[m])
    return [item for module in ranked for item in order[module]]


def pytest_collection_modifyitems(config, items):
    """Hand the modules to the xdist workers longest first (the README's command passes
    ``--no-loadscope-reorder``, so xdist keeps this order). xdist's default orders modules by
    their number of tests, which left the two longest single-test modules (a 4-node fleet, an
    extension built per node kind: 100 to 370 s each) to the end of the run. Whether this order
    is faster on the whole has not been measured against xdist's (tests/README.md). The times
    are measured (bench/suite_bench.py), never asserted. Each import proof is a unit of its own,
    timed by its recorded build (``proof_times``): a module's measured row holds whichever recipe
    that commit's rotation proved (24 to 306 s recorded), so a long proof could come last."""
    items[:] = longest_first(items, ordering_times(items, lambda: _proof_selection(config)))


PROOF_MODULE = "tests/testbed/test_import_proof.py"


def scope_of(nodeid: str) -> str:
    """The unit of work an xdist worker is handed under ``--dist loadfile``: the test's module
    (its module-scoped fixtures made once), but each import proof alone. The proofs share no
    module fixture, and where their inputs changed all ten run (one per recipe, 24 to 306 s
    each): as one module they all ran on one worker, one after the other."""
    module = nodeid.split("::", 1)[0]
    return nodeid if module == PROOF_MODULE else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with ``scope_of``'s units (xdist's LoadFileScheduling splits by module
    only); any other mode is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModulesAndProofs(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ModulesAndProofs(config, log)


def ordering_times(items: list, proofs, measured: dict[str, float] | None = None) -> dict[str, float]:
    """The times ``longest_first`` orders by: ``measured`` (default: the newest suite.json row's
    module times), each collected module's found by its file name where the row names its old
    path (``by_current_path``), and each collected import proof's own (``proof_times``;
    ``proofs()``, the run's ``Selection``, is asked only where a proof is collected: it reads
    every recipe)."""
    times = by_current_path(measured_module_times() if measured is None else measured,
                            {item.nodeid.split("::", 1)[0] for item in items})
    collected = [item.nodeid for item in items if scope_of(item.nodeid) != item.nodeid.split("::", 1)[0]]
    if collected:
        times.update(proof_times(collected, proofs()))
    return times


def proof_times(nodeids: list[str], selection, record: dict | None = None) -> dict[str, float]:
    """``{node id: seconds}`` of each import proof: what it took when last recorded (``build_s``
    in docs/results/import-proofs.json, its stand-in base's build included) where this run
    carries it out, 0 where it skips (or has no record)."""
    from envbuild.testbed.proofrecord import read_record

    record = read_record() if record is None else record
    out = {}
    for nodeid in nodeids:
        recipe = nodeid.rsplit("[", 1)[-1].rstrip("]")
        out[nodeid] = float((record.get(recipe) or {}).get("build_s") or 0.0) if recipe in selection.run else 0.0
    return out


# xdist: the README's command runs two workers with ``--dist loadfile``: each test module runs
# whole in one worker, so its module-scoped fixture (a cluster, a provisioned node) is made once.
# (``--dist loadgroup`` with per-module groups would also keep the resources a machine has once
# together, but pytest 9 derives node ids from ``Node._id``; xdist 3.8's loadgroup writes
# ``item._nodeid`` and so groups nothing.) Nothing the testbed starts is exclusive across
# modules: sshd nodes take free ports, chroot and offline clusters have per-module address
# ranges, each Slurm cluster lives in its own network namespaces, each podman store in its own
# folder.


def run_shared(tmp_path_factory):
    """A folder that every xdist worker of this run sees (the parent of the workers' basetemps;
    without xdist, the basetemp). Resources made once per run live there, each built under its
    own file lock by whichever worker asks first (``once_per_run``); the controller removes
    them when the run ends (``pytest_sessionfinish``)."""

    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    folder.mkdir(exist_ok=True)
    return folder


def once_per_run(tmp_path_factory, name: str, make):
    """``make(folder)`` once per run, whichever worker asks first; every caller gets what it
    returned (JSON-able), read from ``<run_shared>/<name>.json``. A failed ``make`` writes
    nothing: the next caller tries again (and fails the same way, with its own traceback)."""
    import fcntl
    import json

    shared = run_shared(tmp_path_factory)
    done = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            folder = shared / name
            folder.mkdir(exist_ok=True)
            value = make(folder)
            done.with_suffix(".part").write_text(json.dumps(value))
            done.with_suffix(".part").replace(done)
        return json.loads(done.read_text())


def pytest_sessionfinish(session):
    """Every process waits for the folders it is deleting (``_remove_tree``). The controller (or
    a run without xdist) then removes the run's shared resources, GBs each and root-owned, after
    every worker is done: the reference node's layer (``reference_node``) and the podman store
    (``podman system reset`` unmounts its overlay layers first)."""
    _wait_for_deletions()
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the other may still use them
    from envbuild.testbed.podman import Podman

    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    reference = factory.getbasetemp() / "shared" / "reference-node"
    if reference.is_dir():
        _remove_tree(reference)
        _wait_for_deletions()
    store = factory.getbasetemp() / "shared" / "podman"
    if (store / "storage.conf").exists():
        Podman(store).remove_all()


@pytest.fixture(scope="session")
def podman_store(tmp_path_factory):
    """One podman storage for the whole run (``envbuild.testbed.podman.Podman``, shared by the
    xdist workers) with the base image ``localhost/envbuild-base:bookworm`` imported once from
    the chroot testbed's cached rootfs. Skips, saying why, where podman or the rootfs cannot run."""
    from envbuild.testbed.chroot import rootfs, why_unavailable
    from envbuild.testbed.podman import Podman
    from envbuild.testbed.podman import why_unavailable as no_podman

    why = no_podman() or why_unavailable()
    if why:
        pytest.skip(why)

    def base(folder):
        Podman(folder.parent / "podman").import_rootfs(rootfs(), PODMAN_BASE)
        return PODMAN_BASE

    once_per_run(tmp_path_factory, "podman-base", base)
    return Podman(run_shared(tmp_path_factory) / "podman")


PODMAN_BASE = "localhost/envbuild-base:bookworm"
IMAGE_WHEELS = Path("/opt/wheels")
IMAGE_TAG = "localhost/envbuild/cpu-reference:test"


@pytest.fixture(scope="session")
def image(tmp_path_factory, podman_store):
    """cpu-reference's image, built once per run into ``podman_store`` from the context that
    ``envbuild render cpu-reference --format dockerfile --base PODMAN_BASE --wheelhouse
    /opt/wheels`` writes (the cold build: its log says what ran). The image tests
    (tests/render/test_image_build.py) check it; the container backend (tests/provision/test_provision_container.py)
    builds the same context through the playbook and must reuse its layers."""
    import time

    if not any(IMAGE_WHEELS.glob("torch-2.13.0+cpu-*.whl")):
        pytest.skip(f"no CPU torch wheel in {IMAGE_WHEELS}")

    def build(folder):
        ctx = render_image_context(folder / "context")
        t0 = time.monotonic()
        out = podman_store(*podman_store.build_args(ctx, IMAGE_TAG), timeout=1200)
        return {"context": str(ctx), "log": out.stdout + out.stderr, "build_s": time.monotonic() - t0}

    made = once_per_run(tmp_path_factory, "image-cpu-reference", build)
    return {**made, "podman": podman_store, "context": Path(made["context"]), "tag": IMAGE_TAG}


def render_image_context(out: Path) -> Path:
    import shutil
    import subprocess

    root = Path(__file__).resolve().parents[1]
    exe = root / ".venv/bin/envbuild"
    r = subprocess.run([str(exe) if exe.exists() else shutil.which("envbuild") or "envbuild",
                        "render", "cpu-reference", "--target", "local", "--format", "dockerfile",
                        "-o", str(out), "--base", PODMAN_BASE, "--wheelhouse", str(IMAGE_WHEELS), "--json"],
                       cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


REFERENCE_WHEELS = Path("/opt/wheels")
REFERENCE_PREFIX = "/opt/envs/cpuref"  # where the reference environment lies on every node


@pytest.fixture(scope="session")
def reference_node(tmp_path_factory):
    """The provisioned reference node, once per run: cpu-reference (the README's default), its
    shipped lock (the one the image tests build from), provisioned cold from /opt/wheels with the
    default installer (uv), without smoke, onto one chroot node at ``REFERENCE_PREFIX``; the node
    is then stopped and what it wrote (its overlay's upper dir) becomes a read-only layer. Tests
    that need "a provisioned node" start chroot nodes over that layer
    (``chroot.wheel_cluster(..., layers=[reference_node["layer"]])``), each writing into its own
    upper dir; ``tests/provision/test_provision_uv.py`` asserts the cold run itself (its exit code, plan and
    run directory are returned here). Skips, saying why, where chroot nodes cannot run."""
    import json
    import subprocess
    import time

    from envbuild.shipped import LOCKFILES
    from envbuild.testbed import chroot

    why = chroot.why_no_wheel_cluster(REFERENCE_WHEELS)
    if why:
        pytest.skip(why)

    def make(folder):
        import shutil

        home, lock = folder / "home", LOCKFILES / "cpu-reference" / "local.lock"
        for left in (folder / "nodes", home):  # a failed try's node and runs: the next one is cold again
            shutil.rmtree(left, ignore_errors=True)
        env = {**os.environ, "ENVBUILD_HOME": str(home)}
        envbuild = [sys.executable, "-m", "envbuild"]
        with chroot.wheel_cluster(folder, 1, base=150, prefix="ref", wheels=REFERENCE_WHEELS) as nodes:
            t0 = time.monotonic()
            p = subprocess.run([*envbuild, "provision", "cpu-reference", "--target", "local",
                                "--hosts", nodes[0].spec, "--identity", str(nodes[0].key), "--insecure",
                                "--prefix", REFERENCE_PREFIX, "--wheelhouse", str(REFERENCE_WHEELS),
                                "--lock", str(lock), "--no-smoke", "--json"],
                               capture_output=True, text=True, env=env, timeout=1500)
            took = time.monotonic() - t0
            lines = p.stdout.strip().split("\n")  # JSON Lines: events, then {"type": "result", ...}
            assert lines and '"type": "result"' in lines[-1], p.stdout[-2000:] + p.stderr[-2000:]
            out = json.loads(lines[-1])
        # a reference that is not provisioned is no layer: this fails, writes nothing, and every
        # test that asks for it fails the same way, with this message
        [res] = out["results"].values()
        assert p.returncode == 5 and res["status"] == "ok", (p.returncode, res, p.stderr[-2000:])
        return {"layer": str(nodes[0].upper), "lock": str(lock), "rc": p.returncode, "result": out,
                "run_dir": out["run_dir"], "home": str(home), "prefix": REFERENCE_PREFIX,
                "host": nodes[0].addr, "provision_s": took}

    return once_per_run(tmp_path_factory, "reference-node", make)


@pytest.fixture(scope="session")
def cpu_torch_wheels():
    """/opt/wheels, the wheelhouse with this machine's CPU torch 2.13.0 wheel (cpu-reference's
    fleets install from it); the test is skipped where it is not."""
    wheels = Path("/opt/wheels")
    if not any(wheels.glob("torch-2.13.0*cp311*.whl")):
        pytest.skip("no torch 2.13.0 cp311 wheel in /opt/wheels")
    return wheels
