"""Run primitive actions on a node: the node-side half of ``envbuild.actions``.

Standard library only (it runs under the node's Python, shipped to Ansible as
``module_utils/envbuild_onnode.py``, a symlink to this file). Every action arrives as JSON
data (``envbuild.actions.model``): argv lists run without a shell, file contents are written
as they are, nothing is templated or evaluated.

``run_actions(actions, node_path=..., textpatch=...)`` returns ``{"changed": bool, "log": [...]}``
or raises ``ActionFailed`` carrying the command, exit code and output of the failing action.
"""
import os
import shutil
import signal
import subprocess

CAPTURE_SHELL = 'if [ -f "$0" ]; then . "$0"; fi; exec "$@"'


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


def _call(argv, env, cwd=None, timeout=None):
    """(rc, stdout, stderr); a timeout kills the whole process group and gives rc 124."""
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:  # the program or the folder does not exist
        what = argv[0] if not cwd or os.path.isdir(cwd) else "folder " + cwd
        raise ActionFailed("cannot run %s: %s not found on the node (%s)" % (argv[0], what, exc.strerror),
                           cmd=list(argv), rc=127)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = 124
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass
        raise
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


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


def do_run(a, node_path):
    env = _env(a.get("env"), a.get("path"), node_path)
    rc, out, err = _call(a["argv"], env, cwd=a.get("cwd"))
    if rc != 0:
        raise ActionFailed("command failed (exit %s): %s" % (rc, (err.strip() or out.strip())[-600:]),
                           cmd=a["argv"], rc=rc, stdout=out, stderr=err)
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
    note = "ref %s points at %s; using the pinned %s" % (ref, points, sha) if sha and points and points != sha else ""
    return fresh or before != head, note


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


def run_actions(actions, node_path=None, textpatch=None):
    """Run node-side actions in order; see the module docstring."""
    changed, log, captured = False, [], []
    for a in actions:
        op = a["op"]
        if op == "run":
            did, out = do_run(a, node_path)
            changed = changed or did
            log.append("$ " + " ".join(a["argv"])[:300])
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
