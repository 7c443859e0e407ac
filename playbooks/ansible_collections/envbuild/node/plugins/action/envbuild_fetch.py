"""The action ``envbuild.node.envbuild_fetch``: files of the node into a folder of the controller,
each checked against the sha256 the node reported for it (plugins/modules/envbuild_fetch.py
documents the parameters).

``ansible.builtin.fetch`` runs a remote stat through AnsiballZ for each file (its checksum),
then fetches it. Here the sha256 of each file comes with the task (the ``captured`` result of
the ``envbuild_actions`` run that wrote them), so no module runs: each file is fetched by the
connection into a temporary file beside its destination, its sha256 compared, then renamed into
place. A file without a reported sha256, or whose bytes differ, fails the task and leaves no
file of it. Where the task becomes another user, the connection's user may not read the file:
it is read through ``ansible.builtin.slurp`` (as fetch reads it then), and checked the same way.
"""
from __future__ import annotations

import base64
import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.envbuild.node.plugins.plugin_utils.digest import sha256_file

ARGS = dict(
    src=dict(type="list", elements="str", required=True),
    dest=dict(type="path", required=True),
    sha256=dict(type="dict", required=True),
)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGS)
        dest, want = args["dest"], args["sha256"]
        result.update(changed=False, fetched=[])
        if self._task.check_mode:
            return result
        names = [os.path.basename(src) for src in args["src"]]
        if len(set(names)) != len(names) or not all(n not in ("", ".", "..") for n in names):
            raise AnsibleActionFail("src must name files of distinct names: %s" % ", ".join(args["src"]))
        for src in args["src"]:
            if not isinstance(want.get(src), str):
                raise AnsibleActionFail("no sha256 was reported for %s: not fetched" % src)
        os.makedirs(dest, exist_ok=True)
        try:
            self._fetch_all(args["src"], names, dest, want, result, task_vars)
        finally:  # slurp's temporary folder on the node, where it made one
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result["changed"] = bool(result["fetched"])
        return result

    def _fetch_all(self, sources, names, dest, want, result, task_vars):
        for src, name in zip(sources, names):
            final = os.path.join(dest, name)
            fd, part = tempfile.mkstemp(prefix="." + name + ".", dir=dest)
            os.close(fd)
            os.chmod(part, 0o666 & ~_umask())  # as a file the user writes (mkstemp's is 0600)
            try:
                self._bring(src, part, task_vars)
                got = sha256_file(part)
                if got != want[src]:
                    raise AnsibleActionFail("%s came back with sha256 %s, not the %s the node reported: not kept"
                                            % (src, got, want[src]))
                os.replace(part, final)
            finally:
                if os.path.exists(part):
                    os.unlink(part)
            result["fetched"].append(final)

    def _bring(self, src: str, local: str, task_vars: dict) -> None:
        """``src`` of the node into the controller file ``local``."""
        if not self._connection.become:
            self._connection.fetch_file(src, local)
            return
        res = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": src},
                                   task_vars=task_vars)
        if res.get("failed"):
            raise AnsibleActionFail("%s could not be read: %s" % (src, res.get("msg")))
        with open(local, "wb") as fh:
            fh.write(base64.b64decode(res["content"]))
