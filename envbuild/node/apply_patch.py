"""Apply one declarative patch to a source tree: the shell and container renderers' patch tool.

Standard library only; it runs with the node's or the image's Python (the package's floor or
newer: ``envbuild/node/__init__.py``), with ``textpatch.py`` (envbuild/node/textpatch.py)
shipped beside it. It does what the Ansible
path's ``envbuild.node.actions.do_patch`` does: read ``<dest>/<file>``, apply the patch
spec, write the file back (keeping its mode) and the unified diff to ``<diff-dir>/<id>.diff``.

    python3 apply_patch.py --spec spec.json --dest /opt/env/src/apex --diff-dir /opt/env/.envbuild/patches

Exit status 0 when applied or already applied (the status is printed), 1 when the patch does
not fit the tree (nothing is written), 2 for a bad spec.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import textpatch  # noqa: E402  (shipped beside this file)


def _write(path, text, mode):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".envbuild-tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="apply one envbuild patch spec to a tree")
    ap.add_argument("--spec", required=True, help="JSON patch spec (id, kind, file, old, new, count)")
    ap.add_argument("--dest", required=True, help="the source tree")
    ap.add_argument("--diff-dir", required=True, help="folder for <id>.diff")
    args = ap.parse_args(argv)
    try:
        with open(args.spec, encoding="utf-8") as fh:
            spec = json.load(fh)
        pid, kind, rel = spec["id"], spec["kind"], spec["file"]
    except (OSError, ValueError, KeyError) as exc:
        print("apply_patch: bad spec %s: %s" % (args.spec, exc), file=sys.stderr)
        return 2
    path = os.path.join(args.dest, rel)
    try:
        with open(path, encoding="utf-8") as fh:
            before = fh.read()
    except OSError as exc:
        print("patch %s: cannot read %s: %s" % (pid, path, exc), file=sys.stderr)
        return 1
    status, after = textpatch.apply_text_patch(before, kind, spec.get("old") or None,
                                               spec.get("new") or None, int(spec.get("count") or 1))
    if status.startswith("failed"):
        print("patch %s on %s: %s" % (pid, rel, status), file=sys.stderr)
        return 1
    if after != before:
        _write(path, after, os.stat(path).st_mode & 0o7777)
        _write(os.path.join(args.diff_dir, pid + ".diff"), textpatch.unified_diff(before, after, rel), 0o644)
    print("patch %s: %s" % (pid, status))
    return 0


if __name__ == "__main__":
    sys.exit(main())
