"""Hold the lock of an environment's prefix on the file system that holds the prefix, for as
long as the controller's run keeps this process's standard input open.

The lock is ``flock(2)`` on ``<prefix>/.envbuild/prefix.lock``: on a node's own disk it keeps
two runs (from two controllers, or two users) apart; on a shared file system (NFS, Lustre,
GPFS: a prefix every node of a cluster reads) it keeps every node and every controller apart,
since they all lock the same file. The kernel (or the file system's lock manager) drops it when
this process ends, and this process ends when the controller closes its end or its connection
drops: a killed controller leaves no lock held, only a file naming its last holder.

Run by the controller as ``python -m envbuild_node.prefixhold PREFIX OWNER WAIT_S``
(``envbuild.execute.prefixlock``); it prints one line per state, flushed:

* ``LOCKED``: the lock is held, OWNER (a JSON object) written into the file;
* ``WAIT <holder>``: another run holds it (its OWNER), this one waits up to WAIT_S seconds;
* ``HELD <holder>``: still held after WAIT_S: exit 3, nothing changed;
* ``ERROR <reason>``: the file system refuses locks (an NFS mount without a lock manager): exit 4;
* ``STOPPED <n>``: the controller went without saying ``DONE`` (an interrupt, a killed
  controller, a dropped connection): the run's work on the node (every process whose
  environment carries the prefix's TMPDIR, set by the playbook) was stopped, SIGTERM then
  SIGKILL, before the lock is let go: no node work outlives the lock.

A run that ends as planned writes ``DONE`` before closing its end.

Standard library only, the package's floor (see ``__init__.py``).
"""
import errno
import fcntl
import os
import sys
import time

BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


def lock_path(prefix):
    return os.path.join(os.path.expanduser(prefix), ".envbuild", "prefix.lock")


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv):
    prefix, owner, wait_s = argv[0], argv[1], float(argv[2])
    path = lock_path(prefix)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fh = open(path, "a+")
    except OSError as exc:
        say("ERROR cannot open %s: %s" % (path, exc.strerror or exc))
        return 4
    deadline = time.monotonic() + wait_s
    waiting = False
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in BUSY:
                say("ERROR %s refuses locks: %s" % (path, exc.strerror or exc))
                return 4
        fh.seek(0)
        holder = " ".join(fh.read().split()) or "{}"
        if time.monotonic() >= deadline:
            say("HELD " + holder)
            return 3
        if not waiting:
            say("WAIT " + holder)
            waiting = True
        time.sleep(0.5)
    fh.seek(0)
    fh.truncate()
    fh.write(owner + "\n")
    fh.flush()
    os.fsync(fh.fileno())
    say("LOCKED")
    told = sys.stdin.read()  # until the controller closes its end, or its connection drops
    if "DONE" not in told.split():
        # the run did not end as planned (an interrupt, a killed controller, a dropped
        # connection): its work on this node stops before the lock is let go
        stopped = stop_work(prefix)
        try:
            say("STOPPED %d" % len(stopped))
        except (OSError, ValueError):  # nobody reads any more
            pass
    return 0


def markers(prefix):
    """The environment entries every process of a run's node tasks carries: the playbook sets
    TMPDIR to the prefix's temporary folder (playbooks/provision.yml), and children inherit it."""
    given = os.path.expanduser(prefix)
    return {("TMPDIR=" + os.path.join(p, ".envbuild", "tmp")).encode()
            for p in (given, os.path.realpath(given), given.rstrip("/"))}


def run_processes(prefix, proc="/proc"):
    """Pids of this user's processes working for a run on ``prefix`` (their environment holds a
    marker), never this process."""
    marks, me, found = markers(prefix), os.getpid(), []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(os.path.join(proc, name, "environ"), "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        if marks.intersection(env):
            found.append(int(name))
    return found


def _send(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:  # gone already
            pass


def _wait_gone(prefix, seconds, step):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and run_processes(prefix):
        time.sleep(step)


def stop_work(prefix, grace_s=10.0):
    """SIGTERM every process of the run on ``prefix``, SIGKILL what is left after ``grace_s``;
    returns the pids found. The prefix's lock is held until this returns."""
    import signal

    pids = run_processes(prefix)
    _send(pids, signal.SIGTERM)
    _wait_gone(prefix, grace_s, 0.2)
    _send(run_processes(prefix), signal.SIGKILL)
    _wait_gone(prefix, 5.0, 0.1)
    return pids


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
