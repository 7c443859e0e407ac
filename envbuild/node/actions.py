"""Run primitive actions on a node: the node-side half of ``envbuild.actions``.

Standard library only (it runs under the node's Python, in Ansible's module_utils: see
``envbuild/node/__init__.py``). Every action arrives as JSON
data (``envbuild.actions.model``): argv lists run without a shell, file contents are written
as they are, nothing is templated or evaluated.

``run_actions(actions, node_path=..., repair=False)`` returns
``{"changed": bool, "log": [...]}`` or raises ``ActionFailed`` carrying the command, exit code
and output of the failing action. With ``repair`` (the step runs again because its effect did
not hold, decided on the node by ``node_state``), a ``run`` action's ``repair_args`` are added
to its argv (pip's ``--force-reinstall``: pip says "already satisfied" when a distribution's
metadata is there and its files are not; uv's ``--reinstall``).

Two callers, one implementation of each action: Ansible's ``envbuild_actions`` module, and the
node tool (``__main__.py``) that run.sh, Dockerfiles and Apptainer definitions call with an
action file (``envbuild.render.shell``).

A ``run`` action with ``log`` writes the command's stdout and stderr to that node file line by
line as it runs (the step's build log, tailed live for local nodes by
``envbuild.execute.livelog``). While actions run, SIGTERM, SIGHUP and SIGINT of the runner kill
the running command's whole process group before the runner ends (``_Interrupts``), and every
command carries PR_SET_PDEATHSIG (SIGKILL) for a runner killed outright.

The effects of plan steps are checked by ``effects.py`` (``check_effect``) and
``state.py`` (``node_state``, ``record_step``), shipped beside this file.
"""
import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time

from . import textpatch

LOG_TAIL_CHARS = 4000  # of each command's stdout kept in the step's log
# The node tool's output (its stdout, binary; None under Ansible): a run without a build log of
# its own, and a wheel build, write their command line and each line of their output there as
# it comes (run.sh and an image build show a build as it goes); the batch's log leaves them out.
ECHO = None
CAPTURE_SHELL = 'if [ -f "$0" ]; then . "$0"; fi; exec "$@"'

# --- interrupts: a command never outlives the runner -----------------------------------------
#
# Commands start in their own session (their own process group), so a signal meant for the
# runner (Ansible's module process: SIGTERM when a run is stopped, SIGHUP when the SSH session
# goes, SIGINT) does not reach them by itself. While ``run_actions`` runs, handlers for those
# signals kill the process group of every command still running (SIGTERM, SIGKILL after
# KILL_GRACE_S), then let the signal act as it would have (the previous handler, or the default:
# the runner ends by the signal). A runner killed with SIGKILL runs no handler: each command is
# started with PR_SET_PDEATHSIG (Linux prctl through ctypes, where available), so the kernel
# sends it SIGKILL when the runner dies; what that command started itself in its group is
# reached only by the handlers.

KILL_GRACE_S = 3.0
INTERRUPTS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, n))
_RUNNING = {}  # pid -> Popen of the commands running now (each leads its own process group)
_PR_SET_PDEATHSIG = 1


def _prctl():
    """libc's prctl, resolved in the runner (never in the forked child); None off Linux."""
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl
    except Exception:  # noqa: BLE001 - no ctypes, no libc, not Linux: the handlers alone
        return None


_PRCTL = _prctl() if os.uname()[0] == "Linux" else None


