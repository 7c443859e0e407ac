"""Isolated chroot test nodes: own /usr, dpkg database, PID namespace and sshd on loopback.

A Debian bookworm minbase rootfs is made once with debootstrap and cached
(``$ENVBUILD_TESTBED_CACHE``, default /var/tmp/envbuild-testbed). Each node is an overlayfs
over it (its writes land in the node's own upper dir), started with
``unshare --mount --uts --pid --fork --kill-child`` and ``chroot MERGED /usr/sbin/sshd -D`` on
its own 127.0.0.x address and port. Mounts live in the node's mount namespace and vanish with
it; stop is SIGKILL on the unshare pid. Needs root, debootstrap, openssh (.ci/testbed-deps.sh).

A stopped node's upper dir can be a read-only layer of other nodes (``layers``): they start
with everything it wrote (a provisioned environment at the same path), each writing into its
own upper dir. The layer must not change while a node uses it.

Example::

    with ChrootCluster(tmp_path, 3, binds=[("/opt/wheels", "/opt/wheels", True)]) as nodes:
        nodes[0].ssh("python3 -V")
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = "openssh-server,python3,python3-venv,sudo,git,ca-certificates"
SUITE = "bookworm"


def cache_dir() -> Path:
    return Path(os.environ.get("ENVBUILD_TESTBED_CACHE", "/var/tmp/envbuild-testbed"))


def apt_mirror(sources: str = "/etc/apt/sources.list.d/debian.sources") -> str:
    """The host's Debian mirror URL (first ``URIs:`` line), read at run time."""
    try:
        for line in Path(sources).read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    except OSError:
        pass
    return "http://deb.debian.org/debian"


def why_unavailable() -> str | None:
    """None when chroot nodes can run here, else the reason (for pytest.skip)."""
    if os.geteuid() != 0:
        return "chroot nodes need root"
    for tool in ("debootstrap", "unshare", "ssh-keygen", "ssh"):
        if not shutil.which(tool):
            return f"{tool} not installed (run .ci/testbed-deps.sh)"
    return None


def rootfs() -> Path:
    """The cached bookworm rootfs, made with debootstrap on first use (~60 s)."""
    root = cache_dir() / f"rootfs-{SUITE}"
    if (root / "usr/sbin/sshd").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.with_name(root.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test workers started together bootstrap it once
        if (root / "usr/sbin/sshd").exists():
            return root
        part = root.with_name(root.name + ".partial")
        shutil.rmtree(part, ignore_errors=True)
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE, str(part),
                        apt_mirror()], check=True, capture_output=True, text=True)
        os.replace(part, root)
    return root


def client_key(folder: Path) -> Path:
    key = folder / "id_ed25519"
    if not key.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


SSHD_CONFIG = """\
ListenAddress {addr}:{port}
HostKey /etc/envbuild-node/host_key
PidFile /run/envbuild-sshd.pid
AuthorizedKeysFile /etc/envbuild-node/authorized_keys
PermitRootLogin prohibit-password
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
Subsystem sftp internal-sftp
{setenv}"""


def node_setenv() -> str:
    """``SetEnv PIP_CERT=...`` when this machine's pip trusts a bundle under /etc/ssl/certs (bind-
    mounted into every node): pip in a node's venv then trusts what the host trusts (e.g. a
    TLS-inspecting proxy's CA) instead of its vendored certifi. Nothing otherwise."""
    cert = os.environ.get("PIP_CERT") or ""
    if cert.startswith("/etc/ssl/certs/") and os.path.isfile(cert) and " " not in cert:
        return f"SetEnv PIP_CERT={cert}\n"
    return ""

