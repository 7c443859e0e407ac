"""Check the effects of plan steps on a node: the second half of the node side of
``envbuild.actions`` (the first, running actions, is ``actions.py``).

Standard library only, like ``actions.py``: it runs under the node's Python, in Ansible's
module_utils or loaded by ``boot.py`` (see ``envbuild/node/__init__.py``). ``check_effect(eff,
EffectContext(state_dir))`` interprets one effect of ``envbuild.actions.effects``
(data; nothing is evaluated); ``state`` decides with it which steps run and when a step
is done.
"""
import base64
import csv
import hashlib
import json
import os
from urllib.parse import unquote

from . import textpatch
from .actions import ActionFailed, _call, _env
from .observe import canonical, sha256_file

# ``check_effect(effect, ctx)`` interprets one effect of ``envbuild.actions.effects`` (data)
# and returns {"ok", "detail", "repair"}; ``repair`` says the step's normal actions would not
# fix it (a distribution whose metadata is there but whose files are not: pip would say
# "already satisfied"), so the step runs its actions' ``repair_args`` (--force-reinstall).
#
# Speed: a distribution's files are checked against ``<id>.manifest.json``, written when the
# step recorded its marker after every RECORD hash was checked: a file whose size, mtime and
# ctime equal the manifest's is not read; any other file is hashed against RECORD. ``deep``
# hashes every file (record time, ``envbuild verify --deep``).


GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
ENV_INFO = ("import json, sys, sysconfig; print(json.dumps({'sys_path': sys.path, "
            "'purelib': sysconfig.get_paths()['purelib'], 'prefix': sys.prefix}))")
MAX_LISTED = 5


class EffectContext(object):
    """Caches shared by the checks of one node: each environment's search path and
    distributions, the manifests recorded under the state folder."""

    def __init__(self, state_dir, deep=False):
        self.state_dir, self.deep = state_dir, deep
        self._envs, self._dists = {}, {}

    def env(self, python):
        """{"ok", "sys_path", "purelib", "error"} of the environment of ``python``."""
        if python in self._envs:
            return self._envs[python]
        import sys
        import sysconfig

        if os.path.abspath(python) == os.path.abspath(sys.executable):
            info = {"ok": True, "sys_path": list(sys.path), "purelib": sysconfig.get_paths()["purelib"],
                    "prefix": sys.prefix}
        elif not os.path.isfile(python):
            info = {"ok": False, "error": "%s does not exist" % python}
        else:
            try:
                rc, out, err = _call([python, "-E", "-c", ENV_INFO], _env(None, None, None), timeout=120)
            except ActionFailed as exc:
                rc, out, err = 127, "", exc.msg
            if rc != 0:
                info = {"ok": False,
                        "error": "%s does not run (exit %s): %s" % (python, rc, (err.strip().splitlines() or [""])[-1][:200])}
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
                if name and canonical(name) not in found:
                    found[canonical(name)] = (site, entry, version)
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
            if row[0].endswith(("/", "\\")):
                # a folder, which RECORD should not list ("Directories should not be listed",
                # recording-installed-packages spec); `wheel tags` wrote such rows into cmake's
                # wheels (pypa/wheel#558: "cmake/,sha256=<empty>,0"), and pip leaves an empty
                # one uncreated: no file to check
                continue
            algo, digest = row[1].split("=", 1)
            rows.append((row[0], algo, digest, int(row[2]) if row[2].isdigit() else None))
    return rows


def written_over(rels, later):
    """{path: step id} of the RECORD paths ``rels`` that are a top-level extension module which a
    later step installs over this distribution's copy (``later``: the effect's ``later_writes``,
    {module: step id}): ``<module>.so`` or ``<module>.<anything>.so`` directly in site-packages.

    >>> written_over(["m_cuda.cpython-312-x86_64-linux-gnu.so", "m_cuda.so", "pkg/m_cuda.so",
    ...               "m_cuda_x.so", "m_cuda.py"], {"m_cuda": "build:k"})
    {'m_cuda.cpython-312-x86_64-linux-gnu.so': 'build:k', 'm_cuda.so': 'build:k'}
    """
    out = {}
    for rel in rels if later else ():
        if "/" in rel or "\\" in rel or not rel.endswith(".so"):
            continue
        module = rel.split(".", 1)[0]
        if module in later:
            out[rel] = later[module]
    return out


