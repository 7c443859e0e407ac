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
a device, members that clash (a name twice, or under a file), or a time recorded for a path that
is not one of its files is refused before anything is written. Neither call goes through a link:
an output, or a folder above it, that resolves outside the tree is refused (a checkout's link
would carry the writes, or the archive's reads, elsewhere). Each line either prints begins with
"build outputs (KEY):", KEY the stash's folder (the cache key), which ``kept_restores`` reads.
"""
import errno
import io
import json
import os
import shutil
import tarfile

MTIMES = ".envbuild-mtimes.json"  # the archive's member with each file's mtime in nanoseconds
STARTED = ".envbuild-build-started"  # the archive's member with the time its build began, in ns
# the archive's format, part of the cache key (envbuild.plan.build._tree_key): 2 records the build's
# start; an archive of format 1 (runs 16 and 17) has none, and its key is not asked for again
ARCHIVE_FORMAT = 2
SECOND_NS = 1000000000


class TreeCacheError(Exception):
    pass


def _said(stash, text):
    """A line of the node's log: "build outputs (KEY): ...", KEY the stash's folder (the cache key,
    ``tree_stash``), so that a reader ties it to its step (``kept_restores``)."""
    return "build outputs (%s): %s" % (os.path.basename(os.path.dirname(os.path.abspath(stash))), text)


def _inside(name, outputs):
    """Whether the archive member ``name`` lies under one of ``outputs`` (relative paths); with
    ``outputs`` None, whether it is a plain relative path at all."""
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or "" in parts or "." in parts:
        return False
    return outputs is None or any(name == o or name.startswith(o.rstrip("/") + "/") for o in outputs)


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
    _check_paths(root, outputs)
    if os.path.exists(stash):
        return _said(stash, "the cached archive %s stays (restored before the build); %s" % (
            os.path.basename(stash), _rebuilt(stash, root)))
    started = _take_stamp(stash)
    missing = [o for o in outputs if not os.path.exists(os.path.join(root, o))]
    if missing:
        return _said(stash, "not saved, the build made no %s" % ", ".join(missing))
    files = _files(root, outputs)
    mtimes = dict((f, os.stat(os.path.join(root, f)).st_mtime_ns) for f in files)
    folder = os.path.dirname(stash)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    part = stash + ".part"
    with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            # each a regular member, a hard link too (tarfile would store the second of two linked
            # files as a link, which restore refuses)
            path = os.path.join(root, f)
            info = tar.gettarinfo(path, arcname=f)
            info.type, info.linkname, info.size = tarfile.REGTYPE, "", os.path.getsize(path)
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
        _add_text(tar, MTIMES, json.dumps(mtimes, sort_keys=True))
        if started is not None:
            _add_text(tar, STARTED, str(started))
    os.replace(part, stash)
    return _said(stash, "%d file(s) of %s saved for the next node" % (len(files), ", ".join(outputs)))


def _add_text(tar, name, text):
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _stamp(stash):
    """Record that a build begins now (nothing cached for its key): the stamp beside the stash gets
    the filesystem's time of its making, as the build's own files will. An existing stamp stays:
    a build that failed and is run again began at the earlier time, and its first outputs are as
    old as that (an older start dates the next node's tree earlier, the safe side)."""
    folder = os.path.dirname(stash)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    try:
        fd = os.open(stash + ".started", os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            return
        raise
    os.close(fd)


def _take_stamp(stash):
    """The build's start (the stamp's modification time, None without one); the stamp is
    removed, and its folder too where nothing else is in it."""
    stamp = stash + ".started"
    if os.path.islink(stamp) or not os.path.isfile(stamp):
        return None
    started = os.lstat(stamp).st_mtime_ns
    os.remove(stamp)
    try:
        os.rmdir(os.path.dirname(stamp))
    except OSError:
        pass  # not empty: it holds more than the stamp
    return started


def _rebuilt(stash, root):
    """Which restored files the build commands changed, in words: a restore saved the build only
    where none changed. A file whose time changed but whose bytes are the archive's is named apart
    and not counted as changed (torch writes each module's build.ninja into the shared folder in
    turn; a tool that rebuilt a file to the same bytes and keeps no log of it would pass too)."""
    changed, same = [], []
    with tarfile.open(stash, "r") as tar:
        mtimes = json.loads(tar.extractfile(tar.getmember(MTIMES)).read().decode())
        for f in sorted(mtimes):
            path = os.path.join(root, f)
            if os.path.islink(path) or not os.path.isfile(path):
                changed.append(f)
            elif os.lstat(path).st_mtime_ns != int(mtimes[f]):
                (same if _same_bytes(path, tar.extractfile(tar.getmember(f))) else changed).append(f)
    said = ("none of its %d file(s) changed after the restore" % len(mtimes) if not changed else
            "%d of its %d file(s) changed after the restore: %s" % (len(changed), len(mtimes), ", ".join(changed)))
    return said + ("; written again with the same bytes: %s" % ", ".join(same) if same else "")


def _same_bytes(path, member):
    with open(path, "rb") as f:
        while True:
            a, b = f.read(1 << 20), member.read(1 << 20)
            if a != b:
                return False
            if not a:
                return True


def _checked(tar, stash, outputs):
    """(members, mtimes, started) of the open archive ``tar`` at ``stash``, every member checked
    before anything is written (see the module docstring); ``outputs`` None (an archive read off
    the node, ``check_archive``): any plain relative path. TreeCacheError names what is wrong."""
    members = tar.getmembers()
    mtimes, started = None, None
    under = ", ".join(outputs) if outputs is not None else "the tree"
    for m in members:
        if m.name == MTIMES and m.isfile():
            try:
                mtimes = json.loads(tar.extractfile(m).read().decode())
            except ValueError as e:
                raise TreeCacheError("%s: %s is not JSON: %s" % (stash, MTIMES, e)) from None
        elif m.name == STARTED and m.isfile():
            text = tar.extractfile(m).read().decode(errors="replace").strip()
            if not text.isdigit():
                raise TreeCacheError("%s: %s is not a time in nanoseconds: %r" % (stash, STARTED, text[:40]))
            started = int(text)
        elif not (m.isfile() or m.isdir()) or not _inside(m.name, outputs):
            raise TreeCacheError("%s: member %r is not a file or folder under %s" % (stash, m.name, under))
    if mtimes is None:
        raise TreeCacheError("%s: no %s member, the times of its files are not known" % (stash, MTIMES))
    if not isinstance(mtimes, dict) or not all(isinstance(t, int) and not isinstance(t, bool)
                                               for t in mtimes.values()):
        raise TreeCacheError("%s: %s is not a map of paths to times in nanoseconds" % (stash, MTIMES))
    files = set(m.name for m in members if m.isfile() and m.name not in (MTIMES, STARTED))
    names = [m.name.rstrip("/") for m in members]
    clash = sorted(set(n for n in names if names.count(n) > 1) |
                   set(n for n in names if any(n.startswith(f + "/") for f in files)))
    if clash:
        raise TreeCacheError("%s: member %r appears twice, or under a member that is a file" % (stash, clash[0]))
    strange = sorted(f for f in mtimes if f not in files)
    if strange:
        raise TreeCacheError("%s: %s names %r, which is not one of its files under %s"
                             % (stash, MTIMES, strange[0], under))
    return members, mtimes, started


def check_archive(stash):
    """Check the archive at ``stash`` as ``restore`` would, without a tree: its members plain files
    and folders under relative paths, none twice or under a file, its times well-formed.
    TreeCacheError names what is wrong (tarfile's own errors pass through)."""
    with tarfile.open(stash, "r") as tar:
        _checked(tar, stash, None)


def restore(stash, root, outputs):
    """Put the archive's outputs into the tree (see the module docstring); returns (restored,
    what it did in words). No archive at ``stash``: nothing is done."""
    if not os.path.exists(stash):
        # the build begins now: its archive records it, and the next node's tree is dated before it
        # (ninja's log records each command's start, which is before its output's time)
        _check_paths(root, outputs)
        _stamp(stash)
        return False, _said(stash, "none cached for this key, the build makes them")
    with tarfile.open(stash, "r") as tar:
        members, mtimes, started = _checked(tar, stash, outputs)
        _check_paths(root, outputs)
        if os.path.lexists(stash + ".started"):
            os.remove(stash + ".started")  # an earlier attempt's, which built nothing that was kept
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
        return True, _said(stash, "the cached archive holds no files")
    oldest = min(times) if started is None else min(min(times), started)
    before = oldest - SECOND_NS
    older = _age_inputs(root, outputs, oldest, before)
    return True, _said(stash, "%d file(s) of %s restored from the build cache; %d file(s) of the tree dated "
                              "before %s" % (len(times), ", ".join(outputs), older,
                                             "the build's start" if started is not None else "them"))


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
    """The cache keys of the restores in a node's log that the build after them changed none of:
    restore's line "build outputs (KEY): ... restored from the build cache ...", then save's
    "build outputs (KEY): the cached archive ... stays ...; none of its N file(s) changed after the
    restore". A restore whose build redid part of it, or whose save said nothing of it (a record
    made before save said so, or lines without the key), is not one."""
    restored, kept = set(), set()
    for line in lines:
        line = line.strip()
        if not line.startswith("build outputs (") or "): " not in line:
            continue
        key, text = line[len("build outputs ("):].split("): ", 1)
        if text.startswith("none cached for this key") or text.startswith("the cached archive holds no files"):
            restored.discard(key)
        elif " restored from the build cache; " in text:
            restored.add(key)
        elif text.startswith("the cached archive ") and " stays (restored before the build); " in text:
            after = text.split(" stays (restored before the build); ", 1)[1]
            if key in restored and after.startswith("none of its ") and " changed after the restore" in after:
                kept.add(key)
            restored.discard(key)
    return kept
