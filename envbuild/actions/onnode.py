"""Run primitive actions on a node: the node-side half of ``envbuild.actions``.

Standard library only (it runs under the node's Python, shipped to Ansible as
``module_utils/envbuild_onnode.py``, a symlink to this file). Every action arrives as JSON
data (``envbuild.actions.model``): argv lists run without a shell, file contents are written
as they are, nothing is templated or evaluated.

``run_actions(actions, node_path=..., textpatch=..., repair=False)`` returns
``{"changed": bool, "log": [...]}`` or raises ``ActionFailed`` carrying the command, exit code
and output of the failing action. With ``repair`` (the step runs again because its effect did
not hold, decided on the node by ``node_state``), a ``run`` action's ``repair_args`` are added
to its argv (pip's ``--force-reinstall``: pip says "already satisfied" when a distribution's
metadata is there and its files are not; uv's ``--reinstall``).

A ``run`` action with ``log`` writes the command's stdout and stderr to that node file line by
line as it runs (the step's build log, tailed live for local nodes by
``envbuild.execute.livelog``). While actions run, SIGTERM, SIGHUP and SIGINT of the runner kill
the running command's whole process group before the runner ends (``_Interrupts``), and every
command carries PR_SET_PDEATHSIG (SIGKILL) for a runner killed outright.

The second half of the module checks the effects of plan steps (``check_effect``,
``node_state``, ``record_step``): what Ansible's ``envbuild_state`` module, the no-op probe of
``envbuild provision`` and ``envbuild verify`` run on the node.
"""
import os
import shutil
import signal
import subprocess
import threading
import time

LOG_TAIL_CHARS = 4000  # of each command's stdout kept in the step's log
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
            try:
                proc = _RUNNING.get(pg)
                if proc is not None:
                    proc.poll()  # reap the leader, so its group can be seen to go
                os.killpg(pg, 0)
            except OSError:
                groups.remove(pg)
        if groups:
            time.sleep(0.05)
    for pg in groups:
        try:
            os.killpg(pg, signal.SIGKILL)
        except OSError:
            pass


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
    def __init__(self, msg, cmd=None, rc=None, stdout="", stderr=""):
        Exception.__init__(self, msg)
        self.msg, self.cmd, self.rc, self.stdout, self.stderr = msg, cmd, rc, stdout, stderr


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


