"""What provision reads from the nodes while it loads the recipe and the lock: facts and a
speculative no-op probe, in one command per node."""

from __future__ import annotations


from envbuild import rundir
from envbuild.actions.nodestate import parse_probe, probe_call
from envbuild.connect import ssh
from envbuild.connect.nodes import Node
from envbuild.connect.runners import Result
from envbuild.errors import EnvironmentProblem, InputError
from envbuild.facts.assemble import all_probes, assemble
from envbuild.facts.probe import Probe
from envbuild.facts.script import build_script, split_sections
from envbuild.plan.model import Plan
from envbuild.provision.lockfile import existing_lock
from envbuild.provision.noop import probe_args, probe_nodes
from envbuild.provision.options import ProvisionOptions, select_nodes
from envbuild.record import RunRecord


class NodeRunner:
    """Adapter: envbuild.facts' Runner protocol over our Node (local or Fabric)."""

    def __init__(self, node: Node):
        self.node, self.name = node, node.name

    def run(self, command: str, *, timeout: int = 300, stdin: str | None = None):
        return Result(*ssh.run(self.node, command, timeout=timeout, stdin=stdin))


class Early:
    """What provision reads from the nodes while it loads the recipe and the lock: the facts,
    and, in the same command, a speculative probe (``probe_nodes``) of each node's plan in the
    latest finished run (``facts_and_probe``). The probe counts only for a node whose new plan
    sends exactly what it sent (same prefix, steps, digests, effects): it then observed the
    node at the same time as the facts, and a no-op costs one round trip. Otherwise the node is
    probed again with its new plan."""

    def __init__(self, opts: ProvisionOptions):
        self.opts, self.nodes = opts, []
        self._pool = None
        self._facts = None
        self._spec_plans: dict[str, Plan] = {}

    def start(self, target) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.nodes = select_nodes(self.opts, target)
        if not (self.opts.dry_run or self.opts.force or self.opts.from_step):
            self._spec_plans = _latest_plans(target.name, [n.name for n in self.nodes])
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envbuild-early")
        self._facts = self._pool.submit(ssh.each, self.nodes, lambda n: facts_and_probe(n, self._spec_plans.get(n.name)))
        self._pool.shutdown(wait=False)

    def facts(self) -> dict:
        """{node: NodeFacts or the exception that kept them}."""
        return {name: got[0] if isinstance(got, tuple) else got for name, got in self._facts.result().items()}

    def read_lock(self, recipe, target) -> None:
        """Read the existing lock now, while the nodes answer (a stale one is refused later,
        where provision asks for the lock: only when a node is feasible)."""
        try:
            self._lock = ("ok", existing_lock(self.opts, recipe, target))
        except Exception as exc:  # noqa: BLE001 - raised again by lock()
            self._lock = ("error", exc)

    def lock(self, recipe, target):
        kind, value = getattr(self, "_lock", ("ok", None))
        if kind == "error":
            raise value
        return value if value is not None else existing_lock(self.opts, recipe, target)

    def probes(self, nodes: list[Node], plans: dict[str, Plan]) -> dict:
        """{node: Probe or None} for ``plans``: the speculative probe where it probed the same
        thing, a new probe elsewhere."""
        spec = {name: got[1] for name, got in self._facts.result().items() if isinstance(got, tuple)}
        out, again = {}, []
        for node in nodes:
            old = self._spec_plans.get(node.name)
            if old is not None and spec.get(node.name) is not None and probe_args(old) == probe_args(plans[node.name]):
                out[node.name] = spec[node.name]
            else:
                again.append(node)
        return {**out, **(probe_nodes(again, plans) if again else {})}


STATE_START, STATE = "envbuild_state_start", "envbuild_state"
# the facts script reaches the node as one argument (``sh -c``; over ssh, of the login shell's
# ``-c``): Linux refuses one of 128 KiB or more (E2BIG). The node package and a probe's payload
# in it are up to ~127 KiB, the facts ~19 KiB: a plan of ~700 steps passed it (OSError)
COMMAND_LIMIT = 120 * 1024


def facts_and_probe(node: Node, plan: Plan | None):
    """(facts, Probe or None) of one node in one command: the facts script with the probe of
    ``plan`` as two more sections, the first starting it in the background, the last waiting
    for it, so it runs beside the fact probes (``envbuild.facts.gather``, plus that probe)."""
    import shlex
    from datetime import datetime, timezone

    facts_only = [p for p in all_probes() if p.name != "pip_list"]
    call = None
    if plan is not None:
        python, prefix, steps, observe = probe_args(plan)
        call = probe_call(python, prefix, steps, refresh=True, observe=observe)
    script = None
    if call is not None and call.stdin is None:  # a plan too large for a command is probed on its own
        cmd = call.command
        t = '"$__eb_t"'
        script = build_script([
            Probe(STATE_START, f"{{ {cmd} >{t}/state.out 2>{t}/state.err; echo $? >{t}/state.rc.tmp; "
                               f"mv {t}/state.rc.tmp {t}/state.rc; }} </dev/null >/dev/null 2>&1 &"),
            *facts_only,
            Probe(STATE, f"i=0; while [ ! -f {t}/state.rc ] && [ $i -lt 12000 ]; do sleep 0.05; i=$((i+1)); done; "
                         f"cat {t}/state.out; exit \"$(cat {t}/state.rc 2>/dev/null || echo 124)\"")])
        if len(shlex.quote(script).encode()) > COMMAND_LIMIT:  # bytes, as the kernel counts: past one argument,
            script, call = None, None  # the plan probed on its own later
    result = NodeRunner(node).run("sh -c " + shlex.quote(script or build_script(facts_only)))
    sections = split_sections(result.stdout)
    if not sections:
        raise EnvironmentProblem(
            f"{node.name}: the facts script printed nothing (exit {result.rc}): "
            + (result.stderr.strip().splitlines() or ["no error output"])[0],
            hint="check that /bin/sh works for this user on the node")
    facts = assemble(sections, node.name, collected_at=datetime.now(timezone.utc).replace(microsecond=0).isoformat())
    if plan is None:
        return facts
    state = sections.get(STATE) if call is not None and call.stdin is None else None
    try:
        probe = parse_probe(state.out, node.name) if state is not None and state.rc == 0 else None
    except EnvironmentProblem:
        probe = None
    return facts, probe


def _latest_plans(target: str, names: list[str]) -> dict[str, Plan]:
    """{node: plan} of the latest finished run for ``target`` (empty when there is none, or it
    cannot be read)."""
    latest = rundir.envbuild_home() / "runs" / "latest"
    try:
        rec = RunRecord.load(latest)
        if rec.run.target != target:
            return {}
        return {name: node.plan for name in names if (node := rec.node(name)) is not None and node.plan is not None}
    except (InputError, OSError):
        return {}
