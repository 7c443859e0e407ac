#!/usr/bin/python
"""Documentation of the action ``envbuild.node.envbuild_put`` (plugins/action/envbuild_put.py):
the work is done by that action on the controller and by the ``place`` action of
``envbuild_actions`` on the node; there is no module code to run."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: envbuild_put
short_description: Put one file of the controller on a node, its bytes checked there
description:
  - Takes the sha256 of O(src) on the controller, transfers the file into the task's remote
    temporary folder through the task's connection, then, in one run of
    M(envbuild.node.envbuild_actions) on the node, checks that the bytes that arrived have that
    sha256 and writes them at O(dest) with O(mode) atomically. A mismatch fails the task and
    leaves O(dest) as it was.
  - Where O(dest) holds those bytes with that mode already, nothing is written (not changed).
  - The temporary folder is removed afterwards, as Ansible removes its own.
  - Where M(ansible.builtin.copy) runs two modules for a file (a remote stat, then copy), this
    runs no AnsiballZ module with pipelining on (envbuild turns it on).
version_added: "0.6.0"
author:
  - envbuild authors
options:
  src:
    description: The file on the controller, an absolute path.
    type: path
    required: true
  dest:
    description: Where the file goes on the node, an absolute path (C(~) is expanded there); its folder must exist.
    type: str
    required: true
  mode:
    description:
      - The file's mode, an octal string such as C("0755").
      - A number is read as YAML reads an unquoted C(0755), in octal, as M(ansible.builtin.copy) reads it.
    type: raw
    required: true
attributes:
  check_mode:
    support: full
    description: Transfers nothing; reports that the file would be put.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Needs only the node's Python standard library.
  - Not run asynchronously.
"""

EXAMPLES = r"""
- name: Put uv on the node
  envbuild.node.envbuild_put:
    src: /home/me/.local/bin/uv
    dest: /opt/env/.envbuild/tools/uv
    mode: "0755"
"""

RETURN = r"""
dest:
  description: Where the file was put.
  returned: always
  type: str
sha256:
  description: The sha256 of O(src), checked on the node.
  returned: always
  type: str
"""
