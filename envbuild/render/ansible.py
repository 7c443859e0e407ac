"""Plan -> Ansible inventory and extra vars, from the plan's actions. Pure.

Per host the playbook (playbooks/provision.yml: the role ``envbuild.node.provision``,
whose meta/argument_specs.yml documents its inputs) reads ``provision_prefix``,
``provision_node_path`` and ``provision_plan_json``: the steps as one JSON string, each
``{id, kind, title, digest, effect, batches}``, where a batch is what one task runs:

- ``{type: node, actions: [...]}``: consecutive node-side actions, one ``envbuild_actions``
  module call (run, write, mkdir, git, patch);
- ``{type: put, src, dest, mode}``: one of envbuild's files from the controller (uv's binary,
  a JSON file), transferred by ``envbuild_put`` and checked on the node by its sha256, where
  Ansible's copy runs two modules (the node batch before it makes its folder);
- ``{type: copy, src, dest, mode}``: a controller folder with no archive of it (a stage);
- ``{type: text, src, dest, mode}``: one of envbuild's Python files (``is_text_asset``: the
  smoke scripts, the node package's tools), read on the controller and written on the node by one
  ``envbuild_actions`` run (``tasks/batch_text.yml``), where Ansible's copy runs two modules
  (its remote stat, then copy) through AnsiballZ;
- ``{type: stage, archive, dest}``: a staged folder (a bundle's ``node/``, a fleet's wheels)
  as the one tar its params name (``BundleParams.archive``), copied and unpacked into ``dest``
  (one transfer, not one per file; the step's effect checks every file's sha256 on the node);
- ``{type: wheel, ...}``: a wheel built once per cache key (controller wheel cache);
- ``{type: tree_restore | tree_save, cache_key, stash, root, outputs}``: around a build step
  whose in-tree outputs are cached per key (``BuildParams.cache_key``): the controller cache's
  archive restored before the commands, the node's archive taken into it after them
  (``tree_restore.yml``, ``tree_save.yml``, ``envbuild.node.treecache``);
- ``{type: capture, actions, fetch}``: the smoke runs, their outputs brought back (``envbuild_fetch``,
  each file checked against the sha256 the run reported), then the step fails if one of them did;
- a last node batch carries ``record: true``: it records its step done in the same module
  run (its effect checked in full, then its marker), one Ansible task and one Python start
  less per step; the role records every other step with a task of its own.

A step made of one node batch alone (``form: node``: most steps) is one task of the role,
``Envbuild node step <id>`` (tasks/step_node.yml), whose start and end events are the step's
(``envbuild.execute.events``); any other step (``form: batches``) is announced and closed by
two tasks of its own around an include per batch (tasks/step.yml). On 2 cores a step of the
first form costs ~0.2 s less of Ansible's time (three tasks and an include fewer).

Every value is data. The steps travel as one JSON string that the playbook reads with
``from_json``: the string is ``!unsafe`` and so is everything parsed from it, and JSON keeps
the types (ansible-core 2.19 re-resolves ``!unsafe '0644'`` as the integer 420, ``'3.10'`` as
3.1). The other strings (connection variables, paths) are tagged ``!unsafe`` too, so Ansible
never templates a value from a recipe, lock, facts or inventory
(``{{ lookup('pipe', ...) }}`` in a version string stays text).
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass

import yaml

from envbuild.actions.assets import asset_source
from envbuild.actions.effects import effect_data
from envbuild.actions.model import MakeDir
from envbuild.render.steps import step_actions
from envbuild.plan.model import Plan, Step
from envbuild.plan.params import BuildParams
from envbuild.redact import secret_key

NODE_OPS = ("run", "write", "mkdir", "git", "patch")
# envbuild's Python files among the assets (these groups, ``.py``): a ``text`` batch, not a copy.
# Python source is UTF-8 text and never starts with ``{`` or ``[``, which ansible-core before
# 2.19 would turn from the lookup's text into a dict or a list; other files (uv's binary, a
# JSON file) are put (``envbuild_put``).
TEXT_ASSETS = ("smoke", "node")


def is_text_asset(asset: str) -> bool:
    """Whether ``asset`` (``<group>/<file>``) goes to the node as a ``text`` batch.

    >>> is_text_asset("smoke/gpt.py"), is_text_asset("smoke/references.json"), is_text_asset("uv/uv")
    (True, False, False)
    """
    group, _, name = asset.partition("/")
    return group in TEXT_ASSETS and name.endswith(".py")


@dataclass(frozen=True)
class Rendered:
    inventory: dict  # Ansible inventory ({all: {hosts: {name: vars}}})
    extravars: dict  # -e @extravars

    def inventory_text(self) -> str:
        """The inventory less its credentials (``split_secrets``): what the run folder holds."""
        return dump_unsafe(split_secrets(self.inventory)[0])

    def secret_inventory_text(self) -> str:
        """An inventory of only the hosts' credentials (``ansible_password``...), "" when there
        are none: never written into the run folder (``envbuild.execute.ansible``)."""
        secrets = split_secrets(self.inventory)[1]
        return dump_unsafe(secrets) if secrets["all"]["hosts"] else ""

    def extravars_text(self) -> str:
        return dump_unsafe(self.extravars)


def batches(step: Step, prefix: str) -> list[dict]:
    """The step's actions grouped into the playbook's task batches."""
    out: list[dict] = []
    made: set[str] = set()  # folders the step's node batches make before a copy needs them
    for act in step_actions(step, prefix):
        data = act.model_dump(mode="json")
        op = data["op"]
        if op == "mkdir":
            made.add(data["path"].rstrip("/"))
        if op in NODE_OPS:
            if out and out[-1]["type"] == "node":
                out[-1]["actions"].append(data)
            else:
                out.append({"type": "node", "actions": [data]})
        elif op == "copy":
            _folder_first(out, posixpath.dirname(data["dest"]), made)
            kind = "text" if is_text_asset(data["asset"]) else "put"
            out.append({"type": kind, "src": asset_source(data["asset"]), "dest": data["dest"],
                        "mode": data["perm"]})
        elif op == "stage" and getattr(step.params, "archive", ""):  # one archive, unpacked on the node
            _folder_first(out, data["dest"], made)
            out.append({"type": "stage", "archive": step.params.archive, "dest": data["dest"]})
        elif op == "stage":  # a whole controller folder with no archive of it: one copy task
            _folder_first(out, posixpath.dirname(data["dest"].rstrip("/")), made)
            out.append({"type": "copy", "src": data["src"], "dest": data["dest"], "mode": "0644"})
        elif op == "wheel":
            out.append({"type": "wheel", **{k: v for k, v in data.items() if k != "op"}})
        elif op == "capture":
            if out and out[-1]["type"] == "capture":
                out[-1]["actions"].append(data)
            else:
                out.append({"type": "capture", "actions": [data], "fetch": []})
            out[-1]["fetch"] += [f"{data['dir']}/{data['name']}.{ext}" for ext in ("out", "err", "rc")]
        else:  # pragma: no cover - every op of envbuild.actions.model is handled above
            raise ValueError(f"no Ansible batch for action {op!r}")
    if isinstance(step.params, BuildParams) and step.params.cache_key:
        tree = {"cache_key": step.params.cache_key, "stash": tree_stash(prefix, step.params.cache_key),
                "root": step.params.dest, "outputs": list(step.params.outputs)}
        out = [{"type": "tree_restore", **tree}, *out, {"type": "tree_save", **tree}]
    return out


def tree_stash(prefix: str, key: str) -> str:
    """Where a node keeps the archive of a build step's cached outputs (``tree_restore.yml``)."""
    return f"{prefix}/.envbuild/trees/{key}/outputs.tar"


