"""A real Slurm cluster on this machine for tests: munged, slurmctld and one slurmd per node.

Every daemon runs in a network namespace this module creates and deletes: a hub namespace
holds a bridge and slurmctld (``SlurmctldHost = hostname -s``, its address on the bridge),
each node namespace one ``slurmd -N nodeN`` with its own address on that bridge, its own
hostname (UTS namespace) and an /etc/hosts naming every node (private mount namespace), so
jobs see ``hostname`` = node name and one node reaches another by name (torchrun's c10d
rendezvous on the first node). No namespace has a default route; no address exists outside
them. munged runs with its own key, socket, pid and log files under the cluster's folder.
GPUs are gres on files that stand for devices (``/dev/tty*``: never opened, task/none), so
``--gres=gpu:N`` and ``CUDA_VISIBLE_DEVICES`` behave as on a GPU node.

Clients (``sbatch``, ``scontrol``, ``sinfo``, ``srun``, ...) reach slurmctld through shims
in ``cluster.bin_dir`` that enter the hub namespace (inside a job they run the real binary
on the node); put ``cluster.env`` into the environment of anything that submits::

    with slurm_cluster(nodes=2, gpus_per_node=2) as cluster:
        job = cluster.sbatch(script_path)                  # job id
        state = cluster.wait(job)                          # {"JobState": "COMPLETED", ...}

Needs root, ``slurm-wlm`` and ``munge`` (``ensure_packages()`` apt-installs them when missing;
CI installs them from .ci/apt-packages.txt), ``ip``, ``nsenter`` and ``unshare``.
Pitfalls handled here (../shared/docs/TESTBED.md): proctrack/linuxproc, task/none, daemons
started with ``nsenter --net`` (``ip netns exec`` hides /sys/fs/cgroup), gres on device files
(a count-only gres marks the node INVAL), config_overrides for CPU counts above this host's.
Teardown kills every process in the namespaces (slurmstepd and job steps included), munged,
then deletes the namespaces: no daemon outlives the context.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from envbuild.errors import EnvironmentProblem
from envbuild.launch.submit import TERMINAL

SBIN = ("slurmctld", "slurmd", "munged")
CLIENTS = ("sbatch", "scontrol", "sinfo", "squeue", "scancel", "srun", "salloc", "sacct")
PACKAGES = ("slurm-wlm", "munge")
INSTALL_HINT = "apt-get install -y slurm-wlm munge (CI installs .ci/apt-packages.txt)"
SUBNET = "10.77.0"  # inside the namespaces only; each cluster has its own namespaces

SLURM_CONF = """\
# written by envbuild.testbed.slurm for a throw-away test cluster
ClusterName=envbuild
SlurmctldHost={ctl_host}({ctl_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/run/slurmctld.pid
SlurmdPidFile={dir}/run/slurmd-%n.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=gpu
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=2
Waittime=0
{nodes}
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@dataclass(frozen=True)
class SlurmNode:
    name: str
    addr: str
    netns: str
    gpus: int


@dataclass
class SlurmCluster:
    """A running cluster: its folder, nodes, and the environment clients need."""

    dir: Path
    hub: str  # the hub network namespace (bridge + slurmctld)
    nodes: list[SlurmNode] = field(default_factory=list)
    gpus_per_node: int = 0
    cpus_per_node: int = 0
    _procs: list[subprocess.Popen] = field(default_factory=list, repr=False)
    _namespaces: list[str] = field(default_factory=list, repr=False)

    @property
    def conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    @property
    def bin_dir(self) -> Path:
        return self.dir / "bin"

    node_local_dir: Path | None = None  # given to slurm_cluster; else <dir>/node-local

    @property
    def node_local(self) -> Path:
        """A path that is each node's own disk (a tmpfs mounted in its mount namespace), as a
        cluster's ``/local/scratch``: jobs on two nodes see two folders there, this machine the
        folder under them (its own files, which no node sees)."""
        return self.node_local_dir or self.dir / "node-local"

    @property
    def env(self) -> dict[str, str]:
        """Variables for a process that runs Slurm clients (``sbatch`` ... from PATH)."""
        return {"SLURM_CONF": str(self.conf),
                "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def client(self, argv: list[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client command (``["sinfo", ...]``) against this cluster."""
        env = {**os.environ, **self.env}
        proc = subprocess.run([str(self.bin_dir / argv[0]), *argv[1:]], env=env, text=True,
                              capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise EnvironmentProblem(f"{' '.join(argv)} failed (rc {proc.returncode}): "
                                     f"{(proc.stderr or proc.stdout).strip()[-400:]}",
                                     hint=f"see the logs in {self.dir / 'log'}")
        return proc

    def sbatch(self, script: str | Path, *args: str, cwd: str | Path | None = None) -> str:
        """Submit ``script``; the job id."""
        env = {**os.environ, **self.env}
        proc = subprocess.run([str(self.bin_dir / "sbatch"), "--parsable", *args, str(script)],
                              env=env, text=True, capture_output=True, timeout=30, cwd=cwd,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise EnvironmentProblem(f"sbatch {script} failed: {proc.stderr.strip()[-400:]}")
        return proc.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job -o`` as a dict (empty when the controller forgot the job)."""
        proc = self.client(["scontrol", "show", "job", "-o", job_id], check=False)
        return parse_scontrol(proc.stdout) if proc.returncode == 0 else {}

    def wait(self, job_id: str, timeout: float = 120) -> dict[str, str]:
        """Poll until the job reaches a terminal state; its record."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            rec = self.job(job_id)
            if rec.get("JobState") in TERMINAL:  # envbuild.launch.submit's set
                return rec
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"job {job_id} not finished after {timeout:.0f} s "
                                         f"(state {rec.get('JobState')}, reason {rec.get('Reason')})")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def idle_nodes(self) -> list[str]:
        proc = self.client(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], check=False)
        return sorted(set(proc.stdout.split())) if proc.returncode == 0 else []

    def stop(self) -> None:
        """Stop every process in the cluster's namespaces and munged (SIGTERM, SIGKILL after
        3 s), then delete the namespaces."""
        for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
            for pid in [pid for ns in self._namespaces for pid in _netns_pids(ns)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            for p in self._procs:
                if p.poll() is None:
                    p.send_signal(sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and (
                    any(p.poll() is None for p in self._procs)
                    or any(_netns_pids(ns) for ns in self._namespaces)):
                time.sleep(0.05)
        for ns in self._namespaces:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)

    def save(self) -> Path:
        """``<dir>/cluster.json``: what ``stop_saved`` needs to stop it from another process."""
        path = self.dir / "cluster.json"
        path.write_text(json.dumps({"dir": str(self.dir), "hub": self.hub, "namespaces": self._namespaces,
                                    "pids": [p.pid for p in self._procs], "nodes": [n.name for n in self.nodes],
                                    "env": self.env}, indent=1) + "\n")
        return path

    def leftovers(self) -> list[str]:
        """Processes or namespaces of this cluster still alive (empty after ``stop``)."""
        out = [f"pid {p.pid} ({p.args[0]})" for p in self._procs if p.poll() is None]
        out += [f"pid {pid} in netns {ns}" for ns in self._namespaces for pid in _netns_pids(ns)]
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        out += [f"netns {ns}" for ns in self._namespaces if ns in names.split()]
        return out


def parse_scontrol(text: str) -> dict[str, str]:
    """One-line ``scontrol show ... -o`` output -> ``{Key: value}`` (envbuild.launch's reader)."""
    from envbuild.launch.submit import parse_record

    return parse_record(text)


def why_unavailable() -> str | None:
    """None when a cluster can start here, else why (a missing package is installable)."""
    if os.geteuid() != 0:
        return "the Slurm testbed needs root (network namespaces, slurmd as root)"
    for tool in ("ip", "nsenter", "unshare"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    missing = [t for t in SBIN if not _sbin(t)]
    return f"not installed: {', '.join(missing)} ({INSTALL_HINT})" if missing else None


def ensure_packages() -> None:
    """apt-get install slurm-wlm and munge when a daemon is missing (root only)."""
    if all(_sbin(t) for t in SBIN):
        return
    if os.geteuid() != 0:
        raise EnvironmentProblem("slurm-wlm/munge are not installed and this is not root", hint=INSTALL_HINT)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=600)
    proc = subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
                          env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not all(_sbin(t) for t in SBIN):
        raise EnvironmentProblem(f"could not install {' '.join(PACKAGES)}: {proc.stderr.strip()[-300:]}",
                                 hint=INSTALL_HINT)


def _sbin(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}")
                                       if Path(p).is_file()), None)


def _netns_pids(ns: str) -> list[int]:
    proc = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(x) for x in proc.stdout.split() if x.isdigit()]


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise EnvironmentProblem(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


def _fake_gpu_files(count: int) -> list[str]:
    """Character devices that stand for GPUs (never opened: task/none constrains nothing)."""
    files = [f"/dev/tty{i}" for i in range(count)]
    missing = [f for f in files if not Path(f).exists()]
    if missing:
        raise EnvironmentProblem(f"no device files to stand for {count} GPUs: {', '.join(missing)} missing",
                                 hint="ask for fewer GPUs per node")
    return files


def _gres_conf(nodes: list[SlurmNode], gpus: int) -> str:
    if not gpus:
        return ""
    files = _fake_gpu_files(gpus)
    return "".join(f"NodeName={n.name} Name=gpu File={f}\n" for n in nodes for f in files)


def _wait_for(what: str, check, proc: subprocess.Popen | None, log: Path | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-600:] if log and log.exists() else ""
            raise EnvironmentProblem(f"{what} exited with {proc.returncode}: {tail}")
        time.sleep(0.05)
    tail = log.read_text(errors="replace")[-600:] if log and log.exists() else ""
    raise EnvironmentProblem(f"{what} not ready within {timeout:.0f} s: {tail}")


def _shim(cluster: SlurmCluster, name: str) -> None:
    real = shutil.which(name, path="/usr/bin:/bin:/usr/sbin") or f"/usr/bin/{name}"
    text = (f"#!/bin/sh\n# {name} against the envbuild test cluster in {cluster.dir}\n"
            f"SLURM_CONF='{cluster.conf}'\nexport SLURM_CONF\n"
            # inside a job the node's own namespace already reaches the controller
            f'if [ -n "${{SLURM_JOB_ID:-}}" ]; then exec {real} "$@"; fi\n'
            f"exec nsenter --net=/run/netns/{cluster.hub} {real} \"$@\"\n")
    path = cluster.bin_dir / name
    path.write_text(text)
    path.chmod(0o755)


def _start_munge(cluster: SlurmCluster) -> Path:
    d = cluster.dir / "munge"
    d.mkdir(mode=0o700)
    key = d / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    sock = d / "munge.socket"
    log = d / "munged.log"
    proc = subprocess.Popen([_sbin("munged"), "-F", "--force", f"--socket={sock}", f"--key-file={key}",
                             f"--pid-file={d / 'munged.pid'}", f"--log-file={log}",
                             f"--seed-file={d / 'munged.seed'}", "--num-threads=2"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    cluster._procs.append(proc)
    _wait_for("munged", sock.exists, proc, log, 10)
    return sock


def _network(cluster: SlurmCluster, count: int) -> None:
    hub = cluster.hub
    _ip("netns", "add", hub)
    cluster._namespaces.append(hub)
    _ip("-n", hub, "link", "set", "lo", "up")
    _ip("-n", hub, "link", "add", "br0", "type", "bridge")
    _ip("-n", hub, "addr", "add", f"{SUBNET}.1/24", "dev", "br0")
    _ip("-n", hub, "link", "set", "br0", "up")
    for i in range(count):
        ns = f"{hub[:-1]}{i + 1}"
        _ip("netns", "add", ns)
        cluster._namespaces.append(ns)
        _ip("-n", hub, "link", "add", f"v{i + 1}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("-n", hub, "link", "set", f"v{i + 1}", "master", "br0")
        _ip("-n", hub, "link", "set", f"v{i + 1}", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "addr", "add", f"{SUBNET}.{11 + i}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        cluster.nodes.append(SlurmNode(name=f"node{i + 1}", addr=f"{SUBNET}.{11 + i}", netns=ns,
                                       gpus=cluster.gpus_per_node))


NODE_START = """\
set -e
mount --bind {hosts} /etc/hosts
mount -t tmpfs -o size=4g,mode=0755 tmpfs {node_local}
hostname {name}
exec {slurmd} -D -N {name} -f {conf}
"""


@contextlib.contextmanager
def slurm_cluster(nodes: int = 2, *, gpus_per_node: int = 2, cpus_per_node: int = 16,
                  memory_mb: int = 16384, base_dir: str | None = None, node_local: Path | None = None,
                  tree_width: int | None = None, timeout: float = 30) -> Iterator[SlurmCluster]:
    """Start a cluster of ``nodes`` idle nodes and always tear it down on exit. ``node_local``:
    the path that is each node's own disk (default: a folder of the cluster's); ``tree_width``:
    slurm.conf's TreeWidth, the fan-out of Slurm's message tree (sbcast's too; default Slurm's)."""
    cluster = start_cluster(nodes, gpus_per_node=gpus_per_node, cpus_per_node=cpus_per_node, memory_mb=memory_mb,
                            base_dir=base_dir, node_local=node_local, tree_width=tree_width, timeout=timeout)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def start_cluster(nodes: int = 2, *, gpus_per_node: int = 2, cpus_per_node: int = 16,
                  memory_mb: int = 16384, base_dir: str | None = None, node_local: Path | None = None,
                  tree_width: int | None = None, timeout: float = 30) -> SlurmCluster:
    """Start the cluster ``slurm_cluster`` describes and return it running (its daemons in
    sessions of their own: they outlive this process); the caller stops it (``stop``, or
    ``stop_saved`` of its folder from another process). A start that fails stops what it
    started."""
    ensure_packages()
    why = why_unavailable()
    if why:
        raise EnvironmentProblem(f"cannot start the Slurm testbed: {why}", hint=INSTALL_HINT)
    d = Path(tempfile.mkdtemp(prefix="envbuild-slurm-", dir=base_dir))
    tag = f"eb{os.getpid() % 100000}{secrets.token_hex(2)}"
    cluster = SlurmCluster(dir=d, hub=f"{tag}h", gpus_per_node=gpus_per_node, cpus_per_node=cpus_per_node,
                           node_local_dir=node_local)
    try:
        for sub in ("etc", "state", "spool", "run", "log", "bin"):
            (d / sub).mkdir()
        cluster.node_local.mkdir(parents=True, exist_ok=True)
        ctl_host = socket.gethostname().split(".")[0]
        sock = _start_munge(cluster)
        _network(cluster, nodes)
        node_lines = "\n".join(
            f"NodeName={n.name} NodeAddr={n.addr} NodeHostname={n.name} CPUs={cpus_per_node} "
            f"RealMemory={memory_mb}" + (f" Gres=gpu:{gpus_per_node}" if gpus_per_node else "")
            + " State=UNKNOWN" for n in cluster.nodes)
        cluster.conf.write_text(SLURM_CONF.format(ctl_host=ctl_host, ctl_addr=f"{SUBNET}.1",
                                                  munge_socket=sock, dir=d, nodes=node_lines)
                                + (f"TreeWidth={int(tree_width)}\n" if tree_width else ""))
        (d / "etc" / "gres.conf").write_text(_gres_conf(cluster.nodes, gpus_per_node))
        (d / "etc" / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")
        hosts = d / "etc" / "hosts"
        hosts.write_text("127.0.0.1 localhost\n" + f"{SUBNET}.1 {ctl_host}-ctl\n"
                         + "".join(f"{n.addr} {n.name}\n" for n in cluster.nodes))
        for name in CLIENTS:
            _shim(cluster, name)
        env = {**os.environ, "SLURM_CONF": str(cluster.conf)}
        ctl_log = d / "log" / "slurmctld.log"
        ctl = subprocess.Popen(["nsenter", f"--net=/run/netns/{cluster.hub}", _sbin("slurmctld"),
                                "-D", "-c", "-i", "-f", str(cluster.conf)],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT, start_new_session=True)
        cluster._procs.append(ctl)
        _wait_for("slurmctld", lambda: cluster.client(["sinfo", "-h"], check=False).returncode == 0,
                  ctl, ctl_log, timeout)
        for n in cluster.nodes:
            script = NODE_START.format(hosts=hosts, name=n.name, slurmd=_sbin("slurmd"), conf=cluster.conf,
                                       node_local=cluster.node_local)
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{n.netns}", "unshare", "--mount", "--uts",
                                  "--propagation", "private", "sh", "-c", script],
                                 env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            cluster._procs.append(p)
        want = sorted(n.name for n in cluster.nodes)
        _wait_for("slurmd nodes idle", lambda: cluster.idle_nodes() == want, None,
                  d / "log" / f"slurmd-{want[0]}.log", timeout)
        return cluster
    except BaseException:
        cluster.stop()
        shutil.rmtree(d, ignore_errors=True)
        raise


def stop_saved(folder: Path) -> list[str]:
    """Stop the cluster ``save`` recorded in ``folder`` (every process in its namespaces and the
    daemons it started: SIGTERM, SIGKILL after 3 s), delete its namespaces and its folder; what
    was still alive after that (empty when all went)."""
    state = json.loads((folder / "cluster.json").read_text())
    namespaces = state["namespaces"]
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        pids = {*state["pids"], *(pid for ns in namespaces for pid in _netns_pids(ns))}
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (any(_alive(pid) for pid in state["pids"])
                                               or any(_netns_pids(ns) for ns in namespaces)):
            time.sleep(0.05)
    for ns in namespaces:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
    left = [f"pid {pid}" for pid in state["pids"] if _alive(pid)]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    left += [f"netns {ns}" for ns in namespaces if ns in names]
    if not left:
        shutil.rmtree(folder, ignore_errors=True)
    return left


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (this module's daemons' parent may be gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


STATE_DIR = Path(tempfile.gettempdir()) / "envbuild-slurm-testbed"
USAGE = """Start or stop the Slurm test bed outside pytest, to try a site's templates or a launch by hand.

    python -m envbuild.testbed.slurm up [--nodes 2] [--gpus-per-node 2] [--cpus-per-node 16] [--dir DIR]
    eval "$(python -m envbuild.testbed.slurm env)"      # SLURM_CONF and PATH for sbatch, sinfo, envbuild launch
    python -m envbuild.testbed.slurm down [--dir DIR]

``up`` starts the cluster (root, slurm-wlm and munge needed, as for the tests) and leaves it
running; its folder holds cluster.json, which ``down`` reads to stop every daemon and job and
delete the namespaces. DIR (default {state}) holds one cluster at a time."""


def main(argv: list[str] | None = None) -> int:
    """``up`` / ``env`` / ``down`` (``USAGE``)."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m envbuild.testbed.slurm", description=USAGE.format(state=STATE_DIR),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["up", "env", "down"])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpus-per-node", type=int, default=2)
    ap.add_argument("--cpus-per-node", type=int, default=16)
    ap.add_argument("--dir", type=Path, default=STATE_DIR, help=f"where the cluster lives (default {STATE_DIR})")
    args = ap.parse_args(argv)
    pointer = args.dir / "current"
    running = Path(pointer.read_text().strip()) if pointer.is_file() else None
    if args.action == "up":
        if running is not None and (running / "cluster.json").is_file():
            print(f"a test bed is already up in {running}: python -m envbuild.testbed.slurm down --dir {args.dir}",
                  file=sys.stderr)
            return 1
        args.dir.mkdir(parents=True, exist_ok=True)
        try:
            cluster = start_cluster(args.nodes, gpus_per_node=args.gpus_per_node, cpus_per_node=args.cpus_per_node,
                                    base_dir=str(args.dir))
        except EnvironmentProblem as exc:
            print(f"error: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
            return exc.exit_code
        cluster.save()
        pointer.write_text(f"{cluster.dir}\n")
        print(f"Slurm test bed up in {cluster.dir}: {', '.join(n.name for n in cluster.nodes)}, "
              f"{args.gpus_per_node} GPU(s) (gres) and {args.cpus_per_node} CPUs each; node-local disk "
              f"{cluster.node_local}", file=sys.stderr)
        print(f'use it: eval "$(python -m envbuild.testbed.slurm env --dir {args.dir})"; '
              f"stop it: python -m envbuild.testbed.slurm down --dir {args.dir}", file=sys.stderr)
        return 0
    if running is None or not (running / "cluster.json").is_file():
        print(f"no test bed is up in {args.dir}", file=sys.stderr)
        return 1
    if args.action == "env":
        import shlex

        env = json.loads((running / "cluster.json").read_text())["env"]
        print(f"export SLURM_CONF={shlex.quote(env['SLURM_CONF'])}")
        print(f"export PATH={shlex.quote(str(running / 'bin'))}:\"$PATH\"")
        return 0
    left = stop_saved(running)
    if left:
        print(f"still alive after stopping {running}: {', '.join(left)}", file=sys.stderr)
        return 3
    pointer.unlink(missing_ok=True)
    print(f"Slurm test bed in {running} stopped and removed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
