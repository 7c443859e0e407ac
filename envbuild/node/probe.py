"""The state probe: a node's step markers, step effects and observed environment in one process.

Run through ``boot.py`` by the environment's own interpreter (``envbuild.actions.nodestate.
probe_command``)::

    PYTHON -E -c BOOT PACKAGE probe ARGS

ARGS is base64 of a zlib-compressed JSON object (``-``: read from stdin, for a plan too large for
a command line, e.g. a bundle of thousands of files): ``prefix``, ``steps`` (``[{id, digest, effect}]``),
``from_step``, ``deep``, ``refresh`` (see ``state.node_state``), ``observe`` (the observe
script's arguments, or null: do not observe) and ``begin``, the marker line printed before the
result: one JSON object ``{"state": ..., "observed": ...}``. Nothing is written to the node's
disk (with ``refresh``, only the state folder's manifests).
"""
import base64
import json
import sys
import zlib

from . import observe, state


def main(argv):
    # the payload: zlib-compressed JSON in base64, in the argument or, for a large plan, on stdin
    raw = sys.stdin.read().strip() if argv[0] == "-" else argv[0]
    args = json.loads(zlib.decompress(base64.b64decode(raw)).decode("utf-8"))
    out = {"state": state.node_state(
        args["prefix"], args["steps"], from_step=args.get("from_step"), deep=args.get("deep", False),
        refresh=args.get("refresh", False))}
    if args.get("observe") is not None:
        out["observed"] = observe.observe(observe.parse_args(args["observe"]))
    sys.stdout.write("%s\n" % (args["begin"],))
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
