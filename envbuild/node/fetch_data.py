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

A download is bounded: at most ``--max-bytes`` (default ``MAX_BYTES``, the controller's
``envbuild.bundle.fetch.MAX_DATA_BYTES``: the recipe records no size), refused at once when
the response's Content-Length says more and stopped when its bytes pass it; the partial file is
removed and named (exit 3). ``http://`` is fetched only where a sha256 is pinned (``--sha256``,
or the one an earlier fetch recorded): unpinned bytes come over TLS or not at all (exit 2).

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
MAX_BYTES = 16 << 30  # the stated maximum of one data file (envbuild.bundle.fetch.MAX_DATA_BYTES)


class TooLarge(Exception):
    pass


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


def fetch(url, tmp, timeout=60, limit=MAX_BYTES, pinned=True):
    """``url`` into ``tmp``, at most ``limit`` bytes (TooLarge past it); a redirect away from
    https is refused for bytes no sha256 pins (``pinned`` False)."""
    req = urllib.request.Request(url, headers={"User-Agent": "envbuild-fetch-data"})
    with urllib.request.urlopen(req, timeout=timeout) as resp, open(tmp, "wb") as out:
        if not pinned and not resp.geturl().startswith("https://"):
            raise ValueError("redirected to %s: not https, and no sha256 pins the file" % resp.geturl())
        announced = resp.headers.get("Content-Length", "")
        if announced.isdigit() and int(announced) > limit:
            raise TooLarge("it announces %s bytes, more than the %d a download may take" % (announced, limit))
        size = 0
        while True:
            block = resp.read(CHUNK)
            if not block:
                return
            size += len(block)
            if size > limit:
                raise TooLarge("it sent more than %d bytes: stopped" % limit)
            out.write(block)


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
    ap.add_argument("--max-bytes", type=int, default=MAX_BYTES)
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
            if not a.url.startswith("https://") and not (want and a.url.startswith("http://")):
                sys.stderr.write("%s: refusing %s: only https:// is fetched for a file without a pinned sha256 "
                                 "(record the recipe's sha256, or give the https:// URL)\n" % (a.name, a.url))
                return 2
            try:
                fetch(a.url, tmp, limit=a.max_bytes, pinned=bool(want))
            except Exception as exc:  # noqa: BLE001 - any failure to download is reported as such
                removed = ""
                if os.path.lexists(tmp):
                    os.remove(tmp)
                    removed = " (the partial file %s removed)" % tmp
                where = " and not in the mirror %s" % a.mirror if a.mirror else ""
                sys.stderr.write("%s: cannot download %s%s: %s%s\n" % (a.name, a.url, where, exc, removed))
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
