"""Real OpenSSH nodes on loopback: N ``sshd`` on 127.0.0.2, 127.0.0.3, ... each on its own port.

Every node has its own host key and config in a temporary folder; one client key pair is
authorised on all of them. The context manager writes an Ansible inventory and a known_hosts
file with every node's host key (clients check host keys for real, see ``SshTestbed.env``),
yields the records and always stops the daemons::

    with ssh_nodes(3) as bed:
        for node in bed.nodes:
            print(node.user, node.host, node.port, node.key_path)
        print(bed.inventory_path)

Needs ``openssh-server`` (``apt-get install -y openssh-server openssh-client``); the nodes
share the filesystem with this machine (see TESTBED.md, "Loopback, shared filesystem").
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from envbuild.errors import EnvironmentProblem
from envbuild.facts.pipconf import FETCH_SETTINGS

INSTALL_HINT = "install OpenSSH: apt-get install -y openssh-server openssh-client"
_CONFIG = """\
ListenAddress {host}:{port}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized_keys}
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
UseDNS no
PrintMotd no
LogLevel ERROR
Subsystem sftp internal-sftp
{set_env}"""


@dataclass(frozen=True)
class SshNode:
    """One running node: connect with ``ssh -i key_path -p port user@host``."""

    name: str
    host: str
    port: int
    user: str
    key_path: str
    known_hosts: str

    @property
    def address(self) -> str:
        """``user@host:port`` as ``envbuild facts --hosts`` takes it."""
        return f"{self.user}@{self.host}:{self.port}"


@dataclass
class SshTestbed:
    """The running nodes and the files describing them."""

    dir: Path
    nodes: list[SshNode] = field(default_factory=list)
    inventory_path: Path | None = None
    known_hosts: Path | None = None
    key_path: Path | None = None
    session_env: dict[str, str] = field(default_factory=dict)
    _procs: list[subprocess.Popen] = field(default_factory=list, repr=False)

    @property
    def env(self) -> dict[str, str]:
        """Environment that makes envbuild check these nodes' host keys against ``known_hosts``."""
        return {"ENVBUILD_KNOWN_HOSTS": str(self.known_hosts)}

    @property
    def hosts_arg(self) -> str:
        """The ``--hosts`` value naming every node."""
        return ",".join(n.address for n in self.nodes)

    def stop(self) -> None:
        """Stop every sshd started here (SIGTERM, then SIGKILL after 5 s)."""
        for p in self._procs:
            if p.poll() is None:
                p.terminate()
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self._procs.clear()


def find_sshd() -> str:
    """Absolute path of sshd (it refuses to re-exec from a relative one)."""
    path = shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd", "/sbin/sshd") if Path(p).is_file()), None)
    if not path:
        raise EnvironmentProblem("sshd (OpenSSH server) is not installed", hint=INSTALL_HINT)
    return path


def free_port(host: str) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    keygen = shutil.which("ssh-keygen")
    if not keygen:
        raise EnvironmentProblem("ssh-keygen is not installed", hint=INSTALL_HINT)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "envbuild-testbed", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)


