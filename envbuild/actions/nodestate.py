"""The node's state in one round trip: step markers, step effects and the observed environment.

``probe_command(python, prefix, steps, ...)`` is one shell command (pure) that runs
``envbuild.node.state.node_state`` -- the same function Ansible's ``envbuild_state``
module runs -- and, optionally, the observe script (``envbuild.node.observe``) in one
process of the environment's own interpreter (``envbuild/node/probe.py``, carried in the
command with the rest of the package: ``node_command``), and prints one JSON document.
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
from functools import lru_cache

from envbuild.actions.effects import effect_data
from envbuild.errors import EnvironmentProblem
from envbuild.shipped import NODE  # envbuild's node package, standard library only

BEGIN = "::envbuild-state::"


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
    effects = effect_data(plan)
    return [{"id": s.id, "digest": s.digest, "effect": effects[s.id]} for s in plan.steps]


@lru_cache(maxsize=1)
def node_package() -> str:
    """Every file of envbuild/node/, compressed: the first argument of ``boot.py``."""
    files = [[path.stem, path.read_text()] for path in sorted(NODE.glob("*.py"))]
    return base64.b64encode(zlib.compress(json.dumps(files).encode(), 9)).decode()


def node_path_word(path: str) -> str:
    """``path`` as one shell word; ``~/x`` stays relative to the node user's ``$HOME``."""
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + (shlex.quote(path[1:]) if len(path) > 1 else "")
    return shlex.quote(path)


# a command reaches the node as one argument of ``sh -c``: Linux refuses one over 128 KiB (E2BIG)
ARG_LIMIT = 64 * 1024


@dataclass(frozen=True)
class ProbeCall:
    """The probe's command and, for a large plan (a bundle of thousands of files), the payload
    it reads from its standard input (None: the payload is in the command)."""

    command: str
    stdin: str | None = None


def probe_call(python: str, prefix: str, steps: list[dict], *, from_step: str | None = None,
               deep: bool = False, refresh: bool = False, observe: list[str] | None = None) -> ProbeCall:
    """How to probe one node with ``python`` (see the module docstring): the payload in the
    command while it is small, else on stdin, so the command's size never grows with the plan."""
    args = {"prefix": prefix, "steps": steps, "from_step": from_step, "deep": deep, "refresh": refresh,
            "observe": observe, "begin": BEGIN}
    payload = base64.b64encode(zlib.compress(json.dumps(args, sort_keys=True).encode(), 6)).decode()
    if len(payload) <= ARG_LIMIT:
        return ProbeCall(node_command(python, "probe", [payload]))
    return ProbeCall(node_command(python, "probe", ["-"]), stdin=payload + "\n")


def probe_command(python: str, prefix: str, steps: list[dict], **kw) -> str:
    """``probe_call``'s command where the payload fits in it (a probe embedded in another
    script, which has no stdin to give); ValueError where it does not."""
    call = probe_call(python, prefix, steps, **kw)
    if call.stdin is not None:
        raise ValueError("the probe's payload does not fit in a command; use probe_call and its stdin")
    return call.command


def node_command(python: str, module: str, args: list[str], *, flags: tuple[str, ...] = ("-E",)) -> str:
    """The shell command that runs ``envbuild/node/<module>.py`` with ``args`` under ``python`` on a
    node, as ``python -m`` would, the whole package carried in the command (``envbuild/node/boot.py``):
    nothing is copied to the node first."""
    return " ".join([node_path_word(python), *flags, "-c", shlex.quote((NODE / "boot.py").read_text()),
                     node_package(), shlex.quote(module), *map(shlex.quote, args)])


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
