#!/usr/bin/python
"""Which plan steps must run on this node; with record=<id>, mark one step done.

A step is done when its marker ``<prefix>/.envbuild/state/<id>.done`` holds the step's digest
**and** its effect holds on the node now (``effect``: data from ``envbuild.actions.effects``,
checked by ``module_utils/envbuild_node/effects.check_effect``: distributions and their RECORD
files, git HEAD and tree, patches, file digests). The first step that is not done runs again
with every step after it; ``repair`` names the pending steps whose actions must force a
reinstall (pip says "already satisfied" when metadata is there and files are not);
``effect_failed`` the steps whose marker matched but whose effect did not hold.

record=<id> (after the step ran): the step's effect is checked in full (every RECORD hash),
the manifest that makes later checks fast is kept, then the marker is written; a step whose
effect does not hold after it ran fails here. Outside check mode the state check rewrites the
manifest of a done step whose files' stat changed but whose contents were verified (a cache:
it is not reported as a change); check mode reads and never writes.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: envbuild_state
short_description: Which envbuild plan steps are done on a node, or record one as done
description:
  - Without O(record), reads each step's marker under O(prefix)/.envbuild/state and checks the
    step's effect on the node now (installed distributions and their RECORD files, git HEAD and
    tree, patches, file digests). The first step that is not done, and every step after it,
    are returned in RV(pending). Outside check mode it empties C(<prefix>/.envbuild/tmp), the
    temporary folder of the node's tasks, of what earlier (killed) runs left; it changes
    nothing else (RV(ignore:changed) is always false).
  - With O(record), checks the effect of that step in full (every RECORD hash), keeps the
    manifest that makes later checks fast, then writes the step's marker with O(digest).
    Fails when the effect does not hold. Reports a change only when the marker changed.
version_added: "0.1.0"
author:
  - envbuild authors
options:
  prefix:
    description: The environment's prefix on the node; state lives in C(<prefix>/.envbuild/state).
    type: str
    required: true
  steps:
    description: The plan's step ids, in plan order.
    type: list
    elements: str
    default: []
  digests:
    description: Each step's digest, in the order of O(steps).
    type: list
    elements: str
    default: []
  effects:
    description: Each step's effect (data from envbuild), in the order of O(steps); null for none.
    type: list
    elements: raw
    default: []
  from_step:
    description: Run again from this step id (C(envbuild provision --from-step) or C(--force)).
    type: str
  record:
    description: Record this step id as done (after its actions ran).
    type: str
  digest:
    description: The digest written into the marker of O(record).
    type: str
  effect:
    description: The effect of O(record), checked in full before the marker is written.
    type: raw
attributes:
  check_mode:
    support: full
    description: Reads and never writes; O(record) records nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Needs only the node's Python standard library.
"""

EXAMPLES = r"""
- name: Which steps must run
  envbuild.node.envbuild_state:
    prefix: /opt/env
    steps: [environment, "pip:packages"]
    digests: [4f0c1d2e, 9a8b7c6d]
  register: provision_state

- name: Record a step as done
  envbuild.node.envbuild_state:
    prefix: /opt/env
    record: environment
    digest: 4f0c1d2e
"""

RETURN = r"""
done:
  description: Steps whose marker matches and whose effect holds (state check).
  returned: without record
  type: list
  elements: str
pending:
  description: Steps that run, in plan order (state check).
  returned: without record
  type: list
  elements: str
repair:
  description: Pending steps whose actions must force a reinstall (state check).
  returned: without record
  type: list
  elements: str
effect_failed:
  description: Step id to detail, for steps whose marker matched but whose effect did not hold.
  returned: without record
  type: dict
reasons:
  description: Step id to why it runs.
  returned: without record
  type: dict
effects:
  description: Step id to the result of its effect check (ok, detail).
  returned: without record
  type: dict
prefix:
  description: The prefix, with ~ expanded.
  returned: without record
  type: str
tmp_cleared:
  description: >-
    What earlier runs left in C(<prefix>/.envbuild/tmp), the temporary folder of the node's
    tasks, removed before the steps run (never in check mode).
  returned: without record
  type: list
  elements: str
recorded:
  description: The step recorded (null in check mode).
  returned: with record
  type: str
effect:
  description: What the full effect check found.
  returned: with record, outside check mode
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
# envbuild's node package (envbuild/node/, linked as module_utils/envbuild_node/): a module
# imports module_utils by the collection's full name, the name Ansible gives them. The action
# plugin of this name (plugins/action/envbuild_state.py) runs the same task without AnsiballZ.
from ansible_collections.envbuild.node.plugins.module_utils.envbuild_node import task as node_task


def main():
    module = AnsibleModule(argument_spec=node_task.SPECS["envbuild_state"], supports_check_mode=True)
    # keep: this module's own payload, in the prefix's temporary folder when not pipelined
    res = node_task.run_task("envbuild_state", module.params, module.check_mode, keep=__file__)
    if res.pop("failed", False):
        module.fail_json(**res)
    module.exit_json(**res)


if __name__ == "__main__":
    main()
