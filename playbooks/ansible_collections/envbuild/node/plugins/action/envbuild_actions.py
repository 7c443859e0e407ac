"""The action of ``envbuild.node.envbuild_actions``: its module's task run on the node in one command,
without AnsiballZ (plugins/plugin_utils/node_task.py); the module documents the parameters."""
from __future__ import annotations

from ansible_collections.envbuild.node.plugins.plugin_utils.node_task import NodeTaskAction


class ActionModule(NodeTaskAction):
    MODULE = "envbuild_actions"
