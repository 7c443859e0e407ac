#!/usr/bin/python
"""Run a batch of envbuild's primitive actions on the node (module_utils/envbuild_node/actions.py;
run.sh and images run the same functions through the node tool, envbuild_node/__main__.py).

The actions are data (argv lists, file contents, a commit to check out, a declarative patch,
a wheel build, a captured smoke run); this module runs them without a shell and without
templating. With repair=true (the step's effect did not hold, see envbuild_state) a run
action's repair_args are added (pip --force-reinstall). With record (the batch is its step's
last), the step is then recorded done as envbuild_state's record does, in the same module run.
In check mode it changes nothing and reports what would run.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: envbuild_actions
short_description: Run a batch of envbuild's primitive actions on a node
description:
  - Runs the node-side actions of one envbuild plan step, in order, without a shell and
    without templating any value.
  - An action is a dictionary with an C(op) key.
    C(run) runs C(argv) (a list) with C(env), C(cwd) and C(path) (folders put first on PATH);
    C(repair_args) are added to C(argv) when O(repair=true); C(changes=false) marks a command that
    only checks (it never reports a change).
    C(write) writes C(content) to C(path) with mode C(perm) (an octal string such as C("0644")).
    C(place) puts the node file C(src) at C(path) with mode C(perm) after checking its sha256 against C(sha256)
    (a mismatch fails, C(path) untouched); not changed where C(path) holds those bytes and mode
    (M(envbuild.node.envbuild_put) sends it).
    C(mkdir) makes the folder C(path).
    C(git) puts a tree at C(dest) on commit C(sha) fetched from C(fetch_url) (C(ref) names the branch or tag).
    C(patch) applies C(spec), a declarative text patch, to a file under C(dest) and keeps its diff in C(diff_dir).
    C(wheel) builds a wheel with C(argv) in C(cwd) (C(env), C(path) as for C(run)) into C(outdir), made first; it
    fails when the build leaves no wheel there.
    C(capture) runs C(argv) in C(cwd) and keeps its output in C(dir)/C(name).{out,err,rc}; the module fails after
    the batch when a captured run failed.
  - The actions are what C(envbuild plan) prints for a step; see the envbuild README.
version_added: "0.1.0"
author:
  - envbuild authors
options:
  actions:
    description: The actions, run in order; the first one that fails stops the batch.
    type: list
    elements: dict
    required: true
  node_path:
    description: PATH for the commands (the node's login PATH); the node's own PATH when empty.
    type: str
  repair:
    description: Add each C(run) action's C(repair_args) (the step's effect did not hold).
    type: bool
    default: false
  record:
    description:
      - After every action succeeded, record the step done as M(envbuild.node.envbuild_state)
        does with its O(envbuild.node.envbuild_state#module:record) option (its effect checked
        in full, then its marker written), in this module run instead of a task of its own.
      - Nothing is recorded in check mode. The marker is bookkeeping, not a change of the node.
    type: dict
    suboptions:
      prefix:
        description: The environment's prefix on the node (the marker lives in its C(.envbuild/state)).
        type: str
        required: true
      id:
        description: The step id.
        type: str
        required: true
      digest:
        description: The step's digest, written into its marker.
        type: str
        required: true
      effect:
        description: The step's effect (data from envbuild), checked in full first; null for none.
        type: raw
attributes:
  check_mode:
    support: full
    description: Runs nothing; reports the operations that would run.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Needs only the node's Python standard library.
"""

EXAMPLES = r"""
- name: Make a venv and install into it
  envbuild.node.envbuild_actions:
    actions:
      - op: mkdir
        path: /opt/env
      - op: run
        argv: [python3, -m, venv, /opt/env/venv]
      - op: write
        path: /opt/env/.envbuild/env.sh
        content: "export NCCL_IB_PCI_RELAXED_ORDERING=1\n"
        perm: "0644"
    node_path: /usr/local/bin:/usr/bin:/bin
"""

RETURN = r"""
recorded:
  description: The step recorded done.
  returned: success with O(record), outside check mode
  type: str
effect:
  description: What the full effect check of the recorded step found.
  returned: success with O(record), outside check mode
  type: str
stdout:
  description: The commands that ran, each followed by the tail of its output.
  returned: success
  type: str
  sample: "$ /opt/env/venv/bin/python -m pip install --require-hashes -r /opt/env/req.txt"
captured:
  description: The sha256 of each file the batch's C(capture) actions wrote, by its path.
  returned: success, and failure after a captured run failed
  type: dict
would_run:
  description: The operations of the batch (check mode only).
  returned: check mode
  type: list
  elements: str
  sample: [mkdir, run]
cmd:
  description: The argv of the command that failed.
  returned: failure of a command
  type: list
  elements: str
rc:
  description: The exit code of the command that failed.
  returned: failure of a command
  type: int
stderr:
  description: The standard error of the command that failed.
  returned: failure of a command
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
# envbuild's node package (envbuild/node/, linked as module_utils/envbuild_node/): a module
# imports module_utils by the collection's full name, the name Ansible gives them. The action
# plugin of this name (plugins/action/envbuild_actions.py) runs the same task without AnsiballZ.
from ansible_collections.envbuild.node.plugins.module_utils.envbuild_node import task as node_task


def main():
    module = AnsibleModule(argument_spec=node_task.SPECS["envbuild_actions"], supports_check_mode=True)
    res = node_task.run_task("envbuild_actions", module.params, module.check_mode)
    if res.pop("failed", False):
        module.fail_json(**res)
    module.exit_json(**res)


if __name__ == "__main__":
    main()