def _folder_first(out: list[dict], folder: str, made: set[str]) -> None:
    """A copy or an unpack needs its folder on the node: a ``mkdir`` at the end of the node batch
    before it (one action more in a module run that happens anyway, not an Ansible task of its
    own), else a node batch of its own; nothing when an earlier action of the step made it."""
    folder = folder.rstrip("/") or "/"
    if folder in made:
        return
    made.add(folder)
    mkdir = MakeDir(path=folder).model_dump(mode="json")
    if out and out[-1]["type"] == "node":
        out[-1]["actions"].append(mkdir)
    else:
        out.append({"type": "node", "actions": [mkdir]})


def step_vars(step: Step, prefix: str) -> dict:
    """One step as the playbook sees it; a last node batch records it done. ``form`` picks the
    step's task file (``provision_step_tasks`` in the role's vars/main.yml): ``node`` when the
    step is that one node batch alone (one task, named for the step, whose start and end are
    the step's: no announcing tasks, no include per batch), else ``batches``."""
    out = batches(step, prefix)
    if out and out[-1]["type"] == "node":
        out[-1]["record"] = True
    form = "node" if len(out) == 1 and out[0]["type"] == "node" else "batches"
    return {"id": step.id, "kind": step.kind, "title": step.title, "digest": step.digest, "batches": out,
            "form": form}


