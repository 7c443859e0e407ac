"""Run the provision playbook with ansible-runner in a private folder under the run directory.

Layout (ansible-runner's own): ``<run>/ansible/{env/, inventory/hosts.yml, artifacts/}``;
the project is envbuild's ``playbooks/`` (``PLAYBOOKS``: ``envbuild.shipped.PLAYBOOKS``, the
checkout's top-level folder or its copy in the installed wheel; ``ENVBUILD_PLAYBOOKS`` overrides
it): ``provision.yml``, which calls the role ``envbuild.node.provision`` of the collection in
``ansible_collections/`` beside it (``ANSIBLE_COLLECTIONS_PATH``). Nothing lands in ``~/.ansible``:
ANSIBLE_HOME, ANSIBLE_LOCAL_TEMP and ANSIBLE_SSH_CONTROL_PATH_DIR all point into the run folder.
A failing node does not stop the others (no any_errors_fatal; the free strategy: each node runs its own steps).

``execute()`` returns ansible-runner's status (successful, failed, canceled, timeout) and the
signal that stopped the run, if any. ansible-playbook runs in its own session (ansible-runner
spawns it on a pty), so a Ctrl-C at the terminal reaches only envbuild; on SIGINT/SIGTERM
envbuild sends SIGINT to ansible-playbook's whole process group (its workers and the module
processes, which stop the commands they run), waits up to ``GRACE_S``, then SIGKILLs the group.
A command that left that group (a new session, as the node-side action runner starts each
command in) is found anyway: while the playbook runs envbuild is a child subreaper (Linux), so
such processes on the local node become its children when their parent dies, and an
interrupted run kills every one of them (``_sweep_orphans``).

Secrets: ansible-runner writes the environment it starts ansible-playbook with to
``artifacts/<ident>/command``. The controller's secret-named variables (``envbuild.redact``)
are therefore not passed to ansible-playbook at all, and after the run every artifact file is
scrubbed of secret values and URL passwords. Credentials a play needs must be passed to it
explicitly, with ``no_log``. An inventory's credentials (``ansible_password``,
``ansible_become_password``...) never enter the run folder: ``inventory/hosts.yml`` is written
without them, and they reach ansible-playbook as a second inventory (``-i``): a link outside
the run folder (``/dev/shm`` where there is one, else the temporary folder) to an anonymous
memory file of this process, so they are never in a file, not even after a ``kill -9``
(``_secret_inventory``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.connect.procfs import stats
from envbuild.errors import EnvironmentProblem
from envbuild.execute.events import EventSink, StepTracker
from envbuild.fsio import sha256_text, write_atomic
from envbuild.interrupt import StopRequest
from envbuild.redact import Redactor, is_secret_name
from envbuild.render.ansible import Rendered
from envbuild.shipped import PLAYBOOKS as SHIPPED_PLAYBOOKS

PLAYBOOKS = Path(os.environ.get("ENVBUILD_PLAYBOOKS") or SHIPPED_PLAYBOOKS)
PLAYBOOK = "provision.yml"
COLLECTION = "ansible_collections/envbuild/node"
IDENT = "provision"
GRACE_S = 5.0  # SIGINT to the playbook's process group, then SIGKILL after this long
POLL_S = 0.25  # how often the runner asks whether to stop


@dataclass
class AnsibleJob:
    """The files of one run, written before anything runs (so --dry-run can show them)."""

    private_dir: Path
    inventory: Path
    extravars: Path
    envvars: dict[str, str]
    forks: int
    secret_inventory: str = field(default="", repr=False)  # credentials; kept in memory only

    def command(self) -> str:
        """The same run by hand (with ``-i PASSWORDS.yml``, one's own file of the inventory's
        credentials, when it has some: they are not written anywhere)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.envvars.items())
                       if k.startswith("ANSIBLE_") and k != "ANSIBLE_HOME")
        secrets = " -i PASSWORDS.yml" if self.secret_inventory else ""
        return (f"{env} ansible-playbook -i {shlex.quote(str(self.inventory))}{secrets} "
                f"{shlex.quote(str(PLAYBOOKS / PLAYBOOK))} -e @{shlex.quote(str(self.extravars))} "
                f"--forks {self.forks}")


def control_path_dir(wanted: Path) -> str:
    """``wanted``, or a short /tmp folder named after it when the socket path would pass the
    108-byte limit of Unix sockets (ssh adds ~30 characters to the folder); ``execute`` removes
    that folder when the playbook ends."""
    if len(str(wanted)) <= 70:
        return str(wanted)
    return f"/tmp/envbuild-cp-{sha256_text(str(wanted))[:10]}"


SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=60s"  # ansible-core's default ssh_args, less -C


