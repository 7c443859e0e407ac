"""Create a conda prefix with py-rattler when the node has no conda/mamba/micromamba.

usage: rattler_create.py --prefix PATH [--channel URL_OR_DIR]... SPEC...

A channel given as a folder is used as a local file channel (it must hold ``noarch/`` and
``repodata.json`` files, e.g. written by ``rattler.index.index_fs``). Prints one line per
installed package: ``name version build channel``. Runs under the node's own Python (the
package's floor or newer: ``envbuild/node/__init__.py``); only py-rattler is needed besides the
standard library.
"""
import argparse
import asyncio
import inspect
import os
import sys


def channel_source(text):
    """A folder becomes a file:// URL; a name or URL stays as it is."""
    if os.path.isdir(text):
        return "file://" + os.path.abspath(text)
    return text


async def create(prefix, channels, specs):
    import rattler

    platforms = [str(rattler.Platform.current()), "noarch"]
    params = inspect.signature(rattler.solve).parameters
    where = "sources" if "sources" in params else "channels"  # py-rattler renamed it in 0.2x
    records = await rattler.solve(specs=specs, platforms=platforms,
                                  **{where: [rattler.Channel(c) for c in channels]})
    await rattler.install(records, target_prefix=prefix, show_progress=False)
    return records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--channel", action="append", default=[])
    ap.add_argument("specs", nargs="+")
    a = ap.parse_args()
    try:
        import rattler  # noqa: F401
    except ImportError:
        sys.exit("no conda, mamba or micromamba on this node and py-rattler is not importable "
                 "by %s: pip install py-rattler" % sys.executable)
    channels = [channel_source(c) for c in (a.channel or ["conda-forge"])]
    try:
        records = asyncio.run(create(os.path.expanduser(a.prefix), channels, a.specs))
    except Exception as exc:  # solver and network errors: one line, no traceback
        sys.stderr.write("conda prefix %s from %s with %s: %s\n" % (a.prefix, ", ".join(channels),
                                                                 " ".join(a.specs), exc))
        sys.stderr.flush()
        os._exit(1)  # see below: no interpreter teardown
    for r in records:
        print("%s %s %s %s" % (r.name.normalized, r.version, r.build, r.channel))
    sys.stdout.flush()
    sys.stderr.flush()
    # py-rattler 0.28 sometimes segfaults while the interpreter shuts down its runtime threads
    # (seen here about one run in three, after the install finished): leave without teardown.
    os._exit(0)


if __name__ == "__main__":
    main()