def _wait_listening(host: str, port: int, proc: subprocess.Popen, log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EnvironmentProblem(
                f"sshd for {host}:{port} exited with {proc.returncode}: {log.read_text(errors='replace').strip()[:300]}",
                hint="run the sshd command by hand with -d to see why; " + INSTALL_HINT,
            )
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise EnvironmentProblem(f"sshd for {host}:{port} did not listen within {timeout:.0f} s", hint="check the log " + str(log))


def write_inventory(bed: SshTestbed) -> Path:
    """An Ansible INI inventory with every node in group ``nodes``."""
    lines = ["[nodes]"]
    lines += [
        f"{n.name} ansible_host={n.host} ansible_port={n.port} ansible_user={n.user} "
        f"ansible_ssh_private_key_file={n.key_path}"
        for n in bed.nodes
    ]
    lines += [
        "",
        "[nodes:vars]",
        f"ansible_ssh_common_args='-o UserKnownHostsFile={bed.known_hosts} -o StrictHostKeyChecking=yes'",
        "ansible_python_interpreter=/usr/bin/python3",
        "",
    ]
    path = bed.dir / "inventory.ini"
    path.write_text("\n".join(lines))
    return path


def _start_sshd(bed: SshTestbed, index: int, node_dir: Path, host: str, port: int, authorized: Path) -> None:
    """Start (or restart) node ``index``'s sshd with the host key in ``node_dir``."""
    host_key = node_dir / "ssh_host_ed25519_key"
    config = node_dir / "sshd_config"
    # one SetEnv line with every pair: sshd takes the first SetEnv it reads and ignores the rest
    set_env = ("SetEnv " + " ".join(f'"{k}={v}"' for k, v in bed.session_env.items()) + "\n"
               if bed.session_env else "")
    config.write_text(_CONFIG.format(host=host, port=port, host_key=host_key, set_env=set_env,
                                     pid_file=node_dir / "sshd.pid", authorized_keys=authorized))
    log = node_dir / "sshd.log"
    proc = subprocess.Popen([find_sshd(), "-D", "-f", str(config), "-E", str(log)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if index < len(bed._procs):
        bed._procs[index] = proc
    else:
        bed._procs.append(proc)
    _wait_listening(host, port, proc, log)


def known_hosts_line(host: str, port: int, host_key_pub: Path) -> str:
    """The known_hosts line of a host key, as ``ssh-keyscan -p PORT HOST`` prints it."""
    kind, key = host_key_pub.read_text().split()[:2]
    return f"{f'[{host}]:{port}' if port != 22 else host} {kind} {key}"


def rekey(bed: SshTestbed, name: str) -> SshNode:
    """Give node ``name`` a NEW host key and restart its sshd on the same address and port.

    The testbed's known_hosts keeps the OLD key: the node now looks like a reinstalled host
    (or an impostor), which a host-key check must refuse."""
    index = next(i for i, n in enumerate(bed.nodes) if n.name == name)
    node = bed.nodes[index]
    node_dir = bed.dir / name
    proc = bed._procs[index]
    proc.terminate()
    proc.wait(timeout=5)
    for f in node_dir.glob("ssh_host_ed25519_key*"):
        f.unlink()
    _keygen(node_dir / "ssh_host_ed25519_key")
    _start_sshd(bed, index, node_dir, node.host, node.port, bed.dir / "authorized_keys")
    return node


def hide_folder(bed: SshTestbed, name: str, folder: Path) -> SshNode:
    """Restart node ``name``'s sshd (same address, port and keys) in a mount namespace of its
    own in which ``folder`` is an empty tmpfs: that node no longer sees what the host and the
    other nodes see there, as a node without a cluster's shared file system would not."""
    index = next(i for i, n in enumerate(bed.nodes) if n.name == name)
    node, node_dir = bed.nodes[index], bed.dir / name
    proc = bed._procs[index]
    proc.terminate()
    proc.wait(timeout=5)
    folder.mkdir(parents=True, exist_ok=True)
    cmd = (f"mount -t tmpfs tmpfs {shlex.quote(str(folder))} && exec {shlex.quote(find_sshd())} -D "
           f"-f {shlex.quote(str(node_dir / 'sshd_config'))} -E {shlex.quote(str(node_dir / 'sshd.log'))}")
    bed._procs[index] = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", cmd],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
    _wait_listening(node.host, node.port, bed._procs[index], node_dir / "sshd.log")
    return node


# A command sent over ssh runs as ``$SHELL -c``, and bash, seeing it was started by sshd at
# shell level 1, reads the user's ~/.bashrc first. A user's stock ~/.bashrc (/etc/skel's) returns
# at once for a non-interactive shell; root's on Debian has no such guard, and this machine's
# (root: the nodes' user) runs `pyenv init` twice (~20 processes, ~0.08 s of CPU) in every one
# of the suite's ~700 sessions.
# With SHLVL=1 in the session, bash starts at level 2 and reads no ~/.bashrc: the session is
# what sshd makes (its PATH, no pyenv shims), as on a node whose ~/.bashrc keeps the guard.
# ``ssh_nodes(read_bashrc=True)`` leaves it out.
NON_INTERACTIVE = {"SHLVL": "1"}


# where a TLS client finds its CA bundle (pip, requests, curl, OpenSSL): the variables that stand
# for pip.conf's ``cert`` (the installer's choice reads the same table), what a node's profile
# exports when its network inspects TLS, as this machine's environment does
CA_BUNDLE_ENV = FETCH_SETTINGS["cert"]


def ca_bundle_env() -> dict[str, str]:
    """The ``CA_BUNDLE_ENV`` variables set here, with their values (none: an empty dict)."""
    return {k: os.environ[k] for k in CA_BUNDLE_ENV if os.environ.get(k)}


@contextlib.contextmanager
def ssh_nodes(count: int = 3, *, first_address: int = 2, base_dir: str | None = None,
              session_env: dict[str, str] | None = None, read_bashrc: bool = False) -> Iterator[SshTestbed]:
    """Start ``count`` sshd nodes on 127.0.0.<first_address>.. and stop them on exit.

    ``session_env``: variables every session on these nodes starts with (sshd's ``SetEnv``), as
    a node's own profile would set them (say, its own ``UV_CACHE_DIR``). They start with
    ``NON_INTERACTIVE`` (no ~/.bashrc read by a command's shell; ``read_bashrc``: it is read, as
    on a node whose ~/.bashrc has no guard) and the CA bundle variables this machine's
    environment sets, too (``CA_BUNDLE_ENV``), unless ``session_env`` names them: a node behind
    the same network as its controller, whose profile names the same bundle. Without them a
    session reads the bundle from pip.conf alone, which uv does not read, and the nodes would
    install with pip (``envbuild.plan.installer``; a pip.conf uv cannot see is the planner's own
    tests' case: tests/plan/test_installer.py).

    ``bed.known_hosts`` holds every node's host key (the testbed made them), so clients check
    host keys for real: ``--known-hosts bed.known_hosts``, ``bed.env`` (ENVBUILD_KNOWN_HOSTS),
    or the inventory, whose ssh args name the file."""
    find_sshd()
    session_env = {**({} if read_bashrc else NON_INTERACTIVE), **ca_bundle_env(), **(session_env or {})}
    if any(c in kv for item in session_env.items() for kv in item for c in '"\n'):
        raise ValueError("session_env: a name or value holds a double quote or a newline")
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
    bed = SshTestbed(dir=Path(tempfile.mkdtemp(prefix="envbuild-sshd-", dir=base_dir)),
                     session_env=session_env)
    try:
        bed.key_path = bed.dir / "id_ed25519"
        _keygen(bed.key_path)
        authorized = bed.dir / "authorized_keys"
        shutil.copy(bed.key_path.with_suffix(".pub"), authorized)
        bed.known_hosts = bed.dir / "known_hosts"
        known: list[str] = []
        user = getpass.getuser()
        for i in range(count):
            host = f"127.0.0.{first_address + i}"
            port = free_port(host)
            node_dir = bed.dir / f"node{i + 1}"
            node_dir.mkdir()
            _keygen(node_dir / "ssh_host_ed25519_key")
            _start_sshd(bed, i, node_dir, host, port, authorized)
            known.append(known_hosts_line(host, port, node_dir / "ssh_host_ed25519_key.pub"))
            bed.nodes.append(SshNode(f"node{i + 1}", host, port, user, str(bed.key_path), str(bed.known_hosts)))
        bed.known_hosts.write_text("\n".join(known) + "\n")
        bed.inventory_path = write_inventory(bed)
        yield bed
    finally:
        bed.stop()
        shutil.rmtree(bed.dir, ignore_errors=True)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children first listed last."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_node(bed: SshTestbed, name: str) -> list[int]:
    """Node ``name`` dies: its sshd and every session under it (the commands they run
    included) get SIGKILL, as when a machine loses power. Returns the pids killed."""
    import os
    import signal

    index = next(i for i, n in enumerate(bed.nodes) if n.name == name)
    proc = bed._procs[index]
    pids = [proc.pid, *_descendants(proc.pid)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=5)
    return pids


def restart_node(bed: SshTestbed, name: str) -> SshNode:
    """Start node ``name``'s sshd again (same address, port and host key) after ``kill_node``."""
    index = next(i for i, n in enumerate(bed.nodes) if n.name == name)
    node = bed.nodes[index]
    if bed._procs[index].poll() is None:
        return node
    _start_sshd(bed, index, bed.dir / name, node.host, node.port, bed.dir / "authorized_keys")
    return node