START = """\
set -e
M={merged}
mount -t overlay overlay -o {layers} "$M"
mount -t proc proc "$M/proc"
mount --rbind /dev "$M/dev"
mkdir -p "$M/etc/envbuild-node" "$M/run/sshd"
mount --bind -o ro {cfg} "$M/etc/envbuild-node"
mount --bind -o ro /etc/resolv.conf "$M/etc/resolv.conf"
mount --bind -o ro /etc/ssl/certs "$M/etc/ssl/certs"
{binds}
hostname {name}
exec chroot "$M" /usr/sbin/sshd -D -e -f /etc/envbuild-node/sshd_config
"""


@dataclass
class ChrootNode:
    """One running node: ``root@addr:port`` with ``key``; ``upper`` holds what it wrote."""

    name: str
    addr: str
    port: int
    key: Path
    dir: Path
    proc: subprocess.Popen | None = None
    binds: list = field(default_factory=list)
    launcher: list = field(default_factory=list)  # argv before unshare, e.g. nsenter --net=... (offline nodes)
    cpus: list[int] | None = None  # the CPUs the node's processes may use (None: all of this machine's)

    @property
    def upper(self) -> Path:
        return self.dir / "upper"

    @property
    def spec(self) -> str:
        return f"root@{self.addr}:{self.port}"

    def ssh(self, command: str, *, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a command on the node with the system ssh client."""
        argv = ["ssh", "-i", str(self.key), "-p", str(self.port), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", f"root@{self.addr}", command]
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)

    def start(self, lower: str | Path) -> None:
        """Start the node over ``lower`` (overlayfs lowerdir: one folder, or several joined by
        ':', top first)."""
        for d in ("upper", "work", "merged", "cfg"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        cfg = self.dir / "cfg"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(cfg / "host_key")],
                       check=True, input="y\n", text=True, capture_output=True)
        shutil.copy(str(self.key) + ".pub", cfg / "authorized_keys")
        (cfg / "sshd_config").write_text(SSHD_CONFIG.format(addr=self.addr, port=self.port, setenv=node_setenv()))
        binds = []
        for src, dest, ro in self.binds:
            d = f'"$M"{shlex.quote(dest)}'
            binds.append(f"mkdir -p {d}; mount --bind {'-o ro ' if ro else ''}{shlex.quote(str(src))} {d}")
        layers = f"lowerdir={lower},upperdir={self.dir / 'upper'},workdir={self.dir / 'work'}"
        script = START.format(merged=shlex.quote(str(self.dir / "merged")), layers=shlex.quote(layers),
                              cfg=shlex.quote(str(cfg)), name=self.name, binds="\n".join(binds))
        log = open(self.dir / "sshd.log", "w")
        pin = ["taskset", "-c", ",".join(map(str, self.cpus))] if self.cpus else []
        self.proc = subprocess.Popen([*self.launcher, *pin, "unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child",
                                      "sh", "-c", script], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.name} exited: {(self.dir / 'sshd.log').read_text()[-800:]}")
            try:
                with socket.create_connection((self.addr, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"node {self.name} did not listen on {self.addr}:{self.port}")

    def stop(self) -> None:
        """SIGKILL the unshare process, then wait until its child, the PID namespace's first
        process, is gone too: the namespace's mounts (the overlay over this node's upper dir)
        go only when every process in it has exited, and an upper dir may be another node's
        layer only after that."""
        if self.proc and self.proc.poll() is None:
            children = _children(self.proc.pid)
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            deadline = time.time() + 10
            while any(_alive(pid) for pid in children):
                if time.time() > deadline:
                    raise RuntimeError(f"node {self.name}: its namespace's processes {children} "
                                       "outlived it by 10 s")
                time.sleep(0.02)
        self.proc = None


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie has released its namespaces: not alive)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def node_cpus(i: int, n: int) -> list[int] | None:
    """The CPUs node ``i`` of ``n`` may use: one of this machine's each, round robin, when the
    cluster has several nodes (None, all of them, for a cluster of one).

    Real nodes do not share CPUs. Test nodes on one small machine do, and a torch in each starts
    as many threads as the machine has cores: two nodes' smokes at once on 2 cores are
    oversubscribed threads, which the smoke's MFU floor exists to catch (0.08 in a CI run;
    pinned, 0.40-0.56 with a busy loop beside them). torch sizes its thread pool from the
    affinity mask, so a pinned node runs as a one-core node would."""
    if n < 2:
        return None
    mine = sorted(os.sched_getaffinity(0))
    return [mine[i % len(mine)]]


def free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def write_known_hosts(path: Path, nodes: list[ChrootNode], host) -> None:
    """known_hosts with each started node's host key, under the name ``host(node)`` gives."""
    lines = []
    for node in nodes:
        kind, key = (node.dir / "cfg" / "host_key.pub").read_text().split()[:2]
        lines.append(f"{host(node)} {kind} {key}")
    path.write_text("\n".join(lines) + "\n")


