"""A source's in-tree build outputs, kept once per cache key and restored on the next node.

Standard library only, under the package's floor (``envbuild/node/__init__.py``). A recipe's
source names what its build commands write inside its tree (``build_outputs``: Megatron's fused
kernels, torch's JIT build folder ``megatron/fused_kernels/build``); the planner keys them by
everything they depend on (``envbuild.plan.build``: commit, patches, commands, torch, CUDA,
archs, Python, the tree's path). Around the build commands, the executor with a build cache
(Ansible's tree.yml) calls:

* ``restore(stash, root, outputs)`` before them: where the controller's cache held an archive of
  the key (copied to ``stash``), its files replace the outputs, with the modification times
  they had when they were built; every other file of the tree that is newer than the build's
  start (``STARTED``, which restore stamped beside the stash where nothing was cached, and save
  archived) or the oldest of them gets that time less one second. Not the oldest output alone:
  ninja's log records each command's start, not its output's time, and a first module's
  sources dated after its command began are newer than its log says (run 17: ninja rebuilt the
  first of Megatron's three modules). The tree's files are those of the key's commit and
  patches, which the outputs were built from; only their checkout here is newer. A build tool
  that decides by time (ninja, make) then finds the outputs up to date, and one that also
  compares its recorded command lines (ninja's log, restored with the folder) rebuilds where
  they differ: the build commands always run after a restore.
* ``save(stash, root, outputs)`` after them: where the archive was restored, which of its files
  the commands changed (none: the restore saved the build; some: it saved less or nothing);
  where nothing was restored and the commands made every output, an archive of them (with
  ``MTIMES``, their times in nanoseconds) at ``stash``, which the executor brings to its cache;
  a build that made none (no GPU: the fused kernels are left to the first start) saves nothing
  and says so.

An archive holds regular files and folders under the outputs only: a member elsewhere, a link,
a device, or a time recorded for a path that is not one of its files is refused before anything is
written. Neither call goes through a link: an output, or a folder above it, that resolves outside
the tree is refused (a checkout's link would carry the writes, or the archive's reads, elsewhere).
"""
import io
import json
import os
import shutil
import tarfile
import time

MTIMES = ".envbuild-mtimes.json"  # the archive's member with each file's mtime in nanoseconds
STARTED = ".envbuild-build-started"  # the archive's member with the time its build began, in ns
SECOND_NS = 1000000000


class TreeCacheError(Exception):
    pass


def _inside(name, outputs):
    """Whether the archive member ``name`` lies under one of ``outputs`` (relative paths)."""
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or "" in parts or "." in parts:
        return False
    return any(name == o or name.startswith(o.rstrip("/") + "/") for o in outputs)


def _check_paths(root, outputs):
    """Refuse an output that is a link, or whose folders resolve outside ``root``."""
    top = os.path.realpath(root)
    for o in outputs:
        path = os.path.join(root, o)
        parent = os.path.realpath(os.path.dirname(path))
        if parent != top and not parent.startswith(top.rstrip(os.sep) + os.sep):
            raise TreeCacheError("%s: the folder of build output %s resolves to %s, outside the tree"
                                 % (root, o, parent))
        if os.path.islink(path):
            raise TreeCacheError("%s: build output %s is a link (to %s)" % (root, o, os.readlink(path)))


def _files(root, outputs):
    """The regular files under ``outputs`` of ``root``, as relative paths."""
    out = []
    for o in outputs:
        path = os.path.join(root, o)
        if os.path.isfile(path) and not os.path.islink(path):
            out.append(o)
        for folder, dirs, names in os.walk(path):
            dirs.sort()
            for n in sorted(names):
                full = os.path.join(folder, n)
                if os.path.isfile(full) and not os.path.islink(full):
                    out.append(os.path.relpath(full, root))
    return out


def save(stash, root, outputs):
    """Archive the outputs at ``stash`` when the build made all of them and none was restored;
    returns what it did, in words."""
    if os.path.exists(stash):
        return "build outputs: the cached archive %s stays (restored before the build); %s" % (
            os.path.basename(stash), _rebuilt(stash, root))
    _check_paths(root, outputs)
    started = _take_stamp(stash)
    missing = [o for o in outputs if not os.path.exists(os.path.join(root, o))]
    if missing:
        return "build outputs: not saved, the build made no %s" % ", ".join(missing)
    files = _files(root, outputs)
    mtimes = dict((f, os.stat(os.path.join(root, f)).st_mtime_ns) for f in files)
    folder = os.path.dirname(stash)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    part = stash + ".part"
    with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            tar.add(os.path.join(root, f), arcname=f, recursive=False)
        data = json.dumps(mtimes, sort_keys=True).encode()
        info = tarfile.TarInfo(MTIMES)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
        if started is not None:
            data = str(started).encode()
            info = tarfile.TarInfo(STARTED)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    os.replace(part, stash)
    return "build outputs: %d file(s) of %s saved for the next node" % (len(files), ", ".join(outputs))


def _take_stamp(stash):
    """The build's start time that restore wrote beside the stash (None without one); the stamp is
    removed, and its folder too where nothing else is in it."""
    stamp = stash + ".started"
    if not os.path.isfile(stamp):
        return None
    with open(stamp) as f:
        text = f.read().strip()
    os.remove(stamp)
    try:
        os.rmdir(os.path.dirname(stamp))
    except OSError:
        pass  # not empty: it holds more than the stamp
    return int(text) if text.isdigit() else None


