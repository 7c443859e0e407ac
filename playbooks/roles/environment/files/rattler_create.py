"""Create a conda prefix with py-rattler when the node has no conda/mamba/micromamba.

usage: rattler_create.py --prefix PATH [--channel URL_OR_DIR] SPEC...
"""
import argparse
import asyncio
import os
import sys


async def create(prefix, channels, specs):
    import rattler

    records = await rattler.solve(channels=channels, specs=specs,
                                  platforms=[str(rattler.Platform.current()), "noarch"])
    await rattler.install(records, target_prefix=prefix)
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
                 f"by {sys.executable}: pip install py-rattler")
    channels = [os.path.abspath(c) if os.path.isdir(c) else c for c in (a.channel or ["conda-forge"])]
    records = asyncio.run(create(os.path.expanduser(a.prefix), channels, a.specs))
    for r in records:
        print(f"{r.name.normalized} {r.version}")


if __name__ == "__main__":
    main()