def _child_setup():
    """In the child, before exec: SIGKILL when the runner dies (the fallback of the handlers)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def kill_running(grace=KILL_GRACE_S):
    """SIGTERM the process group of every running command, SIGKILL what is left after ``grace``."""
    groups = list(_RUNNING)
    for pg in groups:
        try:
            os.killpg(pg, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + grace
    while groups and time.time() < deadline:
        for pg in list(groups):
            if _group_gone(pg, _RUNNING.get(pg)):
                groups.remove(pg)
        if groups:
            time.sleep(0.05)
    for pg in groups:
        try:
            os.killpg(pg, signal.SIGKILL)
        except OSError:
            pass


def _group_gone(pg, proc=None):
    """Whether process group ``pg`` has no live process left. A member that has exited but is
    not reaped yet (a zombie) is gone: the handler runs while the code it interrupted waits for
    the command (``proc.wait()`` holds Popen's lock, so ``proc.poll()`` cannot reap the leader
    here), and counting its zombie made every interrupt wait out KILL_GRACE_S. Zombies are told
    from /proc, where it shows this process's own PID namespace; elsewhere only ``killpg``."""
    if proc is not None:
        proc.poll()  # reaps the leader where the interrupted code holds no lock
    try:
        os.killpg(pg, 0)
    except OSError:
        return True
    states = _group_states(pg)
    return states is not None and all(state in ("Z", "X") for state in states)


def _group_states(pg):
    """The states (R, S, Z, ...) of the processes of group ``pg`` as /proc shows them; None when
    /proc cannot be read or is not this process's PID namespace's."""
    try:
        with open("/proc/self/stat") as fh:
            if int(fh.read().split(None, 1)[0]) != os.getpid():
                return None
        names = os.listdir("/proc")
    except (OSError, ValueError):
        return None
    states = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone while the folder was read
        if int(fields[2]) == pg:
            states.append(fields[0])
    return states


class _Interrupts(object):
    """While active: INTERRUPTS kill the running commands' groups first (see above)."""

    def __init__(self):
        self.previous = {}

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers live in the main thread only
        for sig in INTERRUPTS:
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):
                pass
        return self

    def __exit__(self, *exc):
        for sig, old in self.previous.items():
            signal.signal(sig, old)
        self.previous = {}
        return False

    def _handle(self, signum, frame):
        kill_running()
        old = self.previous.get(signum)
        self.__exit__()
        if callable(old):
            old(signum, frame)  # e.g. Python's KeyboardInterrupt for SIGINT
        elif old != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)  # end by the signal, as without the handler


class ActionFailed(Exception):
    def __init__(self, msg, cmd=None, rc=None, stdout="", stderr="", captured=None):
        Exception.__init__(self, msg)
        self.msg, self.cmd, self.rc, self.stdout, self.stderr = msg, cmd, rc, stdout, stderr
        self.captured = captured or {}  # {file: sha256} of the batch's captured outputs


def _env(extra, path, node_path):
    env = dict(os.environ)
    env.update(extra or {})
    base = node_path or env.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
    if path:
        env["PATH"] = ":".join(list(path) + [base])
    elif node_path:
        env["PATH"] = node_path
    return env


def _call(argv, env, cwd=None, timeout=None, log=None):
    """(rc, stdout, stderr); a timeout kills the whole process group and gives rc 124.

    ``log``: an open binary file that gets every line of stdout and stderr as it comes (the
    step's build log, see ``_open_log``)."""
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=_child_setup)
    except OSError as exc:  # the program or the folder does not exist
        what = argv[0] if not cwd or os.path.isdir(cwd) else "folder " + cwd
        raise ActionFailed("cannot run %s: %s not found on the node (%s)" % (argv[0], what, exc.strerror),
                           cmd=list(argv), rc=127)
    _RUNNING[proc.pid] = proc
    try:
        try:
            out, err = _communicate(proc, timeout, log)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = _communicate(proc, None, log)
            rc = 124
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass
        raise
    finally:
        _RUNNING.pop(proc.pid, None)
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _communicate(proc, timeout, log):
    """proc.communicate, or with ``log``: both pipes read line by line by two threads, each
    line written to ``log`` (flushed) as it arrives."""
    if log is None:
        return proc.communicate(timeout=timeout)
    chunks = {"out": [], "err": []}
    lock = threading.Lock()

    def pump(stream, key):
        for line in iter(stream.readline, b""):
            chunks[key].append(line)
            with lock:
                try:
                    log.write(line)
                    log.flush()
                except (OSError, ValueError):
                    pass
        stream.close()

    readers = [threading.Thread(target=pump, args=(proc.stdout, "out")),
               threading.Thread(target=pump, args=(proc.stderr, "err"))]
    for t in readers:
        t.daemon = True
        t.start()
    proc.wait(timeout=timeout)  # TimeoutExpired: the caller kills the group, then calls again
    for t in readers:
        t.join()
    return b"".join(chunks["out"]), b"".join(chunks["err"])