def ansible_env(private_dir: Path, *, insecure: bool) -> dict[str, str]:
    """Environment for ansible-playbook: everything in the run folder, pipelining on."""
    home = private_dir / "home"
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    return {
        "PATH": bin_dir + (os.pathsep + path if path else ""),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_COLLECTIONS_PATH": str(PLAYBOOKS),  # its ansible_collections/envbuild/node, and no other
        # the project's ansible.cfg and no other (a user's ~/.ansible.cfg or /etc/ansible one does
        # not change envbuild's runs), wherever the playbook runs from: its internal_poll_interval
        # has no ANSIBLE_* variable (Ansible's default, 1 ms, spins the controller's CPU while
        # a node installs: 11 s of CPU in a 40 s provision of one node, 3 s with 20 ms)
        "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": control_path_dir(home / "cp"),
        # Ansible's own ssh_args without its -C: the staged wheels and bundles are zip and tar
        # of zips that do not compress, and zlib on the stream made a copy task of a 220 MB tar
        # take 10.6 s instead of 5.4 s over a loopback sshd (sftp alone: 6.1 s against 1.4 s;
        # measured by hand on the 2-core dev machine, each with a fresh control master).
        # The connection is still reused (ControlPersist). An inventory's ansible_ssh_args wins.
        "ANSIBLE_SSH_ARGS": SSH_ARGS,
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_HOST_KEY_CHECKING": "False" if insecure else "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_SYSTEM_WARNINGS": "False",
        "ANSIBLE_TIMEOUT": "15",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        # the inventories envbuild passes are YAML files (hosts.yml, credentials.yml): only the
        # YAML plugin is loaded, not Ansible's six (host_list, script, auto, yaml, ini, toml)
        "ANSIBLE_INVENTORY_ENABLED": "yaml",
    }


def prepare(private_dir: Path, rendered: Rendered, *, forks: int, insecure: bool) -> AnsibleJob:
    """Write inventory and extra vars (YAML, every string ``!unsafe``: data is never
    templated) and return the job; runs nothing."""
    inv = write_atomic(private_dir / "inventory" / "hosts.yml", rendered.inventory_text())
    extra = write_atomic(private_dir / "env" / "extravars", rendered.extravars_text())
    env = ansible_env(private_dir, insecure=insecure)
    for key in ("ANSIBLE_LOCAL_TEMP", "ANSIBLE_SSH_CONTROL_PATH_DIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return AnsibleJob(private_dir=private_dir, inventory=inv, extravars=extra, envvars=env,
                      forks=max(1, forks), secret_inventory=rendered.secret_inventory_text())


def _secret_folder(private_dir: Path) -> Path:
    """Where the credentials' inventory lives while the playbook runs: memory (``/dev/shm``)
    where possible, else the temporary folder; never under the run folder."""
    run = private_dir.resolve().parent
    for folder in (Path("/dev/shm"), Path(tempfile.gettempdir())):
        if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK) and not folder.resolve().is_relative_to(run):
            return folder
    raise EnvironmentProblem("no folder outside the run directory for the inventory's passwords",
                             hint="set TMPDIR to a writable folder outside ENVBUILD_HOME")


@contextmanager
def _secret_inventory(job: AnsibleJob):
    """The inventories to pass: the run folder's, and while the playbook runs the credentials
    in an anonymous memory file of this process (``memfd_create``, mode 0600, close-on-exec),
    reached through a link ``credentials.yml -> /proc/<pid>/fd/<n>`` in a 0700 folder outside
    the run folder. Readers (Ansible may read an inventory source more than once) open it like
    a file; only this user (or root) may. The credentials are never in a file: when this
    process ends, even by SIGKILL, the memory file is gone and a link left behind dangles. The
    link and its folder are removed on the way out, exceptions included."""
    if not job.secret_inventory:
        yield str(job.inventory)
        return
    fd = os.memfd_create("envbuild-credentials", os.MFD_CLOEXEC)
    folder = None
    try:
        os.fchmod(fd, 0o600)
        data = memoryview(job.secret_inventory.encode("utf-8"))
        while data:
            data = data[os.write(fd, data):]
        folder = tempfile.mkdtemp(prefix="envbuild-inventory-", dir=_secret_folder(job.private_dir))  # 0700
        link = os.path.join(folder, "credentials.yml")  # the name tells Ansible's YAML plugin it is YAML
        os.symlink(f"/proc/{os.getpid()}/fd/{fd}", link)
        yield [str(job.inventory), link]
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)


@dataclass
class RunResult:
    """How ansible-playbook ended: ansible-runner's status and rc, and the signal (SIGINT or
    SIGTERM) that made envbuild stop it, if one did."""

    status: str  # successful | failed | canceled | timeout
    rc: int | None
    signum: int | None = None


