"""The controller's half of the action plugins ``envbuild_actions`` and ``envbuild_state``: run
the module's task (``module_utils/envbuild_node/task.py``) on the node in one command, not as
an AnsiballZ payload.

A module run through AnsiballZ compiles Ansible's module_utils (``basic.py`` and what it
imports) from the payload's zip on every task, ~0.12 s of a node's CPU per task, several
times a step. The command here carries envbuild's node package instead (``boot.py`` as the
program, the package's files zlib-compressed as its first argument: the same files the module
imports), reads the parameters on stdin and prints the result after a line ``task.BEGIN``.

What stays Ansible's: the parameters are validated with the module's own spec (``task.SPECS``)
by ``validate_argument_spec``; the node's Python is the one Ansible picks for the module
(``ansible_python_interpreter``, or its discovery, as ``_configure_module`` runs it), the command gets the
task's environment and become, through the task's connection; the parameters are JSON as
Ansible encodes a module's. Where the module would not be pipelined (pipelining off, async, a
connection that cannot) the module runs as Ansible's ``normal`` action runs it.
"""
from __future__ import annotations

import base64
import json
import os
import shlex
import zlib
from functools import lru_cache

from ansible.executor.interpreter_discovery import InterpreterDiscoveryRequiredError, discover_interpreter
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash
from ansible_collections.envbuild.node.plugins.module_utils.envbuild_node import task as node_task

try:  # ansible-core 2.16 to 2.21: the interpreter line of a module, discovery raised for, not run
    from ansible.executor.module_common import _get_shebang
except ImportError:  # an Ansible without it: the line is asked of _configure_module (a payload built)
    _get_shebang = None

NODE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils", "envbuild_node")
# the package's files the two tasks import (task imports actions and state; state, effects;
# effects, observe and textpatch)
FILES = ("__init__", "actions", "effects", "observe", "state", "task", "textpatch")


def _read(name: str) -> str:
    with open(os.path.join(NODE, name + ".py"), encoding="utf-8") as fh:
        return fh.read()


@lru_cache(maxsize=1)
def program() -> str:
    """``-c <boot.py> PACKAGE task``: what follows the interpreter in the command."""
    package = base64.b64encode(zlib.compress(json.dumps([[n, _read(n)] for n in FILES]).encode(), 9)).decode()
    return " ".join(["-c", shlex.quote(_read("boot")), package, "task"])


def _encoder() -> tuple[type[json.JSONEncoder], dict]:
    """The JSON encoder Ansible writes a module's parameters with (vaulted values as their text)."""
    try:  # ansible-core 2.19+
        from ansible.module_utils.common.json import Direction, get_module_encoder
    except ImportError:  # 2.16-2.18
        from ansible.module_utils.common.json import AnsibleJSONEncoder
        return AnsibleJSONEncoder, {"vault_to_text": True, "preprocess_unsafe": True}
    return get_module_encoder("legacy", Direction.CONTROLLER_TO_MODULE), {}


def parse_result(res: dict) -> dict:
    """The node command's result (``_low_level_execute_command``'s) -> the task's result."""
    head, sep, body = (res.get("stdout") or "").rpartition("\n%s\n" % node_task.BEGIN)
    try:  # the result is one line (what a child left running prints after it is not)
        data = json.loads(body.partition("\n")[0]) if sep else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        said = (res.get("stderr") or "").strip().splitlines()  # e.g. boot.py refusing an old Python
        return {"failed": True, "rc": res.get("rc"),
                "msg": "envbuild's node task printed no result (exit %s)%s" % (
                    res.get("rc"), ": " + said[-1][:300] if said else ""),
                "module_stdout": res.get("stdout") or "", "module_stderr": res.get("stderr") or ""}
    for key in ("stdout", "stderr"):
        if key in data and "%s_lines" % key not in data:
            data["%s_lines" % key] = (data[key] or "").splitlines()
    return data


