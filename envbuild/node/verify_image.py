"""Check an environment against what its plan installed: run inside a built image (or on a
node) with the environment's own Python. Standard library only (the package's floor or newer:
``envbuild/node/__init__.py``).

    <prefix>/bin/python verify_image.py verify.json            # imports, versions, source trees
    <prefix>/bin/python verify_image.py --inventory            # {name: {version, files}} as JSON

``verify.json`` (written by envbuild's container renderers) holds ``modules`` (must import),
``packages`` (``{name: "==1.2"}``: every locked distribution at its exact version, or a
specifier for unlocked tooling) and ``sources`` (``{tree: sha}``: HEAD of each git tree).
Prints one JSON object; exit 0 when everything matches, 1 otherwise.
"""
import importlib
import json
import os
import re
import sys
from importlib import metadata


def canon(name):
    # observe.canonical's rule: this file is copied alone into images and imports no sibling
    return re.sub(r"[-_.]+", "-", name).lower()


def installed():
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and canon(name) not in out:
            out[canon(name)] = dist
    return out


def inventory():
    """{name: {version, files}} of every distribution on sys.path (files from RECORD)."""
    out = {}
    for name, dist in sorted(installed().items()):
        files = sorted(str(f) for f in (dist.files or []))
        out[name] = {"version": dist.version, "files": files}
    return out


def _version_ok(have, spec):
    if spec.startswith("=="):
        return have == spec[2:]
    return True  # a specifier (unlocked tooling such as wheel<0.46): present is enough


def check(spec):
    problems, imported = [], {}
    for mod in spec.get("modules", []):
        try:
            m = importlib.import_module(mod)
            imported[mod] = str(getattr(m, "__version__", ""))
        except Exception as exc:  # noqa: BLE001 - every import failure is a finding
            problems.append("import %s: %s: %s" % (mod, type(exc).__name__, exc))
    have = installed()
    for name, want in sorted(spec.get("packages", {}).items()):
        dist = have.get(canon(name))
        if dist is None:
            problems.append("%s%s is not installed" % (name, want))
        elif not _version_ok(dist.version, want):
            problems.append("%s is %s, the lock says %s" % (name, dist.version, want))
    for tree, sha in sorted(spec.get("sources", {}).items()):
        try:
            with open(os.path.join(tree, ".git", "HEAD")) as fh:
                head = fh.read().strip()
        except OSError as exc:
            problems.append("source %s: %s" % (tree, exc))
            continue
        if head != sha:
            problems.append("source %s is at %s, the lock says %s" % (tree, head, sha))
    return {"ok": not problems, "problems": problems, "imported": imported,
            "packages": len(spec.get("packages", {})), "python": sys.version.split()[0]}


def main(argv):
    if argv[:1] == ["--inventory"]:
        print(json.dumps(inventory(), indent=1, sort_keys=True))
        return 0
    if len(argv) != 1:
        print("usage: verify_image.py VERIFY_JSON | --inventory", file=sys.stderr)
        return 2
    with open(argv[0]) as fh:
        result = check(json.load(fh))
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
