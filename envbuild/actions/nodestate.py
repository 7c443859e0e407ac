"""The node's state in one round trip: step markers, step effects and the observed environment.

``probe_command(python, prefix, steps, ...)`` is one shell command (pure) that runs
``envbuild.node.state.node_state`` -- the same function Ansible's ``envbuild_state``
module runs -- and, optionally, the observe script (``envbuild.node.observe``) in one
process of the environment's own interpreter, and prints one JSON document.
``parse_probe(text)`` reads it back. ``envbuild provision`` uses it to see that nothing is to
be done (then Ansible does not start at all); ``envbuild verify`` to check the same effects a
provision checks.

    >>> cmd = probe_command("/opt/env/bin/python", "/opt/env", [])
    >>> cmd.startswith("/opt/env/bin/python -E -c ")
    True
"""

from __future__ import annotations

import base64
import json
import shlex
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import EnvironmentProblem

# the node-side files, loaded in this order under their names in the Ansible collection
# (module_utils), as they import each other so (see envbuild/node/effects.py)
NODE = Path(__file__).resolve().parents[1] / "node"
ONNODE = {name: NODE / f"{file}.py" for name, file in (("onnode", "actions"), ("onnode_effects", "effects"),
                                                        ("onnode_steps", "state"))}
TEXTPATCH = NODE / "textpatch.py"
OBSERVE = NODE / "observe.py"
BEGIN = "::envbuild-state::"

# Runs on the node (any Python >= 3.6): the sources arrive compressed in argv[1] (in load
# order), the arguments as JSON in argv[2]; nothing is written to the node's disk (with
# refresh, only the state folder's manifests). Each module is registered under its name in the
# collection, where the node-side files import each other from.
_BOOT = r"""
import base64, json, sys, types, zlib
srcs = json.loads(zlib.decompress(base64.b64decode(sys.argv[1])).decode("utf-8"))
args = json.loads(base64.b64decode(sys.argv[2]).decode("utf-8"))
mods = {}
for name, src in srcs:
    full = "ansible_collections.envbuild.node.plugins.module_utils." + name
    mod = types.ModuleType(full)
    mod.__dict__["__file__"] = "<envbuild:%s>" % name
    sys.modules[full] = mod
    exec(compile(src, "<envbuild:%s>" % name, "exec"), mod.__dict__)
    mods[name] = mod
out = {"state": mods["envbuild_onnode_steps"].node_state(
    args["prefix"], args["steps"], from_step=args.get("from_step"), deep=args.get("deep", False),
    textpatch=mods["textpatch"], refresh=args.get("refresh", False))}
if args.get("observe") is not None:
    obs = mods["envbuild_observe"]
    out["observed"] = obs.observe(obs.parse_args(args["observe"]))
sys.stdout.write("%s\n" % (args["begin"],))
json.dump(out, sys.stdout, sort_keys=True)
sys.stdout.write("\n")
"""


@dataclass
class Probe:
    """What one probe found: the step split (``node_state``) and the observed environment."""

    state: dict
    observed: dict | None = None
    pending: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.pending = list(self.state.get("pending") or [])

    @property
    def nothing_to_do(self) -> bool:
        return not self.pending


def plan_steps(plan) -> list[dict]:
    """``[{id, digest, effect}]`` of a plan, in order: what ``node_state`` takes."""
    from envbuild.actions.effects import effect_data

    effects = effect_data(plan)
    return [{"id": s.id, "digest": s.digest, "effect": effects[s.id]} for s in plan.steps]


def _sources() -> str:
    texts = [["textpatch", TEXTPATCH.read_text()], ["envbuild_observe", OBSERVE.read_text()],
             *([f"envbuild_{name}", path.read_text()] for name, path in ONNODE.items())]
    return base64.b64encode(zlib.compress(json.dumps(texts).encode(), 9)).decode()


def node_path_word(path: str) -> str:
    """``path`` as one shell word; ``~/x`` stays relative to the node user's ``$HOME``."""
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + (shlex.quote(path[1:]) if len(path) > 1 else "")
    return shlex.quote(path)


def probe_command(python: str, prefix: str, steps: list[dict], *, from_step: str | None = None,
                  deep: bool = False, refresh: bool = False, observe: list[str] | None = None) -> str:
    """The shell command that probes one node with ``python`` (see the module docstring).
    ``observe``: the observe script's arguments (None: do not observe)."""
    args = {"prefix": prefix, "steps": steps, "from_step": from_step, "deep": deep, "refresh": refresh,
            "observe": observe, "begin": BEGIN}
    payload = base64.b64encode(json.dumps(args, sort_keys=True).encode()).decode()
    return " ".join([node_path_word(python), "-E", "-c", shlex.quote(_BOOT), _sources(), payload])


def parse_probe(text: str, host: str = "node") -> Probe:
    """The probe's stdout -> ``Probe``; EnvironmentProblem when it printed something else."""
    head, sep, body = text.partition(BEGIN)
    if not sep:
        tail = (text.strip().splitlines() or ["(no output)"])[-1]
        raise EnvironmentProblem(f"{host}: the state probe printed no result; last line: {tail[:200]}",
                                 hint="does the environment's python run on the node?")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise EnvironmentProblem(f"{host}: the state probe printed broken JSON ({exc.msg})") from None
    return Probe(state=data.get("state") or {}, observed=data.get("observed"))