class ChrootCluster:
    """``n`` chroot nodes on 127.0.0.(base+i); a context manager that always stops them."""

    def __init__(self, folder: Path, n: int, *, binds: list | None = None, base: int = 60,
                 prefix: str = "cnode", layers: list[Path] | None = None):
        self.folder = Path(folder)
        self.layers = [Path(p) for p in layers or []]  # read-only layers over the rootfs, top first
        for layer in self.layers:  # overlayfs splits its options at ',' and its lowerdir at ':'
            if not layer.is_absolute() or any(c in str(layer) for c in ":,\\ \t\n"):
                raise ValueError(f"a node layer is an absolute path without ':', ',', '\\' or "
                                 f"whitespace: {layer}")
        self.key = client_key(self.folder / "client")
        self.nodes = []
        for i in range(n):
            addr = f"127.0.{base // 250}.{base % 250 + i + 2}"
            self.nodes.append(ChrootNode(name=f"{prefix}{i + 1}", addr=addr, port=free_port(addr),
                                         key=self.key, dir=self.folder / f"{prefix}{i + 1}",
                                         binds=list(binds or []), cpus=node_cpus(i, n)))

    @property
    def known_hosts(self) -> Path:
        """known_hosts with every started node's host key (``--known-hosts`` for envbuild)."""
        return self.folder / "known_hosts"

    def __enter__(self) -> list[ChrootNode]:
        lower = ":".join(str(p) for p in [*self.layers, rootfs()])
        try:
            for node in self.nodes:
                node.start(lower)
        except BaseException:
            self.stop()
            raise
        write_known_hosts(self.known_hosts, self.nodes, lambda n: f"[{n.addr}]:{n.port}")
        return self.nodes

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    @property
    def hosts(self) -> str:
        return ",".join(n.spec for n in self.nodes)


WHEELS = Path("/opt/wheels")  # where the CI image keeps the torch 2.13.0 CPU wheel


def why_no_wheel_cluster(wheels: Path = WHEELS) -> str | None:
    """Why a cluster that installs CPU torch from ``wheels`` cannot run here (None: it can)."""
    why = why_unavailable()
    if why is None and not any(wheels.glob("torch-2.13.0*cp311*.whl")):
        why = f"no torch 2.13.0 cp311 wheel in {wheels}"
    return why


def wheel_cluster(folder: Path, n: int, *, base: int, prefix: str = "cnode",
                  wheels: Path = WHEELS, layers: list[Path] | None = None) -> ChrootCluster:
    """``n`` nodes with ``wheels`` bind-mounted read-only and one pip cache shared by all
    (so torch is unpacked from the same wheel and downloaded packages are fetched once).
    ``layers``: read-only layers between each node's own upper dir and the rootfs, top first
    (the upper dir of a stopped node: every node starts with what that node had written)."""
    cache = folder / "pipcache"
    cache.mkdir(parents=True, exist_ok=True)
    binds = [(wheels, str(wheels), True), (cache, "/root/.cache/pip", False)]
    return ChrootCluster(folder / "nodes", n, binds=binds, base=base, prefix=prefix, layers=layers)