def _open_log(path, opened):
    """The build log at ``path``: truncated the first time a run of this batch writes it
    (``opened`` holds those paths), appended to after; None when it cannot be opened (the
    command runs anyway, its output still kept in the step's log)."""
    if not path:
        return None
    try:
        folder = os.path.dirname(path)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder)
        fh = open(path, "ab" if path in opened else "wb")
    except OSError:
        return None
    opened.add(path)
    return fh


def _write(path, content, mode):
    """Write atomically; True when the file changed."""
    data = content.encode("utf-8")
    try:
        with open(path, "rb") as fh:
            same = fh.read() == data
    except OSError:
        same = False
    if not isinstance(mode, str):
        raise ActionFailed("file mode of %s must be an octal string, got %r (%s)" % (path, mode, type(mode).__name__))
    want = int(mode, 8)
    if same and (os.stat(path).st_mode & 0o7777) == want:
        return False
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".envbuild-tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, want)
    os.replace(tmp, path)
    return True


def _sha256_file(path):  # observe.sha256_file's, here: the node tool carries no observe.py
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _place(src, path, mode, sha256):
    """Put the node file ``src`` (what ``envbuild_put`` transferred) at ``path`` with ``mode``,
    its bytes checked against ``sha256`` first (a mismatch fails, ``path`` untouched); written
    atomically. True when ``path`` changed; False when it held those bytes and mode already."""
    if not isinstance(mode, str):
        raise ActionFailed("file mode of %s must be an octal string, got %r (%s)" % (path, mode, type(mode).__name__))
    want = int(mode, 8)
    got = _sha256_file(src)
    if got != sha256:
        raise ActionFailed("%s arrived with sha256 %s, not the %s sent: %s left as it was" % (src, got, sha256, path))
    try:
        same = _sha256_file(path) == sha256 and (os.stat(path).st_mode & 0o7777) == want
    except OSError:
        same = False
    if same:
        return False
    tmp = path + ".envbuild-tmp"
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, want)
        os.replace(tmp, path)
    except (OSError, shutil.Error) as exc:  # disk full, a folder at path...: nothing half-written
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ActionFailed("placing %s failed: %s: %s" % (path, type(exc).__name__, exc))
    return True


def do_run(a, node_path, repair=False, logs=None):
    env = _env(a.get("env"), a.get("path"), node_path)
    for name, sources in sorted((a.get("env_from") or {}).items()):
        if not env.get(name):  # unset on the node: the first of its sources that is set
            found = [env[s] for s in sources if env.get(s)]
            if found:
                env[name] = found[0]
    argv = list(a["argv"]) + (list(a.get("repair_args") or []) if repair else [])
    log = _open_log(a.get("log"), logs if logs is not None else set())
    stream = log if log is not None else ECHO
    try:
        if stream is not None:
            stream.write(("$ %s\n" % " ".join(argv)).encode("utf-8", "replace"))
            stream.flush()
        rc, out, err = _call(argv, env, cwd=a.get("cwd"), log=stream)
    finally:
        if log is not None:
            log.close()
    if rc != 0:
        raise ActionFailed("command failed (exit %s): %s" % (rc, (err.strip() or out.strip())[-600:]),
                           cmd=argv, rc=rc, stdout=out, stderr=err)
    if a.get("stdout"):
        _write(a["stdout"], out, "0644")
    return a.get("changes", True), out


def _git(args, cwd=None):
    rc, out, err = _call(["git"] + list(args), _env({"GIT_TERMINAL_PROMPT": "0"}, None, None), cwd=cwd)
    return rc, out.strip(), err.strip()


def _git_ok(args, cwd=None):
    rc, out, err = _git(args, cwd)
    if rc != 0:
        raise ActionFailed("git %s failed: %s" % (" ".join(args), err or out), cmd=["git"] + list(args),
                           rc=rc, stdout=out, stderr=err)
    return out


