"""One provision per prefix per node at a time: an exclusive lock for each (node, prefix) a
run will install into, held from before the probe until the run ends.

The locks are ``flock(2)`` locks on files under ``$ENVBUILD_LOCK_DIR`` (default
``$XDG_RUNTIME_DIR/envbuild/locks`` where that folder is this user's own and no one else may
write in it, else ``$ENVBUILD_HOME/locks``: places only this user can create, never a shared
folder such as /tmp, where another user could make the folder first and block this user's
runs; folders of this user's only, 0700, never a link; lock files opened without following a
link), one per node address (user, host, port; the local
node by its real prefix path) and prefix. The kernel drops a lock when its process dies, so a
killed run (``kill -9``) leaves no stale lock behind, and a file left by it is only a file.
A second run that finds one held stops before it touches the node, naming the run that holds
it (EnvironmentProblem, exit 3). With ``alone=True`` (a fleet's provision) a node whose prefix
cannot be locked, here or on the node, fails alone: its reason is handed back and the other
nodes go on; only when no node could be locked is the error raised.

This controller-side lock is the quick one (no node is reached). The lock that keeps two
controllers, two users or two nodes of a shared file system apart is on the prefix itself
(``on_nodes``): a process on the node, ``envbuild/node/prefixhold.py``, holds ``flock(2)`` on
``<prefix>/.envbuild/prefix.lock`` for as long as this run keeps its connection open, so the
lock goes with the run, whatever ends it. A prefix of a target whose prefix is shared
(``Target.shared_prefix``) is locked once, through the first of its nodes, and a run that finds
it held waits for it (``shared_wait_s``); a node's own prefix found held stops the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from envbuild.errors import EnvironmentProblem
from envbuild.fsio import sha256_text
from envbuild.rundir import envbuild_home

SHARED_WAIT_S = 3600  # how long a run waits for another one installing a shared prefix


def lock_dir() -> Path:
    """``$ENVBUILD_LOCK_DIR``, else ``$XDG_RUNTIME_DIR/envbuild/locks`` when that folder is this
    user's real folder and no one else may write in it (``/run/user/<uid>``, private by design),
    else ``$ENVBUILD_HOME/locks`` (``~/.envbuild/locks``): never a folder of a shared /tmp, whose
    name another user could take first."""
    if os.environ.get("ENVBUILD_LOCK_DIR"):
        return Path(os.environ["ENVBUILD_LOCK_DIR"])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _only_ours(Path(runtime)):
        return Path(runtime) / "envbuild" / "locks"
    return envbuild_home() / "locks"


def _only_ours(folder: Path) -> bool:
    """Whether ``folder`` is a real folder of this user's that no one else may write in."""
    import stat

    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def private_dir(path: Path) -> Path:
    """``path`` as a folder this user owns and no one else may enter, with the folder above it
    where envbuild names both (``$XDG_RUNTIME_DIR/envbuild/locks``, ``$ENVBUILD_HOME/locks``):
    made 0700; an existing one must be a real folder (not a link) owned by this user, and is
    narrowed to 0700. Another user's folder, or a link, is refused (exit 3): a lock file opened
    through it could be made to overwrite what the link points at."""
    ours = [path] if os.environ.get("ENVBUILD_LOCK_DIR") else [path.parent, path]
    ours[0].parent.mkdir(parents=True, exist_ok=True)
    for folder in ours:
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        st = os.lstat(folder)
        import stat

        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            what = "a link" if stat.S_ISLNK(st.st_mode) else f"owned by uid {st.st_uid}" if stat.S_ISDIR(
                st.st_mode) else "not a folder"
            raise EnvironmentProblem(f"the lock folder {folder} is {what}, not a folder of this user's",
                                     hint="remove it, or set ENVBUILD_LOCK_DIR to a private folder")
        if st.st_mode & 0o077:
            os.chmod(folder, 0o700)
    return path


def key(node, prefix: str) -> str:
    """The lock's name for ``prefix`` on ``node`` (an ``envbuild.connect.nodes.Node``): the
    local prefix by its real path; a remote one by the user ssh logs in as (this user's name
    when none is given, as ssh does), the host in lower case, the port, and the prefix with
    ``//``, ``/./`` and a trailing ``/`` folded (a link on the node is the lock on the prefix
    itself's to see: ``on_nodes``)."""
    import getpass
    import posixpath

    if node.is_local:
        where = f"local:{os.path.realpath(prefix)}"
    else:
        path = posixpath.normpath("/" + prefix.lstrip("/")) if prefix.startswith("/") else posixpath.normpath(prefix)
        where = f"{node.user or getpass.getuser()}@{node.host.lower()}:{node.port or 22}:{path}"
    return sha256_text(where)[:32]


