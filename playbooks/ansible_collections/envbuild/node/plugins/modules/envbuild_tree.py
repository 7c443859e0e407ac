#!/usr/bin/python
"""A source's in-tree build outputs, restored from an archive before its build commands run and
archived after them (module_utils/envbuild_node/treecache.py, envbuild/node/treecache.py); the
role's tree_restore.yml and tree_save.yml move the archive between the node's stash and the
controller's build cache.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: envbuild_tree
short_description: Restore or save a source's in-tree build outputs
description:
  - With O(mode=restore), puts the files of the archive at O(stash) (when there is one) under
    O(outputs) of the tree O(root), with the times they were built at, and dates every other file
    of the tree that is not older than the build's recorded start (or than them) just before it,
    so that a build tool deciding by times finds the outputs up to date. An archive member that is
    not a file or folder under O(outputs), members that clash, or recorded times of other paths
    fail the task before anything is written; so does an output reached through a link. With no
    archive, it stamps the build's start beside O(stash) (kept if a stamp is there already) and
    reports no change.
  - With O(mode=save), archives the files under O(outputs) at O(stash), with the stamped start,
    when there is no archive there yet and the build made every output, and removes the stamp.
    After a restore it writes nothing and says which restored files the build changed. Each line
    it prints begins with "build outputs (KEY):", KEY the folder of O(stash).
version_added: "0.4.0"
author:
  - envbuild authors
options:
  mode:
    description: C(restore) before the build commands, C(save) after them.
    type: str
    choices: [restore, save]
    required: true
  stash:
    description: The archive's path on the node.
    type: path
    required: true
  root:
    description: The source tree.
    type: path
    required: true
  outputs:
    description: The build outputs, paths relative to O(root).
    type: list
    elements: str
    required: true
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Needs only the node's Python standard library.
"""

EXAMPLES = r"""
- name: Restore the build outputs
  envbuild.node.envbuild_tree:
    mode: restore
    stash: /opt/envs/alpa/.envbuild/trees/tree-megatron-0123/outputs.tar
    root: /opt/envs/alpa/src/megatron
    outputs: [megatron/fused_kernels/build]
"""

RETURN = r"""
stdout:
  description: What was done, in words.
  returned: success
  type: str
  sample: "build outputs (tree-megatron-0123): 9 file(s) of megatron/fused_kernels/build restored from the build cache"
"""

from ansible.module_utils.basic import AnsibleModule
# envbuild's node package (envbuild/node/, linked as module_utils/envbuild_node/): a module
# imports module_utils by the collection's full name, the name Ansible gives them
from ansible_collections.envbuild.node.plugins.module_utils.envbuild_node import treecache


def main():
    module = AnsibleModule(argument_spec=dict(
        mode=dict(type="str", choices=["restore", "save"], required=True),
        stash=dict(type="path", required=True),
        root=dict(type="path", required=True),
        outputs=dict(type="list", elements="str", required=True),
    ), supports_check_mode=False)
    p = module.params
    try:
        if p["mode"] == "restore":
            changed, said = treecache.restore(p["stash"], p["root"], p["outputs"])
        else:
            changed, said = False, treecache.save(p["stash"], p["root"], p["outputs"])
    except (treecache.TreeCacheError, OSError, ValueError) as exc:
        module.fail_json(msg="%s of the build outputs failed: %s" % (p["mode"], exc))
    module.exit_json(changed=changed, stdout=said)


if __name__ == "__main__":
    main()