def do_run(a, node_path, repair=False, logs=None):
    env = _env(a.get("env"), a.get("path"), node_path)
    for name, sources in sorted((a.get("env_from") or {}).items()):
        if not env.get(name):  # unset on the node: the first of its sources that is set
            found = [env[s] for s in sources if env.get(s)]
            if found:
                env[name] = found[0]
    argv = list(a["argv"]) + (list(a.get("repair_args") or []) if repair else [])
    log = _open_log(a.get("log"), logs if logs is not None else set())
    try:
        if log is not None:
            log.write(("$ %s\n" % " ".join(argv)).encode("utf-8", "replace"))
            log.flush()
        rc, out, err = _call(argv, env, cwd=a.get("cwd"), log=log)
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
        _git_ok(["clone", "--quiet", "--no-checkout", src, work])
    else:
        _git_ok(["remote", "set-url", "origin", src], work)
    before = _git(["rev-parse", "HEAD"], work)[1]
    dirty = not fresh and bool(_git(["status", "--porcelain", "--untracked-files=no"], work)[1])
    if sha and not _has(work, sha):
        _git(["fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"], work)
        _git(["fetch", "--quiet", "origin", sha], work)
    rc, listed, _ = _git(["ls-remote", "origin", ref], work) if ref else (1, "", "")
    points = listed.split()[0] if rc == 0 and listed else None
    if sha and not _has(work, sha):
        if fresh:
            shutil.rmtree(work, ignore_errors=True)
        raise ActionFailed("commit %s is not in %s (ref %s points at %s)" % (sha, src, ref, points or "nothing"))
    want = sha or ("origin/" + ref if not _has(work, ref) else ref)
    _git_ok(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--force", want], work)
    head = _git_ok(["rev-parse", "HEAD"], work)
    if sha and head != sha:
        raise ActionFailed("after checkout HEAD is %s, expected %s" % (head, sha))
    if fresh:
        os.rename(work, dest)
    subs = update_submodules(dest, a.get("submodules") or [], a.get("submodule_mirrors") or {})
    note = "ref %s points at %s; using the pinned %s" % (ref, points, sha) if sha and points and points != sha else ""
    return fresh or dirty or before != head or subs, note


def update_submodules(repo, paths, mirrors):
    """``git submodule update --init <path>`` for each path, at the commit the tree records;
    ``mirrors`` maps a URL of .gitmodules to the mirror copy it is fetched from instead
    (``url.<mirror>.insteadOf``; file transport allowed for those). True when one changed."""
    if not paths:
        return False
    opts = []
    for url, mirror in sorted(mirrors.items()):
        opts += ["-c", "url.%s.insteadOf=%s" % (mirror, url)]
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


def do_patch(a, textpatch):
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


def do_capture(a, node_path):
    """Run with the env file sourced; keep <dir>/<name>.out|.err|.rc; report, never raise."""
    env = _env(a.get("env"), None, node_path)
    argv = ["sh", "-c", CAPTURE_SHELL, a.get("env_file") or "/nonexistent"] + list(a["argv"])
    rc, out, err = _call(argv, env, cwd=a["cwd"], timeout=int(a.get("timeout") or 1800))
    base = os.path.join(a["dir"], a["name"])
    _write(base + ".out", out, "0644")
    _write(base + ".err", err, "0644")
    _write(base + ".rc", "%d\n" % rc, "0644")
    return rc, err


def run_actions(actions, node_path=None, textpatch=None, repair=False):
    """Run node-side actions in order; see the module docstring. While they run, SIGTERM,
    SIGHUP and SIGINT kill the running command's process group first (``_Interrupts``)."""
    with _Interrupts():
        return _run_actions(actions, node_path, textpatch, repair)


def _run_actions(actions, node_path, textpatch, repair):
    changed, log, captured, logs = False, [], [], set()
    for a in actions:
        op = a["op"]
        if op == "run":
            did, out = do_run(a, node_path, repair, logs)
            changed = changed or did
            extra = a.get("repair_args") if repair else None
            log.append(("$ " + " ".join(list(a["argv"]) + list(extra or [])))[:300])
            if out.strip():  # the command's own output (tail), for the node's log
                log.append(out.strip()[-LOG_TAIL_CHARS:])
        elif op == "write":
            changed = _write(a["path"], a["content"], a.get("perm") or "0644") or changed
        elif op == "mkdir":
            if not os.path.isdir(a["path"]):
                os.makedirs(a["path"])
                changed = True
        elif op == "git":
            did, note = do_git(a)
            changed = changed or did
            if note:
                log.append(note)
        elif op == "patch":
            did, status = do_patch(a, textpatch)
            changed = changed or did
            log.append("patch %s: %s" % (a["spec"]["id"], status))
        elif op == "capture":
            rc, err = do_capture(a, node_path)
            changed = True
            captured.append((a["name"], rc, err))
        else:
            raise ActionFailed("action %r does not run on the node" % op)
    bad = [(n, rc, err) for n, rc, err in captured if rc != 0]
    if bad:
        parts = ["%s (exit %d%s): %s" % (n, rc, ", timed out" if rc == 124 else "",
                                         (err.strip().splitlines() or [""])[-1][:300]) for n, rc, err in bad]
        raise ActionFailed("smoke failed: " + "; ".join(parts), rc=bad[0][1], stderr=bad[0][2][-2000:])
    return {"changed": changed, "log": log}


# --- effects: is a step's result really on the node? ----------------------------------------
#
# ``check_effect(effect, ctx)`` interprets one effect of ``envbuild.actions.effects`` (data)
# and returns {"ok", "detail", "repair"}; ``repair`` says the step's normal actions would not
# fix it (a distribution whose metadata is there but whose files are not: pip would say
# "already satisfied"), so the step runs its actions' ``repair_args`` (--force-reinstall).
#
# Speed: a distribution's files are checked against ``<id>.manifest.json``, written when the
# step recorded its marker after every RECORD hash was checked: a file whose size, mtime and
# ctime equal the manifest's is not read; any other file is hashed against RECORD. ``deep``
# hashes every file (record time, ``envbuild verify --deep``).

import base64
import csv
import hashlib
import json

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
ENV_INFO = ("import json, sys, sysconfig; print(json.dumps({'sys_path': sys.path, "
            "'purelib': sysconfig.get_paths()['purelib'], 'prefix': sys.prefix}))")
MAX_LISTED = 5


def canonical_name(name):
    out, dash = [], False
    for ch in name.lower():
        if ch in "-_.":
            dash = True
            continue
        if dash and out:
            out.append("-")
        dash = False
        out.append(ch)
    return "".join(out)


class EffectContext(object):
    """Caches shared by the checks of one node: each environment's search path and
    distributions, the manifests recorded under the state folder."""

    def __init__(self, state_dir, textpatch=None, deep=False):
        self.state_dir, self.textpatch, self.deep = state_dir, textpatch, deep
        self._envs, self._dists = {}, {}

    def env(self, python):
        """{"ok", "sys_path", "purelib", "error"} of the environment of ``python``."""
        if python in self._envs:
            return self._envs[python]
        import sys
        import sysconfig

        if os.path.abspath(python) == os.path.abspath(sys.executable):
            info = {"ok": True, "sys_path": list(sys.path), "purelib": sysconfig.get_paths()["purelib"]}
        elif not os.path.isfile(python):
            info = {"ok": False, "error": "%s does not exist" % python}
        else:
            try:
                rc, out, err = _call([python, "-E", "-c", ENV_INFO], _env(None, None, None), timeout=120)
            except ActionFailed as exc:
                rc, out, err = 127, "", exc.msg
            if rc != 0:
                info = {"ok": False, "error": "%s does not run (exit %s): %s" % (python, rc, (err.strip().splitlines() or [""])[-1][:200])}
            else:
                try:
                    info = dict(json.loads(out.strip().splitlines()[-1]), ok=True)
                except (ValueError, IndexError):
                    info = {"ok": False, "error": "%s printed no environment description" % python}
        if info.get("ok"):
            info["sys_path"] = [p for p in info["sys_path"] if p and os.path.isdir(p)]
        self._envs[python] = info
        return info

    def dists(self, python):
        """{canonical name: (site dir, dist-info folder name, version)}, first on sys.path wins."""
        if python in self._dists:
            return self._dists[python]
        found = {}
        for site in self.env(python).get("sys_path", []):
            try:
                names = sorted(os.listdir(site))
            except OSError:
                continue
            for entry in names:
                if not entry.endswith((".dist-info", ".egg-info")):
                    continue
                meta = os.path.join(site, entry, "METADATA" if entry.endswith(".dist-info") else "PKG-INFO")
                if not os.path.isfile(meta) and entry.endswith(".egg-info"):
                    meta = os.path.join(site, entry)  # a single-file egg-info
                name, version = _metadata_head(meta)
                if name and canonical_name(name) not in found:
                    found[canonical_name(name)] = (site, entry, version)
        self._dists[python] = found
        return found

    def manifest(self, sid):
        if not sid:
            return None
        try:
            with open(os.path.join(self.state_dir, sid + ".manifest.json")) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None


def _metadata_head(path):
    name = version = None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
                elif not line.strip() or (name and version):
                    break
    except OSError:
        pass
    return name, version


def same_version(want, have):
    """``==want``: equal, or equal public part when ``want`` has no local label (2.1 vs 2.1+cpu),
    trailing ``.0`` ignored."""
    if want is None or want == have:
        return True
    if have is None:
        return False

    def norm(v):
        parts = v.lower().lstrip("v").split(".")
        while len(parts) > 1 and parts[-1] == "0":
            parts.pop()
        return ".".join(parts)

    public = have.split("+", 1)[0]
    return norm(want) == norm(have) or ("+" not in want and norm(want) == norm(public))


def _stat_key(st):
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _file_hash(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii")


def _record_rows(site, dist_info):
    """[(relative path, algo, digest, size)] of RECORD rows that carry a hash."""
    rows = []
    with open(os.path.join(site, dist_info, "RECORD"), newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            if len(row) < 3 or not row[1] or "=" not in row[1]:
                continue  # RECORD itself, .pyc written at install time: no hash recorded
            algo, digest = row[1].split("=", 1)
            rows.append((row[0], algo, digest, int(row[2]) if row[2].isdigit() else None))
    return rows


def check_record(site, dist_info, recorded=None, deep=False, excused=()):
    """(broken paths, files hashed, manifest entry) for one installed distribution.

    ``excused``: RECORD paths that the published wheel itself gets wrong (the effect's
    ``record_defects``); they must exist, their size and hash are not compared.

    ``recorded`` is this distribution's manifest entry; with it and not ``deep``, files whose
    stat is unchanged are trusted without reading RECORD."""
    record = os.path.join(site, dist_info, "RECORD")
    try:
        record_key = _stat_key(os.stat(record))
    except OSError:
        return ["%s/RECORD (missing)" % dist_info], 0, None
    if recorded and not deep and recorded.get("dist_info") == dist_info and recorded.get("site") == site \
            and recorded.get("record") == record_key:
        changed = _changed_files(site, recorded.get("files", []))
        if not changed:
            return [], 0, recorded
        trusted = set()
    else:
        changed = None
        trusted = set()
        if recorded and not deep and recorded.get("dist_info") == dist_info and recorded.get("site") == site:
            keys = dict((rel, [s, m, c]) for rel, s, m, c in recorded.get("files", []))
            trusted = set(rel for rel, key in keys.items()
                          if _stat_ok(os.path.join(site, rel), key))
    broken, hashed, files = [], 0, []
    only = set(changed) if changed is not None else None
    for rel, algo, digest, size in _record_rows(site, dist_info):
        path = os.path.normpath(os.path.join(site, rel))
        shown = rel if not rel.startswith("..") and not os.path.isabs(rel) else path
        try:
            st = os.stat(path)
        except OSError:
            broken.append(shown + " (missing)")
            continue
        files.append([rel] + _stat_key(st))
        if (only is not None and rel not in only) or rel in trusted or rel in excused:
            continue
        if size is not None and st.st_size != size:
            broken.append("%s (size %d, recorded %d)" % (shown, st.st_size, size))
            continue
        try:
            if _file_hash(path, algo) != digest:
                broken.append(shown + " (content differs from RECORD)")
            hashed += 1
        except (OSError, ValueError) as exc:
            broken.append("%s (%s)" % (shown, exc))
    entry = None if broken else {"site": site, "dist_info": dist_info, "record": record_key, "files": files}
    return broken, hashed, entry


def _changed_files(site, files):
    """Paths (relative to ``site``) of manifest rows [rel, size, mtime_ns, ctime_ns] whose file
    is gone or has another stat: the no-op's hot loop (one stat per file, nothing read)."""
    stat, changed = os.stat, []
    prefix = site.rstrip("/") + "/"
    for rel, size, mtime, ctime in files:
        try:
            st = stat(prefix + rel if not rel.startswith("/") else rel)
        except OSError:
            changed.append(rel)
            continue
        if st.st_size != size or st.st_mtime_ns != mtime or st.st_ctime_ns != ctime:
            changed.append(rel)
    return changed


def _stat_ok(path, key):
    try:
        return _stat_key(os.stat(path)) == key
    except OSError:
        return False


def _listed(items):
    more = len(items) - MAX_LISTED
    return ", ".join(items[:MAX_LISTED]) + (" and %d more" % more if more > 0 else "")


def _check_dists(eff, ctx, manifest):
    env = ctx.env(eff["python"])
    if not env.get("ok"):
        return {"ok": False, "detail": env.get("error", "no environment"), "repair": False}
    have = ctx.dists(eff["python"])
    problems, repair, entries, hashed = [], False, {}, 0
    recorded = (manifest or {}).get("dists") or {}
    for name, want in sorted(eff["dists"].items()):
        found = have.get(canonical_name(name))
        if found is None:
            problems.append("%s not installed" % name)
            continue
        site, dist_info, version = found
        if not same_version(want, version):
            problems.append("%s %s installed, want %s" % (name, version, want))
            continue
        if dist_info.endswith(".egg-info"):
            continue  # no RECORD to check: the version is all the evidence
        broken, n, entry = check_record(site, dist_info, recorded.get(name), ctx.deep,
                                        (eff.get("record_defects") or {}).get(name, ()))
        hashed += n
        if broken:
            repair = True
            problems.append("%s %s: %d file(s) differ from its RECORD: %s" % (name, version, len(broken), _listed(broken)))
        else:
            entries[name] = entry
    if problems:
        return {"ok": False, "detail": "; ".join(problems), "repair": repair}
    return {"ok": True, "detail": "%d distribution(s) intact%s" % (len(entries) or len(eff["dists"]),
                                                                 ", %d file(s) hashed" % hashed if hashed else ""),
            "repair": False, "manifest": {"dists": entries}}


def _check_source(eff, ctx, manifest):
    env = ctx.env(eff["python"])
    if not env.get("ok"):
        return {"ok": False, "detail": env.get("error", "no environment"), "repair": False}
    try:
        from urllib.parse import unquote
    except ImportError:  # pragma: no cover - Python 2
        from urllib import unquote
    want = os.path.normpath(eff["dest"])
    for name, (site, dist_info, version) in sorted(ctx.dists(eff["python"]).items()):
        try:
            with open(os.path.join(site, dist_info, "direct_url.json")) as fh:
                direct = json.load(fh)
        except (OSError, ValueError):
            continue
        url = str(direct.get("url") or "")
        if not url.startswith("file://") or os.path.normpath(unquote(url[7:])) != want:
            continue
        editable = bool((direct.get("dir_info") or {}).get("editable"))
        if editable != bool(eff["editable"]):
            return {"ok": False, "repair": True, "detail": "%s is installed from %s %s editable" % (
                name, want, "as" if editable else "but not as")}
        recorded = ((manifest or {}).get("dists") or {}).get(name)
        broken, hashed, entry = check_record(site, dist_info, recorded, ctx.deep)
        if broken:
            return {"ok": False, "repair": True, "detail": "%s %s: %d file(s) differ from its RECORD: %s" % (
                name, version, len(broken), _listed(broken))}
        return {"ok": True, "repair": False, "detail": "%s %s from %s" % (name, version, want),
                "manifest": {"dists": {name: entry}}}
    if eff["editable"]:  # a legacy ``setup.py develop`` install: <name>.egg-link + easy-install.pth
        on_path = want in [os.path.normpath(p) for p in env["sys_path"]]
        for site in env["sys_path"]:
            try:
                links = [n for n in os.listdir(site) if n.endswith(".egg-link")]
            except OSError:
                continue
            for link in links:
                try:
                    with open(os.path.join(site, link)) as fh:
                        target = os.path.normpath(fh.readline().strip())
                except OSError:
                    continue
                if target == want:
                    return {"ok": on_path, "repair": not on_path,
                            "detail": "%s links %s (develop install)%s" % (link, want, "" if on_path else
                                                                          " but it is not on sys.path")}
    return {"ok": False, "repair": False, "detail": "no installed distribution comes from %s" % want}


def _check_interpreter(eff, ctx):
    env = ctx.env(eff["python"])
    return {"ok": bool(env.get("ok")), "repair": False,
            "detail": "%s runs" % eff["python"] if env.get("ok") else env.get("error", "")}


def _check_file(eff, ctx):
    path = eff["path"]
    try:
        digest = _sha256_of(path)  # in blocks: the pushed uv binary is ~40 MB
        perm = "%04o" % (os.stat(path).st_mode & 0o7777)
    except OSError as exc:
        return {"ok": False, "repair": False, "detail": "%s: %s" % (path, exc.strerror)}
    if digest != eff["sha256"]:
        return {"ok": False, "repair": False, "detail": "%s differs from the planned text (sha256 %s, want %s)" % (
            path, digest[:12], eff["sha256"][:12])}
    if perm != eff.get("perm", perm):
        return {"ok": False, "repair": False, "detail": "%s has mode %s, want %s" % (path, perm, eff["perm"])}
    return {"ok": True, "repair": False, "detail": "%s as planned" % path}


def _check_pth(eff, ctx):
    env = ctx.env(eff["python"])
    if not env.get("ok"):
        return {"ok": False, "detail": env.get("error", "no environment"), "repair": False}
    path = os.path.join(env["purelib"], "envbuild-%s.pth" % eff["name"])
    try:
        with open(path) as fh:
            same = fh.read() == eff["content"]
    except OSError:
        return {"ok": False, "repair": False, "detail": "%s is missing" % path}
    return {"ok": same, "repair": False, "detail": "%s %s" % (path, "as planned" if same else "differs")}


def _check_patch(eff, ctx):
    spec = eff["spec"]
    path = os.path.join(eff["dest"], spec["file"])
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            text = fh.read()
    except OSError as exc:
        return {"ok": False, "repair": False, "detail": "patch %s: %s: %s" % (spec["id"], path, exc.strerror)}
    status, _ = ctx.textpatch.apply_text_patch(text, spec["kind"], spec.get("old") or None,
                                               spec.get("new") or None, int(spec.get("count") or 1))
    ok = status == "already-applied"
    return {"ok": ok, "repair": False,
            "detail": "patch %s %s" % (spec["id"], "applied" if ok else "not applied (%s)" % status)}


def _git_out(args, cwd):
    rc, out, err = _call(["git"] + list(args), _env(GIT_ENV, None, None), cwd=cwd, timeout=120)
    return rc, out, err


def _check_git(eff, ctx):
    dest, sha = eff["dest"], eff.get("sha")
    if not os.path.isdir(os.path.join(dest, ".git")):
        return {"ok": False, "repair": False, "detail": "%s is not a git tree" % dest}
    try:
        rc, head, err = _git_out(["rev-parse", "HEAD"], dest)
        if rc != 0:
            return {"ok": False, "repair": False, "detail": "git rev-parse in %s: %s" % (dest, err.strip()[:200])}
        head = head.strip()
        if sha and head != sha:
            return {"ok": False, "repair": False, "detail": "%s is at %s, want %s" % (dest, head[:12], sha[:12])}
        rc, out, err = _git_out(["status", "--porcelain=v1", "-z", "--untracked-files=no"], dest)
    except ActionFailed as exc:
        return {"ok": False, "repair": False, "detail": exc.msg}
    if rc != 0:
        return {"ok": False, "repair": False, "detail": "git status in %s: %s" % (dest, err.strip()[:200])}
    changed, parts, i = [], out.split("\0"), 0
    while i < len(parts):
        entry = parts[i]
        i += 1
        if len(entry) < 4:
            continue
        changed.append(entry[3:])
        if entry[0] in "RC":
            i += 1  # the rename's source path
    patched = []
    for spec in eff.get("patches") or []:
        if spec["file"] not in patched:
            patched.append(spec["file"])
    dirty = [p for p in changed if p not in patched]
    for rel in patched:
        rc, base, err = _git_out(["show", "%s:%s" % (head, rel)], dest)
        if rc != 0:
            dirty.append(rel + " (not in the commit)")
            continue
        want = base
        for spec in (s for s in eff["patches"] if s["file"] == rel):
            status, want = ctx.textpatch.apply_text_patch(want, spec["kind"], spec.get("old") or None,
                                                          spec.get("new") or None, int(spec.get("count") or 1))
        try:
            with open(os.path.join(dest, rel), encoding="utf-8", errors="surrogateescape") as fh:
                have = fh.read()
        except OSError:
            have = None
        if have != want and have is not None and have != base:
            dirty.append(rel + " (neither the commit's nor the patched text)")
        elif have is None:
            dirty.append(rel + " (missing)")
    if dirty:
        return {"ok": False, "repair": False, "detail": "%s has local changes: %s" % (dest, _listed(dirty))}
    return {"ok": True, "repair": False, "detail": "%s at %s, tracked files as planned" % (dest, head[:12])}


def _check_image(eff, ctx):
    """The engine has the image and it carries the planned labels (``<engine> image inspect``)."""
    tag = eff["tag"]
    try:
        rc, out, err = _call([eff["engine"], "image", "inspect", tag], _env(eff.get("env"), None, None), timeout=120)
    except ActionFailed as exc:
        return {"ok": False, "repair": False, "detail": exc.msg}
    if rc != 0:
        return {"ok": False, "repair": False, "detail": "%s has no image %s: %s" % (
            eff["engine"], tag, (err.strip().splitlines() or [""])[-1][:200])}
    try:
        data = json.loads(out)
        data = data[0] if isinstance(data, list) else data
        labels = (data.get("Config") or {}).get("Labels") or data.get("Labels") or {}
    except (ValueError, IndexError, AttributeError):
        return {"ok": False, "repair": False, "detail": "%s image inspect %s printed no image description" % (eff["engine"], tag)}
    wrong = ["%s=%s (want %s)" % (k, labels.get(k), v) for k, v in sorted(eff["labels"].items()) if labels.get(k) != v]
    if wrong:
        return {"ok": False, "repair": False, "detail": "image %s has other labels: %s" % (tag, _listed(wrong))}
    return {"ok": True, "repair": False, "detail": "image %s with %d planned label(s)" % (tag, len(eff["labels"]))}


def _check_exists(eff, ctx):
    path = eff["path"]
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        return {"ok": False, "repair": False, "detail": "%s: %s" % (path, exc.strerror)}
    return {"ok": size > 0, "repair": False, "detail": "%s (%d bytes)" % (path, size) if size else "%s is empty" % path}


def _check_files(eff, ctx):
    """Each file under ``dir`` with its size (and sha256 when ``ctx.deep``): a bundle's copy."""
    bad = []
    for rel, (size, sha) in sorted(eff["files"].items()):
        path = os.path.join(eff["dir"], rel)
        try:
            have = os.stat(path).st_size
        except OSError:
            bad.append(rel + " (missing)")
            continue
        if have != size:
            bad.append("%s (%d bytes, want %d)" % (rel, have, size))
        elif ctx.deep and _sha256_of(path) != sha:
            bad.append(rel + " (other content)")
    if bad:
        return {"ok": False, "repair": False, "detail": "%s: %s" % (eff["dir"], _listed(bad))}
    return {"ok": True, "repair": False, "detail": "%s: %d file(s)%s" % (
        eff["dir"], len(eff["files"]), ", sha256 checked" if ctx.deep else ", sizes checked")}


def _sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_effect(eff, ctx, sid=None):
    """One effect (``envbuild.actions.effects`` as data): {"ok", "detail", "repair"[, "manifest"]}."""
    kind = eff.get("check")
    try:
        if kind in ("dists", "source"):
            manifest = ctx.manifest(sid)
            if manifest is not None and manifest.get("effect") != eff:
                manifest = None  # recorded for another effect: trust none of its stats
            res = (_check_dists if kind == "dists" else _check_source)(eff, ctx, manifest)
            if res.get("manifest") is not None:
                res["manifest"]["effect"] = eff
                res["rewrite"] = res["manifest"] != manifest  # stats changed, contents verified
            return res
        if kind == "interpreter":
            return _check_interpreter(eff, ctx)
        if kind == "file":
            return _check_file(eff, ctx)
        if kind == "pth":
            return _check_pth(eff, ctx)
        if kind == "patch":
            return _check_patch(eff, ctx)
        if kind == "git":
            return _check_git(eff, ctx)
        if kind == "image":
            return _check_image(eff, ctx)
        if kind == "exists":
            return _check_exists(eff, ctx)
        if kind == "files":
            return _check_files(eff, ctx)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run does not hold (fail closed)
        return {"ok": False, "repair": False, "detail": "%s check failed: %s: %s" % (kind, type(exc).__name__, exc)}
    return {"ok": False, "repair": False, "detail": "unknown effect %r" % kind}


def state_dir_of(prefix):
    return os.path.join(os.path.expanduser(prefix), ".envbuild", "state")


def read_marker(state, sid):
    try:
        with open(os.path.join(state, sid + ".done")) as fh:
            return fh.read().strip()
    except OSError:
        return None


def node_state(prefix, steps, from_step=None, deep=False, textpatch=None, refresh=False):
    """Which plan steps must run: ``steps`` is ``[{id, digest, effect}]`` in plan order.

    The first step whose marker is missing or differs, whose effect does not hold, or that is
    ``from_step`` (``--from-step``/``--force``) runs again, with every step after it. Returns
    {"done", "pending", "repair", "effect_failed": {id: detail}, "reasons": {id: why},
    "effects": {id: {ok, detail}}, "prefix"}. Changes nothing on the node, except with
    ``refresh``: the manifest of a done step whose files were re-hashed (their stat changed,
    their content did not) is rewritten, so the next check reads none of them again."""
    state = state_dir_of(prefix)
    ctx = EffectContext(state, textpatch=textpatch, deep=deep)
    done, pending, repair, failed, reasons, results = [], [], [], {}, {}, {}
    first = None
    for step in steps:
        sid = step["id"]
        marker = read_marker(state, sid)
        marker_ok = marker is not None and marker == step.get("digest")
        res = check_effect(step["effect"], ctx, sid) if step.get("effect") else None
        if res is not None:
            results[sid] = {"ok": res["ok"], "detail": res["detail"]}
            if refresh and marker_ok and res["ok"] and res.get("rewrite"):
                _write_json(os.path.join(state, sid + ".manifest.json"), res["manifest"])
        effect_ok = res is None or res["ok"]
        if marker_ok and not effect_ok:
            failed[sid] = res["detail"]
        if first is None:
            if from_step is not None and sid == from_step:
                first, why = sid, "forced (--from-step/--force)"
            elif marker is None:
                first, why = sid, "no marker: never finished here"
            elif not marker_ok:
                first, why = sid, "its parameters changed (digest %s, recorded %s)" % (step.get("digest"), marker)
            elif not effect_ok:
                first, why = sid, "its effect does not hold: " + res["detail"]
            else:
                done.append(sid)
                continue
            reasons[sid] = why
        else:
            reasons[sid] = ("its effect does not hold: " + res["detail"]) if not effect_ok and marker_ok \
                else "runs after %s" % first
        pending.append(sid)
        if res is not None and not res["ok"] and res.get("repair"):
            repair.append(sid)
    return {"done": done, "pending": pending, "repair": repair, "effect_failed": failed,
            "reasons": reasons, "effects": results, "prefix": os.path.expanduser(prefix)}


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, separators=(",", ":"))
    os.replace(tmp, path)


def record_step(prefix, sid, digest, effect=None, textpatch=None):
    """After step ``sid`` ran: check its effect in full (every RECORD hash), keep the manifest
    that makes later checks fast, then write the marker. Raises ActionFailed when the effect
    does not hold: a step is never marked done on the strength of its exit code alone."""
    state = state_dir_of(prefix)
    if not os.path.isdir(state):
        os.makedirs(state)
    manifest_path = os.path.join(state, sid + ".manifest.json")
    detail = ""
    if effect:
        res = check_effect(effect, EffectContext(state, textpatch=textpatch, deep=True), sid)
        if not res["ok"]:
            raise ActionFailed("step %s ran but its effect does not hold: %s" % (sid, res["detail"]))
        detail = res["detail"]
        if res.get("manifest") is not None:
            _write_json(manifest_path, res["manifest"])
        elif os.path.exists(manifest_path):
            os.remove(manifest_path)
    path = os.path.join(state, sid + ".done")
    with open(path + ".tmp", "w") as fh:
        fh.write(digest + "\n")
    os.replace(path + ".tmp", path)
    return detail