def host_vars(plan: Plan, connection: dict, node_path: str) -> dict:
    """The node's connection variables plus its plan; each step carries its ``effect``
    (``envbuild.actions.effects``), what the playbook checks before skipping it."""
    effects = effect_data(plan)
    steps = [{**step_vars(s, plan.prefix), "effect": effects[s.id]} for s in plan.steps]
    return {**connection, "provision_prefix": plan.prefix, "provision_node_path": node_path,
            "provision_plan_json": json.dumps(steps, sort_keys=True)}


def steps_of(inventory_host_vars: dict) -> list[dict]:
    """The steps a rendered host carries (the inverse of ``host_vars``' encoding)."""
    return json.loads(inventory_host_vars["provision_plan_json"])


def render(plans: dict[str, Plan], connections: dict[str, dict], node_paths: dict[str, str], *,
           run_dir: str, cache_dir: str) -> Rendered:
    """Inventory for the nodes that have a plan, and the run-wide extra vars."""
    hosts = {name: host_vars(plans[name], connections[name], node_paths[name])
             for name in connections if name in plans}
    extravars = {"provision_run_dir": run_dir, "provision_cache_dir": cache_dir}
    return Rendered(inventory={"all": {"hosts": hosts}}, extravars=extravars)


def split_secrets(inventory: dict) -> tuple[dict, dict]:
    """(the inventory without its hosts' credential variables, an inventory of only those).

    Ansible merges two inventories that name the same hosts, so ``-i public -i secret`` gives
    each host all of its variables.

    >>> split_secrets({"all": {"hosts": {"n1": {"ansible_host": "h", "ansible_password": "pw"}}}})
    ({'all': {'hosts': {'n1': {'ansible_host': 'h'}}}}, {'all': {'hosts': {'n1': {'ansible_password': 'pw'}}}})
    """
    public: dict = {}
    secret: dict = {}
    for name, hostvars in inventory["all"]["hosts"].items():
        public[name] = {k: v for k, v in hostvars.items() if not (isinstance(v, str) and secret_key(k))}
        hidden = {k: v for k, v in hostvars.items() if isinstance(v, str) and secret_key(k)}
        if hidden:
            secret[name] = hidden
    return {"all": {"hosts": public}}, {"all": {"hosts": secret}}


class _UnsafeDumper(yaml.SafeDumper):
    pass


def _unsafe_str(dumper: yaml.SafeDumper, value: str):
    return dumper.represent_scalar("!unsafe", value, style='"' if ("\n" in value or not value) else None)


def _plain_keys(dumper: yaml.SafeDumper, value: dict):
    items = []
    for k in sorted(value):
        key = dumper.represent_scalar("tag:yaml.org,2002:str", str(k))
        items.append((key, dumper.represent_data(value[k])))
    return yaml.MappingNode("tag:yaml.org,2002:map", items, flow_style=False)


_UnsafeDumper.add_representer(str, _unsafe_str)
_UnsafeDumper.add_representer(dict, _plain_keys)


def dump_unsafe(obj: object) -> str:
    """YAML text of ``obj`` with every string tagged ``!unsafe`` (never templated)."""
    return "# written by envbuild: every string is data (!unsafe), never templated\n" + yaml.dump(
        obj, Dumper=_UnsafeDumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=4096)
