"""Fetch one data file of a recipe's ``data`` section on the node, checking its sha256.

Standard library only (it runs under the environment's Python, the package's floor or newer:
``envbuild/node/__init__.py``). The file comes
from ``--mirror`` when that file exists (an offline node), else from ``--url``. It is written
beside ``--dest`` and moved into place only after its sha256 is checked:

* ``--sha256`` given (the recipe knows the digest): it must match;
* not given: the digest recorded by an earlier fetch (``<record-dir>/<name>.sha256``) must
  match; the first fetch records it (trust on first use, said in the output).

With ``--root TREE`` (the source tree the file belongs in) every file is written inside it: a
destination whose folder resolves outside the tree, or that is a symbolic link (a pinned commit
can carry one), is refused before anything is written (exit 4); a leftover ``.partial`` is
removed, never followed.

A file already at ``--dest`` whose digest is the expected/recorded one is left alone (no
download). ``--decompress xz`` then unpacks ``dest`` to ``dest`` without ``.xz``. The last
line of output is one JSON object: name, origin (mirror/url/present), sha256, checked
(recipe/recorded/first-fetch), dest.

    python fetch_data.py --name gpt2-vocab --url https://.../gpt2-vocab.json \\
        --dest /opt/env/src/megatron-deepspeed/gpt2-vocab.json --record-dir /opt/env/.envbuild/data \\
        [--sha256 HEX] [--mirror /srv/data/gpt2-vocab.json] [--decompress xz]
"""

import argparse
import hashlib
import json
import lzma
import os
import shutil
import sys
import urllib.request

CHUNK = 1 << 20


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def read_record(path):
    try:
        with open(path) as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return None


def fetch(url, tmp, timeout=60):
    req = urllib.request.Request(url, headers={"User-Agent": "envbuild-fetch-data"})
    with urllib.request.urlopen(req, timeout=timeout) as resp, open(tmp, "wb") as out:
        shutil.copyfileobj(resp, out, CHUNK)


def fresh(path):
    """Remove what lies at ``path`` (a file or a link: a link is never followed)."""
    if os.path.lexists(path):
        os.unlink(path)


def escapes(root, path):
    """Why writing ``path`` would leave ``root`` (None: it stays inside)."""
    real_root = os.path.realpath(root)
    parent = os.path.realpath(os.path.dirname(path) or ".")
    if os.path.commonpath([real_root, parent]) != real_root:
        return "its folder resolves to %s, outside %s" % (parent, real_root)
    if os.path.islink(path):
        return "it is a symbolic link (to %s)" % os.readlink(path)
    return None


def unxz(path):
    target = path[:-3]
    tmp = target + ".partial"
    fresh(tmp)
    with lzma.open(path, "rb") as src, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, CHUNK)
    os.replace(tmp, target)
    return target


def main(argv=None):
    ap = argparse.ArgumentParser(description="fetch one data file, sha256 checked and recorded")
    ap.add_argument("--name", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--dest", required=True)
    ap.add_argument("--record-dir", required=True)
    ap.add_argument("--sha256")
    ap.add_argument("--mirror")
    ap.add_argument("--decompress", choices=["xz"])
    ap.add_argument("--root")
    a = ap.parse_args(argv)
    if a.root:
        for path in [a.dest] + ([a.dest[:-3]] if a.decompress == "xz" else []):
            why = escapes(a.root, path)
            if why:
                sys.stderr.write("%s: refusing to write %s: %s\n" % (a.name, path, why))
                return 4
    record = os.path.join(a.record_dir, a.name + ".sha256")
    recorded = read_record(record)
    want = a.sha256 or recorded
    checked = "recipe" if a.sha256 else ("recorded" if recorded else "first-fetch")
    if recorded and a.sha256 and recorded != a.sha256:
        checked = "recipe"  # the recipe's digest wins over an old record; the record is rewritten
    if os.path.isfile(a.dest) and want and sha256_of(a.dest) == want:
        origin, got = "present", want
    else:
        tmp = a.dest + ".partial"
        parent = os.path.dirname(a.dest)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fresh(tmp)
        if a.mirror and os.path.isfile(a.mirror):
            origin = "mirror"
            shutil.copyfile(a.mirror, tmp)
        else:
            origin = "url"
            try:
                fetch(a.url, tmp)
            except Exception as exc:  # noqa: BLE001 - any failure to download is reported as such
                if os.path.exists(tmp):
                    os.remove(tmp)
                where = " and not in the mirror %s" % a.mirror if a.mirror else ""
                sys.stderr.write("%s: cannot download %s%s: %s\n" % (a.name, a.url, where, exc))
                return 3
        got = sha256_of(tmp)
        if want and got != want:
            os.remove(tmp)
            what = "the recipe's" if checked == "recipe" else "the one recorded by the first fetch (%s)" % record
            sys.stderr.write("%s: %s from %s has sha256 %s, not %s sha256 %s\n"
                             % (a.name, os.path.basename(a.dest), a.mirror if origin == "mirror" else a.url,
                                got, what, want))
            return 1
        os.replace(tmp, a.dest)
    os.makedirs(a.record_dir, exist_ok=True)
    with open(record, "w") as f:
        f.write("%s  %s\n" % (got, os.path.basename(a.dest)))
    unpacked = None
    if a.decompress == "xz":  # unpacked again unless the checked file was already there with it
        unpacked = a.dest[:-3]
        if origin != "present" or not os.path.isfile(unpacked):
            unxz(a.dest)
    print(json.dumps({"name": a.name, "origin": origin, "sha256": got, "checked": checked,
                      "dest": a.dest, "unpacked": unpacked}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