class NodeTaskAction(ActionBase):
    """Run ``MODULE``'s task on the node through the task's connection (see the module docstring)."""

    MODULE = ""
    _supports_check_mode = True
    _supports_async = True  # by the module itself (``_module``)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _, params = self.validate_argument_spec(argument_spec=node_task.SPECS[self.MODULE])
        return self._node_task(self.MODULE, params, result, task_vars)

    def _node_task(self, module: str, params: dict, result: dict, task_vars: dict) -> dict:
        """``module``'s task with ``params`` (validated) on the node, merged into ``result``."""
        fqcn = "envbuild.node." + module
        if self._task.async_val or not self._is_pipelining_enabled("new"):
            return self._module(fqcn, params, result, task_vars)
        shebang = self._shebang(fqcn, task_vars)
        # the environment and the interpreter as this Ansible writes them for a pipelined module,
        # then the program's words (each quoted already)
        cmd = "%s %s" % (self._connection._shell.build_module_command(self._compute_environment_string(), shebang, "")
                         .strip(), program())
        encoder, options = _encoder()
        request = json.dumps({"module": module, "params": params, "check_mode": bool(self._task.check_mode)},
                             cls=encoder, **options).encode()
        result.update(parse_result(self._low_level_execute_command(cmd, sudoable=True, in_data=request)))
        if self._discovered_interpreter_key:  # as _execute_module hands a discovery back
            result.setdefault("ansible_facts", {})[self._discovered_interpreter_key] = self._discovered_interpreter
        return result

    def _module(self, fqcn: str, params: dict, result: dict, task_vars: dict) -> dict:
        """The module itself, as Ansible's ``normal`` action runs it (async included)."""
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result = merge_hash(result, self._execute_module(module_name=fqcn, module_args=params, task_vars=task_vars,
                                                         wrap_async=wrap_async))
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _shebang(self, fqcn: str, task_vars: dict) -> str:
        """The interpreter line Ansible gives the module on this node (its discovery included).

        ``_get_shebang`` is what ``modify_module`` asks for a Python module's line
        (``/usr/bin/python``, the modules' own), and interpreter discovery is run and handed on
        as ``_configure_module`` runs it. ``_configure_module`` itself builds the module's
        AnsiballZ payload first (Ansible's module_utils compiled to find what it imports): ~0.15
        CPU-s of the controller per module and playbook, for one line."""
        if _get_shebang is None:
            built = self._configure_module(module_name=fqcn, module_args={}, task_vars=task_vars)
            return built[0].shebang if len(built) == 2 else built[1]  # 2.19+ | 2.16-2.18
        use_vars = task_vars["ansible_delegated_vars"][self._task.delegate_to] if self._task.delegate_to else task_vars
        remote_is_local = bool(getattr(self._connection, "_remote_is_local", False))
        for _ in (1, 2):
            try:
                return _get_shebang("/usr/bin/python", use_vars, self._templar, remote_is_local=remote_is_local)[0]
            except InterpreterDiscoveryRequiredError as idre:
                self._discover(idre, task_vars, use_vars)
        raise AssertionError("interpreter discovery asked for twice")  # pragma: no cover - Ansible stores it

    def _discover(self, idre, task_vars: dict, use_vars: dict) -> None:
        """Discover the interpreter and keep it as ``_configure_module`` does (a fact handed back)."""
        self._discovered_interpreter = discover_interpreter(
            action=self, interpreter_name=idre.interpreter_name, discovery_mode=idre.discovery_mode, task_vars=use_vars)
        key = "discovered_interpreter_%s" % idre.interpreter_name
        use_vars.setdefault("ansible_facts", {})[key] = self._discovered_interpreter
        if not self._task.delegate_to or self._task.delegate_facts:
            task_vars.setdefault("ansible_facts", {})[key] = self._discovered_interpreter
            self._discovered_interpreter_key = key
        else:
            task_vars["ansible_delegated_vars"][self._task.delegate_to].setdefault("ansible_facts", {})[key] = \
                self._discovered_interpreter
