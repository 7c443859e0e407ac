#!/usr/bin/python
"""Documentation of the action ``envbuild.node.envbuild_fetch`` (plugins/action/envbuild_fetch.py):
the work is done by that action on the controller; there is no module code to run."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: envbuild_fetch
short_description: Bring files of a node into a controller folder, each checked by its sha256
description:
  - Fetches each file of O(src) through the task's connection into O(dest) (by its base name),
    compares its sha256 with the one O(sha256) gives for it, and keeps it only where they
    match (written beside, then renamed into place). A file without a sha256 in O(sha256), or
    whose bytes differ, fails the task and leaves no file of it.
  - O(sha256) is what the run that wrote the files reported, such as the C(captured) result of
    M(envbuild.node.envbuild_actions) (its C(capture) actions); no module runs on the node,
    where M(ansible.builtin.fetch) runs a remote stat for each file.
  - Where the task becomes another user, each file is read through M(ansible.builtin.slurp), as
    M(ansible.builtin.fetch) reads it then, and checked the same way.
version_added: "0.6.0"
author:
  - envbuild authors
options:
  src:
    description: The files on the node; their base names must differ.
    type: list
    elements: str
    required: true
  dest:
    description: The folder on the controller, made when missing.
    type: path
    required: true
  sha256:
    description: The sha256 of each file of O(src), by its path there.
    type: dict
    required: true
attributes:
  check_mode:
    support: full
    description: Fetches nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Not run asynchronously.
"""

EXAMPLES = r"""
- name: Run and capture
  envbuild.node.envbuild_actions:
    actions:
      - op: capture
        name: gpt
        argv: [python, gpt.py]
        cwd: /opt/env/smoke
        dir: /opt/env/smoke
  register: captured

- name: Bring the outputs back
  envbuild.node.envbuild_fetch:
    src:
      - /opt/env/smoke/gpt.out
      - /opt/env/smoke/gpt.err
      - /opt/env/smoke/gpt.rc
    dest: /home/me/runs/1/smoke
    sha256: "{{ captured.captured }}"
"""

RETURN = r"""
fetched:
  description: The controller's files, as kept.
  returned: always
  type: list
  elements: str
"""