def check_record(site, dist_info, recorded=None, deep=False, excused=()):
    """(broken paths, files hashed, manifest entry) for one installed distribution.

    ``excused``: RECORD paths that the published wheel itself gets wrong (the effect's
    ``record_defects``); they must exist, their size and hash are not compared.

    ``recorded`` is this distribution's manifest entry; with it and not ``deep``, files whose
    stat is unchanged are trusted without reading RECORD."""
    return _check_record(site, dist_info, recorded, deep, excused)[:3]


def _check_record(site, dist_info, recorded, deep, excused, later=None):
    """``check_record`` and {path: step id} of the files a later step wrote over (``later``, see
    ``written_over``): they must exist, their size and hash are not compared."""
    record = os.path.join(site, dist_info, "RECORD")
    try:
        record_key = _stat_key(os.stat(record))
    except OSError:
        return ["%s/RECORD (missing)" % dist_info], 0, None, {}
    if recorded and not deep and recorded.get("dist_info") == dist_info and recorded.get("site") == site \
            and recorded.get("record") == record_key:
        changed = _changed_files(site, recorded.get("files", []))
        if not changed:  # every file there with its recorded stat, those written over included
            return [], 0, recorded, written_over([row[0] for row in recorded.get("files", [])], later)
        trusted = set()
    else:
        changed = None
        trusted = set()
        if recorded and not deep and recorded.get("dist_info") == dist_info and recorded.get("site") == site:
            keys = dict((rel, [s, m, c]) for rel, s, m, c in recorded.get("files", []))
            trusted = set(rel for rel, key in keys.items()
                          if _stat_ok(os.path.join(site, rel), key))
    broken, hashed, files, written = [], 0, [], {}
    only = set(changed) if changed is not None else None
    rows = _record_rows(site, dist_info)
    over = written_over([row[0] for row in rows], later)
    for rel, algo, digest, size in rows:
        path = os.path.normpath(os.path.join(site, rel))
        shown = rel if not rel.startswith("..") and not os.path.isabs(rel) else path
        try:
            st = os.stat(path)
        except OSError:
            broken.append(shown + " (missing)")
            continue
        files.append([rel] + _stat_key(st))
        if rel in over:
            written[rel] = over[rel]
            continue
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
    return broken, hashed, entry, written


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
    problems, repair, entries, hashed, written = [], False, {}, 0, {}
    recorded = (manifest or {}).get("dists") or {}
    for name, want in sorted(eff["dists"].items()):
        found = have.get(canonical(name))
        if found is None:
            problems.append("%s not installed" % name)
            continue
        site, dist_info, version = found
        if not same_version(want, version):
            # the folder's name says the wanted version and METADATA another: METADATA was
            # edited, and installers that read the folder's name (uv) say "satisfied"
            named = dist_info.rpartition(".")[0].rpartition("-")[2]
            altered = bool(want) and same_version(want, named)
            problems.append("%s %s installed, want %s%s" % (name, version, want, (
                " (its METADATA was changed: the folder %s says %s; reinstall)" % (dist_info, named))
                if altered else ""))
            repair = repair or altered
            continue
        if dist_info.endswith(".egg-info"):
            continue  # no RECORD to check: the version is all the evidence
        broken, n, entry, over = _check_record(site, dist_info, recorded.get(name), ctx.deep,
                                               (eff.get("record_defects") or {}).get(name, ()),
                                               eff.get("later_writes"))
        hashed += n
        for sid in over.values():
            written[sid] = written.get(sid, 0) + 1
        if broken:
            repair = True
            problems.append("%s %s: %d file(s) differ from its RECORD: %s" % (name, version, len(broken), _listed(broken)))
        else:
            entries[name] = entry
    # the files a later build installs over these (its source's build_provides): there, not compared
    over = "".join("; %d file(s) written over by %s (its build_provides), not compared" % (n, sid)
                   for sid, n in sorted(written.items()))
    if problems:
        return {"ok": False, "detail": "; ".join(problems) + over, "repair": repair}
    return {"ok": True, "detail": "%d distribution(s) intact%s%s" % (len(entries) or len(eff["dists"]),
                                                                   ", %d file(s) hashed" % hashed if hashed else "",
                                                                   over),
            "repair": False, "manifest": {"dists": entries}}