def run(job: AnsibleJob, sink: EventSink, tracker: StepTracker) -> int:
    """Run the playbook (see ``execute``); returns ansible-playbook's rc."""
    return execute(job, sink, tracker).rc


def execute(job: AnsibleJob, sink: EventSink, tracker: StepTracker,
            stop: StopRequest | None = None, mask: set[str] | frozenset[str] = frozenset()) -> RunResult:
    """Run the playbook; feed every runner event to the tracker and the sink.

    SIGINT/SIGTERM (or ``stop.request()`` from another thread) stop the whole process group of
    ansible-playbook; the result then has status ``canceled`` and the signal. ``mask``: more
    values to scrub from the runner's folder afterwards (the inventory's passwords). Raises
    EnvironmentProblem when ansible-playbook could not start at all.
    """
    from ansible_runner import Runner, RunnerConfig

    own_stop = stop is None
    stop = stop or StopRequest()
    group: list[int] = []  # ansible-playbook's process group, learnt from its first event

    def handler(raw: dict) -> bool:
        if not group and isinstance(raw.get("pid"), int):
            try:
                pgid = os.getpgid(raw["pid"])
            except ProcessLookupError:
                pgid = None
            if pgid is not None and pgid != os.getpgrp():  # never our own group
                group.append(pgid)
        for ev in tracker.feed(raw):
            sink.emit(ev)
        return True

    stopping: list[float] = []

    def cancel() -> bool:
        if not stop.requested:
            return False
        if not stopping:
            stopping.append(time.monotonic())
            if not _signal_group(group, signal.SIGINT):
                return True  # nothing to ask politely: the runner kills its child's group now
        return time.monotonic() - stopping[0] >= GRACE_S or not _signal_group(group, 0)

    project = str(_playbooks())
    secrets = ExitStack()  # the credentials' file, removed in the finally below
    saved = os.environ.get("PATH")
    os.environ["PATH"] = job.envvars["PATH"]  # ansible-runner looks ansible-playbook up here
    started, before = time.time(), set(_children())
    reaper = _subreaper(True)
    try:
        config = RunnerConfig(
            private_data_dir=str(job.private_dir), project_dir=project, playbook=PLAYBOOK,
            inventory=secrets.enter_context(_secret_inventory(job)), envvars=job.envvars, forks=job.forks,
            quiet=True, ident=IDENT, suppress_env_files=True,
            settings={"suppress_ansible_output": True, "suppress_output_file": False, "pexpect_timeout": POLL_S})
        config.prepare()
        config.env = _without_controller_secrets(config.env, job.envvars)
        config.env["PATH"] = _dies_with_us(job.private_dir / "bin", job.envvars["PATH"]) + config.env["PATH"]
        runner = Runner(config, event_handler=handler, cancel_callback=cancel)
        if own_stop:
            with stop:
                runner.run()
        else:
            runner.run()
    finally:
        secrets.close()  # the credentials' file is gone before anything else
        shutil.rmtree(job.private_dir / "bin", ignore_errors=True)  # _dies_with_us's wrapper
        if saved is not None:
            os.environ["PATH"] = saved
        if stop.requested:
            _signal_group(group, signal.SIGKILL)  # whatever ignored SIGINT
            if reaper:
                _sweep_orphans(before, started)
        if reaper:
            _subreaper(False)
        _scrub(job.private_dir, mask)  # artifacts, inventory, leftovers in ansible's home
        control = Path(job.envvars.get("ANSIBLE_SSH_CONTROL_PATH_DIR", job.private_dir))
        if not control.resolve().is_relative_to(job.private_dir.resolve()):
            shutil.rmtree(control, ignore_errors=True)  # the short /tmp folder of a long run path
    result = RunResult(status=str(runner.status), rc=runner.rc, signum=stop.signum if stop.requested else None)
    if result.signum is None and (result.rc == 127 or (result.status == "failed" and not tracker.hosts)):
        stdout = ""
        try:
            stdout = Redactor().text(runner.stdout.read()[-2000:])
        except Exception:  # noqa: BLE001
            pass
        raise EnvironmentProblem(f"ansible-playbook did not run (rc {result.rc}): {stdout.strip()[-400:]}",
                                 hint="check that ansible-core is installed in this Python's environment")
    return result


_PDEATHSIG_WRAPPER = """#!{python}
# envbuild: ansible-playbook that gets SIGTERM when the envbuild process that started it ends,
# however it ends (a SIGKILL, an OOM kill): an orphaned playbook went on changing the nodes.
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != {parent}:
    sys.exit(143)  # envbuild ended before the line above: nothing would stop this playbook
os.execv({real!r}, [{real!r}, *sys.argv[1:]])
"""


