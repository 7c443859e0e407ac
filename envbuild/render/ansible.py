"""Plan -> Ansible inventory (host vars carry each node's steps) and extra vars. Pure.

The playbook (playbooks/provision.yml) reads per host ``envbuild_prefix``, ``envbuild_python``,
``envbuild_node_path`` and ``envbuild_steps`` (each ``{id, kind, title, params, digest,
derived}``); ``derived`` holds values computed here from ``params`` that are not part of the
step's identity (e.g. the Apex wheel-build argv).
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.execute.nodes import Node
from envbuild.plan.model import Plan, Step


@dataclass(frozen=True)
class Rendered:
    inventory: dict  # Ansible JSON/YAML inventory
    extravars: dict  # -e @extravars.json


def wheel_argv(python: str, argv: list[str], outdir: str) -> list[str]:
    """Turn an install command (``pip install ... ./`` or ``python setup.py install ...``)
    into the command that builds the same thing as a wheel into ``outdir``.

    A command that already builds a wheel (``setup.py ... bdist_wheel -d DIR`` or ``pip wheel
    ... -w DIR``, what ``envbuild.patches.apex_build.install_command(wheel_dir=...)`` returns)
    keeps its shape and gets ``outdir`` as its output folder."""
    a = list(argv)
    if a and a[0] in ("pip", "pip3"):
        a = [python, "-m", "pip"] + a[1:]
    elif a and a[0].startswith("python"):
        a[0] = python
    if "setup.py" in a:
        if "bdist_wheel" in a:
            return _with_outdir(a, a.index("bdist_wheel"), ("-d", "--dist-dir"), outdir)
        i = a.index("install") if "install" in a else len(a)
        a[i:i + 1] = ["bdist_wheel", "-d", outdir]
        return a
    if "wheel" in a and "install" not in a:
        a = _with_outdir(a, a.index("wheel"), ("-w", "--wheel-dir"), outdir)
    elif "install" in a:
        i = a.index("install")
        a[i:i + 1] = ["wheel", "--no-deps", "-w", outdir]
    return [x for x in a if x not in ("--no-cache-dir", "--force-reinstall", "-e")]


def _with_outdir(a: list[str], after: int, flags: tuple[str, ...], outdir: str) -> list[str]:
    """``a`` with the output-folder option following index ``after`` set to ``outdir``."""
    out = a[:after + 1]
    rest = a[after + 1:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word in flags and i + 1 < len(rest):
            i += 2
            continue
        if any(word.startswith(f + "=") for f in flags if f.startswith("--")):
            i += 1
            continue
        out.append(word)
        i += 1
    return out[:after + 1] + [flags[0], outdir] + out[after + 1:]


def step_vars(step: Step, prefix: str, python: str) -> dict:
    """One step as the playbook sees it."""
    derived: dict = {}
    if step.kind == "apex_build":
        out = f"{prefix}/.envbuild/wheels/{step.params.get('cache_key', 'apex')}"
        derived["wheel_argv"] = wheel_argv(python, step.params.get("argv") or [], out)
    return {"id": step.id, "kind": step.kind, "title": step.title, "params": step.params,
            "digest": step.digest, "derived": derived}


def host_vars(plan: Plan, node: Node) -> dict:
    """Connection variables plus the node's plan."""
    python = f"{plan.prefix}/bin/python"
    hv: dict = {"envbuild_prefix": plan.prefix, "envbuild_python": python,
                "envbuild_node_path": node.node_path,
                "envbuild_steps": [step_vars(s, plan.prefix, python) for s in plan.steps]}
    if node.is_local:
        hv["ansible_connection"] = "local"
    else:
        hv["ansible_host"] = node.host
        if node.user:
            hv["ansible_user"] = node.user
        if node.port:
            hv["ansible_port"] = node.port
        if node.identity_file:
            hv["ansible_ssh_private_key_file"] = node.identity_file
        if node.insecure:
            hv["ansible_ssh_common_args"] = ("-o StrictHostKeyChecking=no "
                                             "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")
    if node.python:
        hv["ansible_python_interpreter"] = node.python
    return hv


def render(plans: dict[str, Plan], nodes: list[Node], *, run_dir: str, cache_dir: str,
           smoke_src: str | None = None, smoke_available: list[str] | None = None) -> Rendered:
    """Inventory for the nodes that have a plan, and the run-wide extra vars."""
    hosts = {n.name: host_vars(plans[n.name], n) for n in nodes if n.name in plans}
    extravars = {"envbuild_run_dir": run_dir, "envbuild_cache_dir": cache_dir}
    if smoke_src:
        extravars["envbuild_smoke_src"] = smoke_src
        extravars["envbuild_smoke_available"] = sorted(smoke_available or [])
    return Rendered(inventory={"all": {"hosts": hosts}}, extravars=extravars)