def _rebuilt(stash, root):
    """Which restored files the build commands changed, in words: a restore saved the build only
    where none changed. A file written again with the archive's bytes (torch writes each module's
    build.ninja into the shared folder in turn) is named apart: its content is what was restored."""
    changed, same = [], []
    with tarfile.open(stash, "r") as tar:
        mtimes = json.loads(tar.extractfile(tar.getmember(MTIMES)).read().decode())
        for f in sorted(mtimes):
            path = os.path.join(root, f)
            if not os.path.isfile(path):
                changed.append(f)
            elif os.stat(path).st_mtime_ns != int(mtimes[f]):
                with open(path, "rb") as now:
                    (same if now.read() == tar.extractfile(tar.getmember(f)).read() else changed).append(f)
    said = ("none of its %d file(s) changed after the restore" % len(mtimes) if not changed else
            "%d of its %d file(s) changed after the restore: %s" % (len(changed), len(mtimes), ", ".join(changed)))
    return said + ("; written again with the same bytes: %s" % ", ".join(same) if same else "")


def restore(stash, root, outputs):
    """Put the archive's outputs into the tree (see the module docstring); returns (restored,
    what it did in words). No archive at ``stash``: nothing is done."""
    if not os.path.exists(stash):
        # the build begins now: its archive records it, and the next node's tree is dated before it
        # (ninja's log records each command's start, which is before its output's time)
        if not os.path.isdir(os.path.dirname(stash)):
            os.makedirs(os.path.dirname(stash))
        with open(stash + ".started", "w") as f:
            f.write("%d\n" % time.time_ns())
        return False, "build outputs: none cached for this key, the build makes them"
    with tarfile.open(stash, "r") as tar:
        members = tar.getmembers()
        mtimes, started = None, None
        for m in members:
            if m.name == MTIMES and m.isfile():
                mtimes = json.loads(tar.extractfile(m).read().decode())
            elif m.name == STARTED and m.isfile():
                text = tar.extractfile(m).read().decode().strip()
                if not text.isdigit():
                    raise TreeCacheError("%s: %s is not a time in nanoseconds: %r" % (stash, STARTED, text[:40]))
                started = int(text)
            elif not (m.isfile() or m.isdir()) or not _inside(m.name, outputs):
                raise TreeCacheError("%s: member %r is not a file or folder under %s"
                                     % (stash, m.name, ", ".join(outputs)))
        if mtimes is None:
            raise TreeCacheError("%s: no %s member, the times of its files are not known" % (stash, MTIMES))
        if not isinstance(mtimes, dict) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                   for t in mtimes.values()):
            raise TreeCacheError("%s: %s is not a map of paths to times in nanoseconds" % (stash, MTIMES))
        files = set(m.name for m in members if m.isfile() and m.name not in (MTIMES, STARTED))
        strange = sorted(f for f in mtimes if f not in files)
        if strange:
            raise TreeCacheError("%s: %s names %r, which is not one of its files under %s"
                                 % (stash, MTIMES, strange[0], ", ".join(outputs)))
        _check_paths(root, outputs)
        for o in outputs:
            path = os.path.join(root, o)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.remove(path)
        for m in members:
            if m.name in (MTIMES, STARTED):
                continue
            dest = os.path.join(root, m.name)
            if m.isdir():
                if not os.path.isdir(dest):
                    os.makedirs(dest)
                continue
            if not os.path.isdir(os.path.dirname(dest)):
                os.makedirs(os.path.dirname(dest))
            src = tar.extractfile(m)
            with open(dest, "wb") as f:
                shutil.copyfileobj(src, f)
            os.chmod(dest, m.mode & 0o755)
    times = [int(mtimes[f]) for f in mtimes if os.path.isfile(os.path.join(root, f))]
    for f in mtimes:
        path = os.path.join(root, f)
        if os.path.isfile(path):
            os.utime(path, ns=(int(mtimes[f]), int(mtimes[f])))
    if not times:
        return True, "build outputs: the cached archive holds no files"
    oldest = min(times) if started is None else min(min(times), started)
    before = oldest - SECOND_NS
    older = _age_inputs(root, outputs, oldest, before)
    return True, ("build outputs: %d file(s) of %s restored from the build cache; %d file(s) of the tree "
                  "dated before them" % (len(times), ", ".join(outputs), older))


def _age_inputs(root, outputs, oldest, before):
    """Give every file of the tree outside ``outputs`` and .git that is not older than ``oldest``
    the time ``before``; returns how many."""
    count = 0
    skip = set(os.path.normpath(os.path.join(root, o)) for o in outputs)
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" and os.path.normpath(os.path.join(folder, d)) not in skip]
        for n in names:
            path = os.path.join(folder, n)
            if os.path.normpath(path) in skip or os.path.islink(path):
                continue
            if os.stat(path).st_mtime_ns >= oldest:
                os.utime(path, ns=(before, before))
                count += 1
    return count


def kept_restores(lines):
    """The outputs (as restore's line names them, "a, b") of each restore in a node's log that
    the build after it changed none of: restore's line, then save's "none of its N file(s)
    changed after the restore". A restore whose build redid part of it, or whose save said
    nothing of it (a record made before save said so), is not one."""
    kept, pending = set(), None
    for line in lines:
        if " restored from the build cache" in line and " file(s) of " in line:
            pending = line.split(" file(s) of ", 1)[1].split(" restored from the build cache", 1)[0]
        elif pending is not None and "stays (restored before the build)" in line:
            if "; none of its " in line and " changed after the restore" in line:
                kept.add(pending)
            pending = None
    return kept