def _take_here(folder: Path, node, prefix: str, run_id: str):
    """The open, locked lock file of (``node``, ``prefix``) in ``folder``; EnvironmentProblem
    when another run holds it or the file cannot be opened."""
    path = folder / f"{key(node, prefix)}.lock"
    try:  # never through a link planted where the lock file goes
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise EnvironmentProblem(f"{node.name}: cannot open the lock file {path}: {exc.strerror}",
                                 hint="remove it (a link or a file not of this user's)") from None
    f = os.fdopen(fd, "r+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        owner = f.read().strip()
        f.close()
        try:
            who = json.loads(owner)
            by = f"run {who.get('run')} (pid {who.get('pid')})"
        except ValueError:
            by = "another run"
        raise EnvironmentProblem(f"{node.name}: {prefix} is being provisioned by {by}",
                                 hint="wait for that run to end (one provision of a prefix at a time), "
                                      "or provision another --prefix") from None
    f.seek(0)
    f.truncate()
    f.write(json.dumps({"run": run_id, "pid": os.getpid(), "node": node.name, "prefix": prefix}))
    f.flush()
    return f


@contextmanager
def held(nodes_prefixes: list[tuple[object, str]], run_id: str, *,
         alone: bool = False) -> Iterator[dict[str, EnvironmentProblem]]:
    """Hold the lock of every (node, prefix) for the block; EnvironmentProblem when one is
    held by another run (every lock taken so far is released). ``alone``: such a node is left
    out instead, its error in the dict yielded ``{node name: error}``; raised only when every
    node failed."""
    folder = private_dir(lock_dir())
    files = []
    failed: dict[str, EnvironmentProblem] = {}
    try:
        for node, prefix in nodes_prefixes:
            try:
                files.append(_take_here(folder, node, prefix, run_id))
            except EnvironmentProblem as exc:
                if not alone:
                    raise
                failed[node.name] = exc
        if failed and len(failed) == len(nodes_prefixes):
            raise next(iter(failed.values()))
        yield failed
    finally:
        for f in files:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()


def shared_wait_s() -> float:
    """How long a run waits for a shared prefix another run holds ($ENVBUILD_PREFIX_WAIT_S)."""
    raw = os.environ.get("ENVBUILD_PREFIX_WAIT_S")
    try:
        return max(0.0, float(raw)) if raw else float(SHARED_WAIT_S)
    except ValueError:
        raise EnvironmentProblem(f"ENVBUILD_PREFIX_WAIT_S={raw!r} is not a number of seconds") from None


@dataclass(frozen=True)
class Claim:
    """A prefix to lock on the file system that holds it, reached through ``node``; ``wait_s``:
    how long to wait when another run holds it (0: stop at once)."""

    node: object  # envbuild.connect.nodes.Node
    prefix: str
    wait_s: float = 0.0


def claims(nodes: list, prefixes: dict[str, str], *, shared: bool) -> list[Claim]:
    """The node-side locks a run takes: one per node and prefix, or, where the target's prefix
    is shared, one per distinct prefix (through its first node), waited for."""
    if not shared:
        return [Claim(n, prefixes[n.name]) for n in nodes if n.name in prefixes]
    seen: dict[str, Claim] = {}
    for n in nodes:
        if n.name in prefixes:
            seen.setdefault(prefixes[n.name].rstrip("/") or "/", Claim(n, prefixes[n.name], shared_wait_s()))
    return list(seen.values())


def _holder(node, prefix: str, owner: str, wait_s: float):
    """(line reader, closer) of the holder process for ``prefix`` on ``node``."""
    from envbuild.actions.nodestate import node_command
    from envbuild.connect import ssh

    cmd = node_command(node.python or "python3", "prefixhold", [prefix, owner, f"{wait_s:g}"])
    if node.is_local:
        proc = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)

        def done_local() -> None:
            proc.stdin.write("DONE\n")
            proc.stdin.flush()

        def close_local() -> None:
            proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.stdout.readline, done_local, close_local
    conn = ssh.connection(node)
    try:
        conn.open()
        chan = conn.client.get_transport().open_session()
        chan.settimeout(wait_s + 120)
        chan.exec_command(cmd)
    except Exception as exc:  # noqa: BLE001 - every connection error means "cannot reach"
        err = ssh.failure(node, exc, conn)
        ssh.close(conn)
        raise err from None
    out = chan.makefile("r")

    def done_ssh() -> None:
        chan.sendall(b"DONE\n")

    def close_ssh() -> None:
        try:
            chan.shutdown_write()
            chan.close()
        finally:
            ssh.close(conn)
    return out.readline, done_ssh, close_ssh


