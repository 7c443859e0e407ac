"""provision's early read of a node (``envbuild.provision.early.facts_and_probe``): the facts
script with the latest plan's state probe in it, on this machine's own node. The probe's command
carries the node package and the plan's payload; with the facts around it the script reaches the
node as one argument, which Linux refuses at 128 KiB (E2BIG). A plan of ~700 steps passed it and
the read failed with an OSError: now the facts come alone there and the plan is probed later."""

import secrets
import shlex
import subprocess
import sys

from envbuild.actions.nodestate import probe_call
from envbuild.connect.nodes import local_node
from envbuild.facts.assemble import all_probes
from envbuild.facts.model import NodeFacts
from envbuild.facts.script import build_script
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.provision.early import COMMAND_LIMIT, facts_and_probe
from envbuild.provision.noop import probe_args


def env_file_plan(prefix: str, steps: int) -> Plan:
    """``steps`` env-file steps, each with its own random value: a payload that does not compress."""
    return Plan(recipe="r", target="local", host="local", prefix=prefix, backend="venv", steps=[
        Step(id=f"env-{i}", title="e", params=P.EnvFileParams(path=f"{prefix}/.envbuild/env{i}.sh",
                                                               vars={"K": secrets.token_hex(40)}))
        for i in range(steps)])


def test_a_probe_too_long_to_ride_with_the_facts_leaves_them_alone(tmp_path):
    plan = env_file_plan(str(tmp_path / "env"), 760)
    python, prefix, steps, observe = probe_args(plan)
    call = probe_call(python, prefix, steps, refresh=True, observe=observe)
    assert call.stdin is None  # its payload fits in its command, which with the facts does not fit in one argument
    assert len(shlex.quote(call.command)) + len(build_script(all_probes())) > COMMAND_LIMIT
    facts, probe = facts_and_probe(local_node(), plan)
    assert isinstance(facts, NodeFacts) and facts.pythons and probe is None  # probed on its own later


def test_a_small_plans_probe_rides_with_the_facts(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True)  # its python probes
    plan = env_file_plan(str(tmp_path / "env"), 3)
    facts, probe = facts_and_probe(local_node(), plan)
    assert isinstance(facts, NodeFacts) and facts.pythons
    assert probe is not None and probe.pending == [s.id for s in plan.steps]  # nothing made yet: all pending