def _check_source(eff, ctx, manifest):
    env = ctx.env(eff["python"])
    if not env.get("ok"):
        return {"ok": False, "detail": env.get("error", "no environment"), "repair": False}
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
    if not env.get("ok"):
        return {"ok": False, "repair": False, "detail": env.get("error", "")}
    fail = lambda why: {"ok": False, "repair": False, "detail": "%s: %s" % (eff["python"], why)}  # noqa: E731
    prefix = eff.get("prefix")
    cfg_path = os.path.join(os.path.expanduser(prefix or ""), "pyvenv.cfg")
    if prefix and os.path.realpath(env.get("prefix") or "") != os.path.realpath(os.path.expanduser(prefix)):
        why = "not the environment's own interpreter: its sys.prefix is %s, not %s" % (env.get("prefix"), prefix)
        if eff.get("venv") and not os.path.isfile(cfg_path):
            why += " (%s is missing)" % cfg_path
        return fail(why)
    if eff.get("venv"):
        have = venv_config(cfg_path).get("include-system-site-packages", "false").lower() == "true"
        if have != bool(eff.get("system_site_packages")):
            return fail("%s says include-system-site-packages = %s, planned %s" % (
                cfg_path, str(have).lower(), str(bool(eff.get("system_site_packages"))).lower()))
        foreign = foreign_pth(env["purelib"])
        if foreign:
            return fail("%d .pth file(s) in %s that no installed package owns (a .pth runs at every start): %s"
                        % (len(foreign), env["purelib"], _listed(foreign)))
    return {"ok": True, "repair": False, "detail": "%s runs, sys.prefix %s" % (eff["python"], env.get("prefix"))}


def venv_config(path):
    """``pyvenv.cfg`` as {key: value}; {} when it cannot be read."""
    out = {}
    try:
        with open(path) as fh:
            for line in fh:
                key, sep, value = line.partition("=")
                if sep:
                    out[key.strip().lower()] = value.strip()
    except OSError:
        pass
    return out


def foreign_pth(site):
    """The ``.pth`` files directly in ``site`` that no ``*.dist-info/RECORD`` there lists and that
    are not envbuild's own (``envbuild-*``, ``_envbuild_*``); ``easy-install.pth`` is owned while
    an ``.egg-link`` (a legacy develop install) is there. The same rule as the environment step's
    pruning action (``envbuild.actions.steps.PRUNE_PTH``; tests/node/test_venv_integrity.py keeps
    the two equal)."""
    try:
        names = sorted(os.listdir(site))
    except OSError:
        return []
    own = set()
    for entry in names:
        if entry.endswith(".dist-info"):
            try:
                with open(os.path.join(site, entry, "RECORD"), newline="", encoding="utf-8") as fh:
                    own.update(row[0] for row in csv.reader(fh) if row)
            except (OSError, ValueError):
                continue
    if any(n.endswith(".egg-link") for n in names):
        own.add("easy-install.pth")
    return [n for n in names if n.endswith(".pth") and n not in own
            and not n.startswith(("envbuild-", "_envbuild_"))]


def _check_file(eff, ctx):
    path = eff["path"]
    try:
        digest = sha256_file(path)  # in blocks: the pushed uv binary is ~40 MB
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
    status, _ = textpatch.apply_text_patch(text, spec["kind"], spec.get("old") or None,
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
        # the patch action reads the file with universal newlines and writes "\n" (actions.do_patch):
        # a file committed with CRLF endings is compared in that form
        base = base.replace("\r\n", "\n").replace("\r", "\n")
        want = base
        for spec in (s for s in eff["patches"] if s["file"] == rel):
            status, want = textpatch.apply_text_patch(want, spec["kind"], spec.get("old") or None,
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
        elif ctx.deep and sha256_file(path) != sha:
            bad.append(rel + " (other content)")
    if bad:
        return {"ok": False, "repair": False, "detail": "%s: %s" % (eff["dir"], _listed(bad))}
    return {"ok": True, "repair": False, "detail": "%s: %d file(s)%s" % (
        eff["dir"], len(eff["files"]), ", sha256 checked" if ctx.deep else ", sizes checked")}


CHECKS = {"interpreter": _check_interpreter, "file": _check_file, "pth": _check_pth, "patch": _check_patch,
          "git": _check_git, "image": _check_image, "exists": _check_exists, "files": _check_files}


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
        if kind in CHECKS:
            return CHECKS[kind](eff, ctx)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run does not hold (fail closed)
        return {"ok": False, "repair": False, "detail": "%s check failed: %s: %s" % (kind, type(exc).__name__, exc)}
    return {"ok": False, "repair": False, "detail": "unknown effect %r" % kind}