def _who(line: str) -> str:
    try:
        who = json.loads(line)
        return (f"run {who.get('run')} from {who.get('controller')} (pid {who.get('pid')}, "
                f"through {who.get('node')}, since {who.get('since')})")
    except (ValueError, AttributeError):
        return "another run"


class Hold(list):
    """What ``on_nodes`` yields: the nodes through which it waited (a list), ``failed`` (with
    ``alone``: the claims that could not be locked, with their errors), and ``abandon()``, for
    a block that ends early without an exception (an interrupted playbook): its holders then
    stop the run's node work before they let go of the locks, as on an exception."""

    abandoned = False

    def __init__(self) -> None:
        super().__init__()
        self.failed: list[tuple[Claim, EnvironmentProblem]] = []

    def abandon(self) -> None:
        self.abandoned = True


def _take_on_node(c: Claim, run_id: str, stack: ExitStack, waited: Hold,
                  tell: Callable[[str, str], None]) -> Callable[[], None]:
    """Lock ``c`` through a holder process on its node (its closer put on ``stack``); the
    holder's ``done``. EnvironmentProblem when the prefix stays held or cannot be locked."""
    owner = json.dumps({"run": run_id, "controller": socket.gethostname(), "pid": os.getpid(),
                        "node": c.node.name, "since": datetime.now(timezone.utc).replace(microsecond=0).isoformat()},
                       sort_keys=True)
    readline, done, close = _holder(c.node, c.prefix, owner, c.wait_s)
    stack.callback(close)
    while True:
        try:
            line = readline().strip()
        except OSError as exc:  # the channel's timeout: the node stopped answering
            raise EnvironmentProblem(f"{c.node.name}: no answer while locking {c.prefix}: {exc}") from None
        kind, _, rest = line.partition(" ")
        if kind == "LOCKED":
            return done
        if kind == "WAIT":
            waited.append(c.node.name)
            tell(c.node.name, f"{c.prefix} is held by {_who(rest)}; waiting for it (up to {c.wait_s:g} s)")
            continue
        if kind == "HELD":
            after = f" after waiting {c.wait_s:g} s" if c.wait_s else ""
            raise EnvironmentProblem(
                f"{c.node.name}: {c.prefix} is being provisioned by {_who(rest)}{after}",
                hint="wait for that run to end (one provision of a prefix at a time), or provision "
                     "another --prefix; a shared prefix waits $ENVBUILD_PREFIX_WAIT_S seconds")
        reason = rest if kind == "ERROR" else (line or "the lock holder exited without a word")
        raise EnvironmentProblem(f"{c.node.name}: cannot lock {c.prefix}: {reason}",
                                 hint="a prefix on NFS needs a lock manager (mount without nolock); "
                                      "does python3 run on the node?")


@contextmanager
def on_nodes(wanted: list[Claim], run_id: str,
             say: Callable[[str, str], None] | None = None, *, alone: bool = False) -> Iterator[Hold]:
    """Hold the lock of every claimed prefix on its file system for the block (``prefixhold``);
    EnvironmentProblem (exit 3) when one is still held by another run after its wait, or when
    its file system refuses locks (every lock taken so far is released). ``say(node, message)``
    is told when a run starts waiting. Yields the nodes through which it waited: what was read
    of those prefixes before is stale (another run changed them meanwhile). ``alone``: a claim
    that cannot be locked (held, refused, its node not answering) is left out, in the yielded
    ``failed``, and the others hold; raised only when every claim failed."""
    tell = say or (lambda _n, _m: None)
    waited = Hold()
    dones: list[Callable[[], None]] = []
    with ExitStack() as stack:
        for c in wanted:
            try:
                dones.append(_take_on_node(c, run_id, stack, waited, tell))
            except EnvironmentProblem as exc:
                if not alone:
                    raise
                waited.failed.append((c, exc))
        if waited.failed and len(waited.failed) == len(wanted):
            raise waited.failed[0][1]
        yield waited
        # the block ended as planned: each holder lets go of its lock without stopping anything
        # (without DONE, on an interrupt or any error, it stops the run's node work first)
        for done in dones if not waited.abandoned else ():
            try:
                done()
            except OSError:
                pass
