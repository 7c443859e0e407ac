#!/usr/bin/python
"""Where a node's copy of a fleet's archive came from (``envbuild provision --fanout``): the
registered results of the role's tasks (tasks/stage_tree.yml) in, a typed ``stage`` out.

The decision is ``where_from`` of module_utils/envbuild_node/stage.py (envbuild/node/stage.py),
a pure function; this module only hands it its options. envbuild's event tracker reads the
result's ``stage`` (envbuild/execute/events.py).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: envbuild_stage
short_description: Say where a node's copy of a fleet's archive came from, and why
description:
  - For C(envbuild provision --fanout), where the copy of the fleet's archive this node holds
    came from - C(kept) (its checked copy of an earlier run), C(holder) (the node above it in
    the tree sent it, and its sha256 matched) or C(controller) (it takes the controller's
    copy) - with the reason, read from the registered results of the tasks that tried.
  - Reads only its options; changes nothing on the node (RV(ignore:changed) is always false).
version_added: "0.3.0"
author:
  - envbuild authors
options:
  sha256:
    description: The sha256 of the archive.
    type: str
    required: true
  holder:
    description: The node this one takes its copy from; empty for none.
    type: str
    default: ""
  holder_in_play:
    description: Whether O(holder) is a host of the play.
    type: bool
    default: false
  why_controller:
    description: Why the tree gives this node no holder to take it from; empty when it has one.
    type: str
    default: ""
  kept:
    description: The registered result of M(ansible.builtin.stat) on the kept copy, before (its C(stat.checksum)).
    type: dict
    default: {}
  waited:
    description: >-
      The registered result of M(ansible.builtin.wait_for) on the holder's C(.ok) file (its
      C(state) once it settled, else its C(msg)).
    type: dict
    default: {}
  served:
    description: >-
      The registered result of M(ansible.builtin.slurp) of the holder's C(.ok) file (its
      C(content): the sha256 of the holder's checked copy, or C(none)).
    type: dict
    default: {}
  sent:
    description: The registered result of the holder's C(scp) (its C(rc) and C(stderr)).
    type: dict
    default: {}
  held:
    description: The registered result of M(ansible.builtin.stat) on this node's copy, after (its C(stat.checksum)).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reads its options only, as outside check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Needs only the node's Python standard library.
  - A task that did not run registers a skipped result; pass it as it is.
"""

EXAMPLES = r"""
- name: Where this node's copy came from
  envbuild.node.envbuild_stage:
    sha256: "{{ provision_stage.sha256 }}"
    holder: "{{ provision_stage.from }}"
    holder_in_play: "{{ provision_stage.from in ansible_play_hosts }}"
    why_controller: "{{ provision_stage.why_controller }}"
    kept: "{{ provision_stage_kept }}"
    waited: "{{ provision_stage_waited }}"
    served: "{{ provision_stage_served }}"
    sent: "{{ provision_stage_sent }}"
    held: "{{ provision_stage_held }}"
  register: provision_stage_source
"""

RETURN = r"""
stage:
  description: Where this node's copy came from.
  returned: success
  type: dict
  contains:
    source:
      description: C(kept), C(holder) or C(controller).
      type: str
      sample: controller
    holder:
      description: The node this one takes its copy from (empty for none), whatever the source.
      type: str
      sample: node1
    why:
      description: Why the copy did not come from the holder; empty when it did.
      type: str
      sample: "node1: Permission denied (publickey)."
"""

from ansible.module_utils.basic import AnsibleModule
# envbuild's node package (envbuild/node/, linked as module_utils/envbuild_node/): a module
# imports module_utils by the collection's full name, the name Ansible gives them
from ansible_collections.envbuild.node.plugins.module_utils.envbuild_node import stage as node_stage


def main():
    module = AnsibleModule(argument_spec=dict(
        sha256=dict(type="str", required=True),
        holder=dict(type="str", default=""),
        holder_in_play=dict(type="bool", default=False),
        why_controller=dict(type="str", default=""),
        kept=dict(type="dict", default={}),
        waited=dict(type="dict", default={}),
        served=dict(type="dict", default={}),
        sent=dict(type="dict", default={}),
        held=dict(type="dict", default={}),
    ), supports_check_mode=True)
    try:
        stage = node_stage.where_from(**{k: module.params[k] for k in node_stage.WHERE_FROM_ARGS})
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, stage=stage._asdict())


if __name__ == "__main__":
    main()