def _call_git_input(args, text, cwd):
    """``git args`` with ``text`` on its standard input; ActionFailed when it fails."""
    proc = subprocess.run(["git"] + list(args), input=text, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True,
                          env=_env({"GIT_TERMINAL_PROMPT": "0"}, None, None))
    if proc.returncode != 0:
        raise ActionFailed("git %s failed: %s" % (" ".join(args), proc.stderr.strip() or proc.stdout.strip()),
                           cmd=["git"] + list(args), rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


# Every object a clone or fetch receives is hashed and checked (issue 41): the git transport, never
# the local copy of objects/ that `git clone PATH` does (it takes a loose object by its name, so
# a forged one under the pinned tree's name would be checked out), and fsck of what arrives.
VERIFY = ["-c", "transfer.fsckObjects=true"]


def _transport_url(url):
    """A local path as a file:// URL: git's own transport (objects sent as a pack and hashed on
    arrival), not a copy of the folder's objects."""
    return "file://" + os.path.abspath(url) if os.path.isabs(url) or os.path.isdir(url) else url


def _rehash_objects(repo):
    """Every object of ``repo`` read back and hashed: its name must be the hash of its content
    (a clone that copied objects, as git does from a local folder, took them by name)."""
    proc = subprocess.Popen(["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env({"GIT_TERMINAL_PROMPT": "0"}, None, None))
    bad = []
    count = 0
    while True:
        header = proc.stdout.readline()
        if not header:
            break
        name, kind, size = header.decode("ascii", "replace").split()
        body = proc.stdout.read(int(size))
        proc.stdout.read(1)  # the line break after the content
        count += 1
        digest = hashlib.sha1 if len(name) == 40 else hashlib.sha256
        if digest(b"%s %d\0" % (kind.encode(), len(body)) + body).hexdigest() != name:
            bad.append("%s %s" % (kind, name))
    err = proc.stderr.read().decode("utf-8", "replace")
    if proc.wait() != 0:
        raise ActionFailed("git cat-file of %s failed: %s" % (repo, err.strip()[-400:]))
    if bad:
        raise ActionFailed("%d of %d objects in the copy at %s do not hash to their names (a forged or "
                           "corrupt copy): %s" % (len(bad), count, repo, ", ".join(bad[:5])))


def _has(repo, rev):
    return _git(["cat-file", "-e", rev + "^{commit}"], repo)[0] == 0


def do_git(a):
    """A tree at ``dest`` on the exact commit. A fresh clone goes to ``<dest>.partial`` and is
    renamed only once HEAD is the pinned SHA, so a killed clone leaves nothing at dest."""
    dest, sha, ref, src = a["dest"], a.get("sha"), a.get("ref"), a["fetch_url"]
    fresh = not os.path.isdir(os.path.join(dest, ".git"))
    work = dest + ".partial" if fresh else dest
    if fresh:
        if os.path.exists(dest) and os.listdir(dest):
            raise ActionFailed("%s exists and is not a git tree; move it away" % dest)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(os.path.dirname(work) or ".", exist_ok=True)
        if a.get("without"):  # a copy lacking documents by design: git's transport refuses missing objects
            _git_ok(["clone", "--quiet", "--no-checkout", "--", src, work])
            try:
                _rehash_objects(work)
            except ActionFailed:
                shutil.rmtree(work, ignore_errors=True)
                raise
        else:
            _git_ok(VERIFY + ["clone", "--quiet", "--no-checkout", "--no-local", "--", src, work])
    else:
        _git_ok(["remote", "set-url", "origin", src], work)
    before = _git(["rev-parse", "HEAD"], work)[1]
    dirty = not fresh and bool(_git(["status", "--porcelain", "--untracked-files=no"], work)[1])
    if sha and not _has(work, sha):
        _git(VERIFY + ["fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"],
             work)
        _git(VERIFY + ["fetch", "--quiet", "origin", "--", sha], work)
    rc, listed, _ = _git(["ls-remote", "origin", "--", ref], work) if ref else (1, "", "")
    points = listed.split()[0] if rc == 0 and listed else None
    if sha and not _has(work, sha):
        if fresh:
            shutil.rmtree(work, ignore_errors=True)
        raise ActionFailed("commit %s is not in %s (ref %s points at %s)" % (sha, src, ref, points or "nothing"))
    want = sha or ("origin/" + ref if not _has(work, ref) else ref)
    if a.get("without"):  # documents the source's copy lacks: a sparse checkout leaves them out
        patterns = ["/*"] + ["!/" + p for p in a["without"]]
        _call_git_input(["sparse-checkout", "set", "--no-cone", "--stdin"], "\n".join(patterns) + "\n", work)
    _git_ok(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--force", want], work)
    head = _git_ok(["rev-parse", "HEAD"], work)
    if sha and head != sha:
        raise ActionFailed("after checkout HEAD is %s, expected %s" % (head, sha))
    if fresh:
        os.rename(work, dest)
    if a.get("url") and a["url"] != src:  # origin names the source, not the copy it came from
        _git_ok(["remote", "set-url", "origin", a["url"]], dest)
    subs = update_submodules(dest, a.get("submodules") or [], a.get("submodule_mirrors") or {})
    note = "ref %s points at %s; using the pinned %s" % (ref, points, sha) if sha and points and points != sha else ""
    return fresh or dirty or before != head or subs, note


def update_submodules(repo, paths, mirrors):
    """``git submodule update --init <path>`` for each path, at the commit the tree records;
    ``mirrors`` maps a URL of .gitmodules to the mirror copy it is fetched from instead
    (``url.<mirror>.insteadOf``; file transport allowed for those). True when one changed."""
    if not paths:
        return False
    opts = list(VERIFY)
    for url, mirror in sorted(mirrors.items()):
        opts += ["-c", "url.%s.insteadOf=%s" % (_transport_url(mirror), url)]
    if mirrors:  # git refuses file transport for submodules unless allowed
        opts = ["-c", "protocol.file.allow=always"] + opts
    changed = False
    for path in paths:
        sub = os.path.join(repo, path)
        before = _git(["rev-parse", "HEAD"], sub)[1] if os.path.exists(os.path.join(sub, ".git")) else None
        _git_ok(opts + ["submodule", "update", "--init", "--", path], repo)
        after = _git(["rev-parse", "HEAD"], sub)[1]
        changed = changed or before != after
    return changed


def do_patch(a):
    spec = a["spec"]
    path = os.path.join(a["dest"], spec["file"])
    try:
        with open(path) as fh:
            before = fh.read()
    except OSError as exc:
        raise ActionFailed("patch %s: cannot read %s: %s" % (spec["id"], path, exc))
    status, after = textpatch.apply_text_patch(before, spec["kind"], spec.get("old") or None,
                                               spec.get("new") or None, int(spec.get("count") or 1))
    if status.startswith("failed"):
        raise ActionFailed("patch %s on %s: %s" % (spec["id"], spec["file"], status))
    if after == before:
        return False, status
    diff = textpatch.unified_diff(before, after, spec["file"])
    mode = "%o" % (os.stat(path).st_mode & 0o7777)
    _write(path, after, mode)
    _write(os.path.join(a["diff_dir"], spec["id"] + ".diff"), diff, "0644")
    return True, status


def do_wheel(a, node_path, logs=None):
    """Build a wheel: ``argv`` in ``cwd`` (with ``env`` and ``path``, as a ``run``) into
    ``outdir``, made first; a build that leaves no wheel there fails. Which node builds the wheel
    of a ``cache_key`` is the controller's choice (Ansible's wheel.yml and its wheel cache)."""
    outdir = a["outdir"]
    if not os.path.isdir(outdir):
        os.makedirs(outdir)
    _, out = do_run({"argv": a["argv"], "cwd": a.get("cwd"), "env": a.get("env"), "path": a.get("path"),
                     "log": a.get("log")}, node_path, False, logs)
    wheels = sorted(n for n in os.listdir(outdir) if n.endswith(".whl"))
    if not wheels:
        raise ActionFailed("the build produced no wheel in %s" % outdir, cmd=list(a["argv"]), stdout=out)
    return wheels, out


def do_capture(a, node_path):
    """Run with the env file sourced; keep <dir>/<name>.out|.err|.rc; report, never raise.
    Returns the exit code, stderr and ``{file: sha256}`` of the three files as written (what
    ``envbuild_fetch`` checks the controller's copies against)."""
    env = _env(a.get("env"), None, node_path)
    argv = ["sh", "-c", CAPTURE_SHELL, a.get("env_file") or "/nonexistent"] + list(a["argv"])
    rc, out, err = _call(argv, env, cwd=a["cwd"], timeout=int(a.get("timeout") or 1800))
    base = os.path.join(a["dir"], a["name"])
    digests = {}
    for path, text in ((base + ".out", out), (base + ".err", err), (base + ".rc", "%d\n" % rc)):
        _write(path, text, "0644")
        digests[path] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return rc, err, digests


def _echoed(a):
    """Whether the command of ``a`` wrote its output to ``ECHO`` as it ran."""
    return ECHO is not None and not a.get("log")


def run_actions(actions, node_path=None, repair=False):
    """Run node-side actions in order; see the module docstring. While they run, SIGTERM,
    SIGHUP and SIGINT kill the running command's process group first (``_Interrupts``)."""
    with _Interrupts():
        return _run_actions(actions, node_path, repair)


def _run_actions(actions, node_path, repair):
    digests = {}  # {file: sha256} of what the batch's captures wrote, also when a later action fails
    try:
        return _run_each(actions, node_path, repair, digests)
    except ActionFailed as exc:
        exc.captured = exc.captured or dict(digests)
        raise


def _run_each(actions, node_path, repair, digests):
    changed, log, captured, logs = False, [], [], set()
    for a in actions:
        op = a["op"]
        if op == "run":
            did, out = do_run(a, node_path, repair, logs)
            changed = changed or did
            extra = a.get("repair_args") if repair else None
            if not _echoed(a):
                log.append(("$ " + " ".join(list(a["argv"]) + list(extra or [])))[:300])
                if out.strip():  # the command's own output (tail), for the node's log
                    log.append(out.strip()[-LOG_TAIL_CHARS:])
        elif op == "write":
            changed = _write(a["path"], a["content"], a.get("perm") or "0644") or changed
        elif op == "place":
            changed = _place(a["src"], a["path"], a.get("perm") or "0644", a["sha256"]) or changed
        elif op == "mkdir":
            if not os.path.isdir(a["path"]):
                os.makedirs(a["path"])
                changed = True
        elif op == "git":
            did, note = do_git(a)
            changed = changed or did
            if note:
                log.append(note)
        elif op == "wheel":
            wheels, out = do_wheel(a, node_path, logs)
            changed = True
            if not _echoed(a):
                log.append(("$ " + " ".join(a["argv"]))[:300])
                if out.strip():  # the build's own output (tail), as a run's
                    log.append(out.strip()[-LOG_TAIL_CHARS:])
            log.append("wheel: %s" % ", ".join(wheels))
        elif op == "patch":
            did, status = do_patch(a)
            changed = changed or did
            log.append("patch %s: %s" % (a["spec"]["id"], status))
        elif op == "capture":
            rc, err, written = do_capture(a, node_path)
            changed = True
            captured.append((a["name"], rc, err))
            digests.update(written)
        else:
            raise ActionFailed("action %r does not run on the node" % op)
    bad = [(n, rc, err) for n, rc, err in captured if rc != 0]
    if bad:
        parts = ["%s (exit %d%s): %s" % (n, rc, ", timed out" if rc == 124 else "",
                                         (err.strip().splitlines() or [""])[-1][:300]) for n, rc, err in bad]
        raise ActionFailed("smoke failed: " + "; ".join(parts), rc=bad[0][1], stderr=bad[0][2][-2000:],
                           captured=digests)
    return {"changed": changed, "log": log, "captured": digests}
