"""Data is never code: values from recipes, locks, facts and inventories reach Ansible as
untrusted data and shells quoted. Each payload below would create a file if it were
templated by Jinja on the controller or expanded by a shell on the node; none may.

Kinds covered (each through the real playbook on this machine): a lock's requirement
string, an environment-file value (Jinja and shell forms), a build command's env value, the
environment prefix, the node's $PATH fact, the node's interpreter path (an inventory
connection variable), a git ref. Environment variable *names* are refused at load time
(tests/cli/test_bad_input.py) and again when the env file is written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envbuild.actions.steps import env_file_text
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.testbed.local_plan import run_local_plan

pytestmark = pytest.mark.integration


def jinja(marker: Path) -> str:
    return "{{ lookup('pipe', 'touch " + str(marker) + "') }}"


def shell(marker: Path) -> str:
    return f"$(touch {marker})`touch {marker}`;touch {marker}"


def plan_of(prefix: str, *steps: Step) -> Plan:
    env = Step(id="environment", title="venv", params=P.EnvironmentParams(
        backend="venv", prefix=prefix, python="3.11", interpreter=sys.executable))
    return Plan(recipe="t", target="local", host="local", prefix=prefix, backend="venv",
                steps=[env, *steps])


def test_payloads_in_plan_values_are_data(tmp_path):
    marks = {k: tmp_path / f"pwned-{k}" for k in ("req", "envj", "envs", "build", "ref")}
    prefix = str(tmp_path / "env")
    plan = plan_of(
        prefix,
        Step(id="env-file", title="env", params=P.EnvFileParams(
            path=f"{prefix}/.envbuild/env.sh",
            vars={"A": jinja(marks["envj"]), "B": shell(marks["envs"])})),
        Step(id="build:x", title="b", params=P.BuildParams(
            name="x", dest=str(tmp_path), commands=['printf "%s" "$V" > v.txt'],
            env={"V": jinja(marks["build"]) + shell(marks["build"])})),
        Step(id="pip:packages", title="p", params=P.PipInstallParams(
            requirements=[P.Requirement(name="tqdm", version="4.70.1",
                                        requirement="tqdm==4.70.1" + jinja(marks["req"]))],
            no_index=True, unverified=["tqdm"])),
    )
    rc, host, _ = run_local_plan(tmp_path, plan)
    assert rc != 0 and host.failed_step == "pip:packages"  # pip refuses the odd requirement
    assert not [m for m in marks.values() if m.exists()]
    # the values arrived verbatim: written as text, passed to the build command unchanged
    written = Path(prefix, ".envbuild/env.sh").read_text()
    assert env_file_text(prefix, {"A": jinja(marks["envj"]), "B": shell(marks["envs"])}) == written
    assert (tmp_path / "v.txt").read_text() == jinja(marks["build"]) + shell(marks["build"])
    req = Path(prefix, ".envbuild/requirements/pip-packages-unverified.txt").read_text()
    assert jinja(marks["req"]) in req
    # sourcing the env file runs nothing either
    import subprocess

    out = subprocess.run(["sh", "-c", f'. "{prefix}/.envbuild/env.sh" && printf "%s" "$B"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == shell(marks["envs"]) and not marks["envs"].exists()


def test_payloads_in_node_values_are_data(tmp_path):
    marks = {k: tmp_path / f"pwned-{k}" for k in ("interp", "path", "prefix")}
    prefix = str(tmp_path / ("env" + jinja(marks["prefix"]).replace("/", "_")))
    rc, host, _ = run_local_plan(tmp_path, plan_of(prefix), node_path=jinja(marks["path"]) + ":/usr/bin:/bin")
    assert rc == 0, host.message  # a prefix full of braces is only a strange folder name
    assert Path(prefix, "bin", "python").exists()
    rc, host, _ = run_local_plan(tmp_path / "2", plan_of(str(tmp_path / "env2")),
                                 connection={"ansible_python_interpreter": jinja(marks["interp"])})
    assert rc != 0  # no interpreter by that name
    assert not [m for m in marks.values() if m.exists()]


def test_env_file_refuses_a_name_that_is_not_a_posix_name():
    with pytest.raises(ValueError, match="not a POSIX variable name"):
        env_file_text("/p", {"X=1; touch pwned; Y": "1"})
