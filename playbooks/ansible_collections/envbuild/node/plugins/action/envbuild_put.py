"""The action ``envbuild.node.envbuild_put``: one file of the controller onto the node, its bytes
checked there (plugins/modules/envbuild_put.py documents the parameters).

``ansible.builtin.copy`` runs two modules through AnsiballZ for a file: a remote stat (its
checksum), then copy. Here the file's sha256 is taken on the controller, the file is
transferred into the task's remote temporary folder by the connection (as copy transfers it,
become's permissions fixed as copy fixes them), and one ``envbuild_actions`` run (its ``place``
action, through ``NodeTaskAction``) checks the bytes that arrived and puts them at ``dest``
atomically, or leaves ``dest`` as it is where it holds them already (not changed). The
temporary folder is removed in every case. In check mode nothing is transferred: the task says
it would put the file.
"""
from __future__ import annotations

import os
import re

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.envbuild.node.plugins.plugin_utils.digest import sha256_file
from ansible_collections.envbuild.node.plugins.plugin_utils.node_task import NodeTaskAction

ARGS = dict(
    src=dict(type="path", required=True),
    dest=dict(type="str", required=True),
    mode=dict(type="raw", required=True),
)


def octal_mode(mode) -> str:
    """The mode as an octal string: ``"0755"`` as given, a number as YAML reads an unquoted
    ``0755`` (493) in octal, as copy takes it; anything else refused."""
    if isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o7777:
        return "%04o" % mode
    if isinstance(mode, str) and re.fullmatch(r"0?[0-7]{3,4}", mode):
        return mode
    raise AnsibleActionFail("mode must be an octal string such as \"0755\" (or a number), got %r" % (mode,))


class ActionModule(NodeTaskAction):
    MODULE = "envbuild_put"
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = ActionBase.run(self, tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGS)
        src = args["src"]
        if not os.path.isabs(src) or not os.path.isfile(src):
            raise AnsibleActionFail("src %r is not a file of the controller (an absolute path)" % src)
        mode = octal_mode(args["mode"])
        dest = self._remote_expand_user(args["dest"])  # ~ as copy expands it (on the node)
        if not dest.startswith("/"):
            raise AnsibleActionFail("dest %r is not an absolute path of the node" % args["dest"])
        digest = sha256_file(src)
        result.update(dest=dest, sha256=digest)
        if self._task.check_mode:
            result["changed"] = True
            return result
        folder = self._make_tmp_path()
        try:
            remote = self._connection._shell.join_path(folder, "envbuild-put")
            self._transfer_file(src, remote)
            self._fixup_perms2((folder, remote), execute=False)
            place = {"op": "place", "src": remote, "path": dest, "perm": mode, "sha256": digest}
            result = self._node_task("envbuild_actions", {"actions": [place], "node_path": None, "repair": False,
                                                          "record": None}, result, task_vars)
        finally:  # without pipelining the module's run removed it already
            if self._connection._shell.tmpdir:
                self._remove_tmp_path(folder)
        return result
