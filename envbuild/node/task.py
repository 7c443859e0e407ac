"""What Ansible's ``envbuild_actions`` and ``envbuild_state`` modules do, as functions of their
parameters, and the command that runs one of them on a node without AnsiballZ.

The modules (``plugins/modules/``) validate their parameters with ``SPECS`` and call
``run_task``; so does this file run as a command (``python -c <boot.py> PACKAGE task``, the
request on stdin as JSON ``{"module", "params", "check_mode"}``, the result printed after a line
``BEGIN``). The collection's action plugins of the same names (``plugins/action/``) run that
command through the task's connection: the parameters validated on the controller with the same
``SPECS``, the node's Python as Ansible picks it for the module, the task's environment, the
request on stdin. It skips what AnsiballZ costs each task on the node (Ansible's module_utils,
``basic.py`` and what it imports, compiled from the payload's zip every run: ~0.12 s of CPU), and
does the same work with the same functions.

A result is a dict as the module returns it: ``failed`` and ``msg`` when it failed. The package's
floor: no syntax newer than the oldest Python a node may have. The tasks import their siblings
when they run: the action plugins import this file on the controller, in every task's worker
(Ansible's collection loader compiles it each time), for ``SPECS`` and ``BEGIN`` only.
"""
import json
import locale
import os
import sys
import traceback

BEGIN = "::envbuild-task::"

# Ansible argument specs (AnsibleModule's and ArgumentSpecValidator's form); the modules'
# DOCUMENTATION says the same
SPECS = {
    "envbuild_actions": dict(
        actions=dict(type="list", elements="dict", required=True),
        node_path=dict(type="str", default=None),
        repair=dict(type="bool", default=False),
        record=dict(type="dict", default=None, options=dict(
            prefix=dict(type="str", required=True),
            id=dict(type="str", required=True),
            digest=dict(type="str", required=True),
            effect=dict(type="raw", default=None),
        )),
    ),
    "envbuild_state": dict(
        prefix=dict(type="str", required=True),
        steps=dict(type="list", elements="str", default=[]),
        digests=dict(type="list", elements="str", default=[]),
        effects=dict(type="list", elements="raw", default=[]),
        from_step=dict(type="str", default=None),
        record=dict(type="str", default=None),
        digest=dict(type="str", default=None),
        effect=dict(type="raw", default=None),
    ),
}


def actions_task(p, check_mode, keep=None):
    """``envbuild_actions``: run a batch of actions, then record its step when asked."""
    from . import actions as node_actions
    from . import state as node_steps

    acts = p["actions"]
    if check_mode:
        return {"changed": any(a.get("changes", True) or a.get("op") != "run" for a in acts),
                "would_run": [a.get("op") for a in acts]}
    try:
        res = node_actions.run_actions(acts, node_path=p["node_path"] or None, repair=p["repair"])
    except node_actions.ActionFailed as exc:
        return {"failed": True, "msg": exc.msg, "cmd": exc.cmd, "rc": exc.rc, "stdout": exc.stdout,
                "stderr": exc.stderr, "captured": exc.captured}
    out = {"changed": res["changed"], "stdout": "\n".join(res["log"]), "captured": res["captured"]}
    rec = p["record"]
    if rec:
        try:
            out["effect"] = node_steps.record_step(rec["prefix"], rec["id"], rec["digest"], rec.get("effect") or None)
        except node_actions.ActionFailed as exc:
            return {"failed": True, "msg": exc.msg, "stdout": out["stdout"]}
        except Exception as exc:  # the state folder unwritable, a malformed effect: said, with the log
            return {"failed": True, "msg": "recording step %s failed: %s: %s" % (rec["id"], type(exc).__name__, exc),
                    "stdout": out["stdout"]}
        out["recorded"] = rec["id"]
    return out


def state_task(p, check_mode, keep=None):
    """``envbuild_state``: which steps must run (the prefix's temporary folder emptied first), or
    record one step done. ``keep``: the running module's own payload, kept in that folder."""
    from . import actions as node_actions
    from . import state as node_steps

    if p["record"]:
        if check_mode:  # check mode changes nothing on the node, markers included
            return {"changed": False, "recorded": None}
        before = node_steps.read_marker(node_steps.state_dir_of(p["prefix"]), p["record"])
        try:
            detail = node_steps.record_step(p["prefix"], p["record"], p["digest"], p["effect"] or None)
        except node_actions.ActionFailed as exc:
            return {"failed": True, "msg": exc.msg}
        return {"changed": before != p["digest"], "recorded": p["record"], "effect": detail}
    effects = list(p["effects"] or [])
    steps = [{"id": sid, "digest": digest, "effect": effects[i] if i < len(effects) else None}
             for i, (sid, digest) in enumerate(zip(p["steps"], p["digests"]))]
    if p["from_step"] and p["from_step"] not in p["steps"]:
        return {"failed": True,
                "msg": "--from-step %s: no such step (steps: %s)" % (p["from_step"], ", ".join(p["steps"]))}
    cleared = [] if check_mode else node_steps.fresh_tmp(p["prefix"], keep=keep)
    res = node_steps.node_state(p["prefix"], steps, from_step=p["from_step"] or None, refresh=not check_mode)
    return dict(res, changed=False, tmp_cleared=cleared)


TASKS = {"envbuild_actions": actions_task, "envbuild_state": state_task}


def run_task(module, params, check_mode, keep=None):
    return TASKS[module](params, check_mode, keep=keep)


def _settle():
    """What AnsibleModule and its wrapper settle before a module's work: a working folder this
    user may read (else home, else /), and a locale the programs it runs can use (else C.UTF-8,
    else C, in LANG, LC_ALL and LC_MESSAGES)."""
    try:
        os.getcwd()
    except OSError:
        for folder in (os.path.expanduser("~"), "/"):
            try:
                os.chdir(folder)
                break
            except OSError:
                continue
    try:
        locale.setlocale(locale.LC_ALL, "")
    except locale.Error:
        for name in ("C.UTF-8", "C"):
            try:
                locale.setlocale(locale.LC_ALL, name)
            except locale.Error:
                continue
            for var in ("LANG", "LC_ALL", "LC_MESSAGES"):
                os.environ[var] = name
            break


def main():
    _settle()
    try:
        req = json.loads(sys.stdin.read())
        res = run_task(req["module"], req["params"], bool(req.get("check_mode")))
    except Exception as exc:  # said as the module would fail: the message and the traceback
        res = {"failed": True, "msg": "%s: %s" % (type(exc).__name__, exc), "exception": traceback.format_exc()}
    sys.stdout.write("\n%s\n%s\n" % (BEGIN, json.dumps(res, default=str)))
    sys.stdout.flush()
    return 1 if res.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
