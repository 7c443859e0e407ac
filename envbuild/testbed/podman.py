"""podman for tests and benchmarks: its own storage, config and temp dir, the host untouched.

Storage (graphroot; the runroot in a short folder of its own, ``runroot_of``), containers.conf
(runc, cgroupfs, ulimits 1024: hybrid cgroups and no CAP_SYS_RESOURCE on the CI machine),
libpod's tmp_dir (its ``alive`` file and exit codes; ``podman system reset`` deletes it, and
the default /run/libpod is shared by every podman on the machine, so one test's reset broke
another's running containers in CI) and TMPDIR (buildah keeps RUN cache mounts there) all live
under one folder.
Builds use ``--isolation chroot`` (host network, for PyPI; no netns, no NAT rules) and
containers ``--network=none`` (see shared/docs/TESTBED.md). The host's CA bundle is mounted
into RUN steps and named by the ``PIP_CERT`` build argument that the rendered Dockerfiles declare.

    pm = Podman(Path("/tmp/x"))
    pm.import_rootfs(rootfs(), "localhost/envbuild-base:bookworm")
    pm(*pm.build_args(context, "localhost/img:1"))
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from envbuild.fsio import sha256_text

HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_CA = "/etc/envbuild-ca.crt"


def why_unavailable() -> str | None:
    for tool in ("podman", "runc"):
        if not shutil.which(tool):
            return f"{tool} not installed (.ci/apt-packages.txt)"
    if os.geteuid() != 0:
        return "podman builds here need root"
    return None


def runroot_of(root: Path) -> Path:
    """The storage's runroot (its containers' pid files and attach sockets): a short folder named
    for ``root``, not under it. Under a root as deep as a test's temp folder
    (``/dev/shm/envbuild-suite-XXXXXX/pytest/popen-gw0/...``), ``podman run`` never heard that its
    container had exited and waited out conmon's timeout: 20 s added to every container run (its
    debug log: "Exceeded conmon timeout waiting for container ... to exit"), where the same run
    under a short runroot took 0.1 s."""
    return Path("/tmp") / f"envbuild-podman-run-{sha256_text(str(root.resolve()))[:12]}"


class Podman:
    """podman with everything under ``root`` (but the runroot: ``runroot_of``); call it like the
    command line."""

    def __init__(self, root: Path):
        self.root = root
        self.runroot = runroot_of(root)
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        (root / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{root}/graph"\nrunroot = "{self.runroot}"\n')
        (root / "containers.conf").write_text(
            '[containers]\nnetns = "none"\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
            '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
            f'tmp_dir = "{root}/libpod"\n')
        self.env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(root / "storage.conf"),
                    "CONTAINERS_CONF": str(root / "containers.conf"), "TMPDIR": str(root / "tmp")}

    def __call__(self, *args: str, timeout: float = 900, stdin=None, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True,
                             timeout=timeout, stdin=stdin)
        if check and out.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args[:3])} failed ({out.returncode}):\n"
                               f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return out

    def build_args(self, context: Path, tag: str) -> list[str]:
        ca = ["--build-arg", f"PIP_CERT={BUILD_CA}", "-v", f"{HOST_CA}:{BUILD_CA}:ro"] if HOST_CA.is_file() else []
        return ["build", "--isolation", "chroot", "--pull=never", "--format", "docker", *ca,
                "-t", tag, str(context)]

    def provision_args(self) -> list[str]:
        """``envbuild provision --backend container`` options that make the node's podman this
        one: its storage, config and temp dir (--engine-env), and the build options of
        ``build_args`` (--engine-arg): chroot isolation (host network for PyPI), the CA bundle."""
        ca = [f"--engine-arg=--build-arg=PIP_CERT={BUILD_CA}",
              f"--engine-arg=--volume={HOST_CA}:{BUILD_CA}:ro"] if HOST_CA.is_file() else []
        env = []
        for name in ("CONTAINERS_STORAGE_CONF", "CONTAINERS_CONF", "TMPDIR"):
            env += ["--engine-env", f"{name}={self.env[name]}"]
        return ["--engine-arg=--isolation=chroot", *ca, *env]

    def import_rootfs(self, rootfs: Path, tag: str, changes: list[str] = (), timeout: float = 900,
                      exclude: tuple[str, ...] = ()) -> None:
        """Import the folder ``rootfs`` as image ``tag``; ``changes``: Dockerfile instructions
        for its config (``podman import --change``: LABEL, ENV...); ``exclude``: folders of it
        left out (``./usr/share/doc``: a smaller image)."""
        tar = subprocess.Popen(["tar", "-C", str(rootfs), *(f"--exclude={e}" for e in exclude), "-c", "."],
                               stdout=subprocess.PIPE)
        opts = [arg for change in changes for arg in ("--change", change)]
        try:
            self("import", *opts, "-", tag, stdin=tar.stdout, timeout=timeout)
        finally:
            tar.stdout.close()
            tar.wait()

    def size(self, tag: str) -> int:
        return int(self("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())

    def remove_all(self) -> None:
        """Unmount and delete the storage (podman's overlay mounts first)."""
        self("system", "reset", "--force", check=False, timeout=120)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.runroot, ignore_errors=True)


def build_steps(log: str) -> list[tuple[str, bool]]:
    """``(instruction, from cache)`` for each ``STEP i/n: INSTRUCTION`` of a ``podman build``
    log, in order: a step is from the cache when ``--> Using cache`` follows its STEP line."""
    steps: list[tuple[str, bool]] = []
    for line in log.splitlines():
        if line.startswith("STEP ") and ": " in line:
            steps.append((line.split(": ", 1)[1], False))
        elif line.startswith("--> Using cache") and steps:
            steps[-1] = (steps[-1][0], True)
    return steps