def _dies_with_us(folder: Path, path: str) -> str:
    """A folder holding an ``ansible-playbook`` that runs the real one (found on ``path``) after
    asking Linux to end it when this process ends (PR_SET_PDEATHSIG, kept across exec), as
    ``os.pathsep``-ended text to put first on the runner's PATH; "" where that cannot be asked
    (not Linux, no ansible-playbook on ``path``: the runner then says so itself)."""
    real = shutil.which("ansible-playbook", path=path)
    if not sys.platform.startswith("linux") or real is None:
        return ""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "ansible-playbook"
    wrapper.write_text(_PDEATHSIG_WRAPPER.format(python=sys.executable, parent=os.getpid(), real=real))
    wrapper.chmod(0o700)
    return str(folder) + os.pathsep


def _without_controller_secrets(env: dict[str, str], ours: dict[str, str]) -> dict[str, str]:
    """ansible-runner's environment less the controller's secret-named variables (those it
    inherited unchanged from os.environ); ANSIBLE_* settings and envbuild's own stay."""
    return {k: v for k, v in env.items()
            if k in ours or k.startswith("ANSIBLE_") or not (is_secret_name(k) and os.environ.get(k) == v)}


def _signal_group(group: list[int], sig: int) -> bool:
    """Send ``sig`` (0: just look) to ansible-playbook's process group; False when it is gone."""
    for pgid in group:
        try:
            os.killpg(pgid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            continue
    return False


def _subreaper(on: bool) -> bool:
    """Make this process the child subreaper of its descendants (Linux prctl); False when the
    system does not offer it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _children() -> dict[int, float]:
    """{pid: start time in clock ticks} of this process's children (from /proc)."""
    me = os.getpid()
    return {pid: float(fields[19]) for pid, fields in stats().items() if int(fields[1]) == me}  # ppid, starttime


def _sweep_orphans(before: set[int], started: float) -> None:
    """Stop what the interrupted playbook left behind: processes that became our children (as
    subreaper) during the run, with their process groups; SIGTERM, then SIGKILL after GRACE_S."""
    tick = os.sysconf("SC_CLK_TCK")
    boot = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    deadline, seen = time.monotonic() + GRACE_S, set()
    while True:
        orphans = [pid for pid, start in _children().items()
                   if pid not in before and boot + start / tick >= started - 1]
        late = time.monotonic() >= deadline
        for pid in orphans:
            if pid in seen and not late:
                continue  # asked already: give it until the deadline
            sig = signal.SIGKILL if pid in seen else signal.SIGTERM
            seen.add(pid)
            for kill in (lambda: os.killpg(os.getpgid(pid), sig), lambda: os.kill(pid, sig)):  # noqa: B023 - called at once
                try:
                    kill()
                except (ProcessLookupError, PermissionError):
                    pass
        for pid in orphans:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if not orphans or time.monotonic() > deadline + GRACE_S:  # never hang on an unkillable one
            return
        time.sleep(0.1)


def _scrub(folder: Path, mask: set[str] | frozenset[str] = frozenset(), limit: int = 64 << 20) -> None:
    """Mask secret values and URL passwords in every text file under ``folder`` (the runner's
    private folder: what ansible-runner and ansible-playbook wrote); in JSON files (job events)
    also the values of secret-named environment variables (an action's ``env``)."""
    import json

    redactor = Redactor().add(mask)
    if not folder.is_dir():
        return
    for path in folder.rglob("*"):
        if not path.is_file() or path.is_symlink() or path.stat().st_size > limit:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        clean = redactor.text(text)
        if path.suffix == ".json":
            try:
                data = json.loads(clean)
            except ValueError:
                data = None
            if data is not None and (masked := redactor.obj(data)) != data:
                clean = json.dumps(masked)
        if clean != text:
            write_atomic(path, clean)


def _playbooks() -> Path:
    """The Ansible project folder; a clear error when its playbook or collection is missing."""
    if not (PLAYBOOKS / PLAYBOOK).is_file() or not (PLAYBOOKS / COLLECTION).is_dir() \
            or not (PLAYBOOKS / "ansible.cfg").is_file():
        raise EnvironmentProblem(
            f"the Ansible playbook, its config or its collection is not at {PLAYBOOKS} "
            f"(expected {PLAYBOOK}, ansible.cfg and {COLLECTION}/)",
            hint="reinstall envbuild (its wheel ships playbooks/ as envbuild/playbooks), or set ENVBUILD_PLAYBOOKS "
                 "to a folder holding provision.yml, ansible.cfg and ansible_collections/envbuild/node")
    return PLAYBOOKS
