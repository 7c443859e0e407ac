"""Which plan steps must run on a node, and marking a step done: step markers under
``<prefix>/.envbuild/state`` checked with the steps' effects (``effects``).

Standard library only: it runs under the node's Python, in Ansible's module_utils or loaded by
``boot.py`` (see ``envbuild/node/__init__.py``). ``node_state`` is what
Ansible's ``envbuild_state`` module, the no-op probe of ``envbuild provision`` and
``envbuild verify`` run on the node; ``record_step`` writes a step's marker only once its
effect holds.
"""
import json
import os

from .actions import ActionFailed
from .effects import EffectContext, check_effect


def state_dir_of(prefix):
    return os.path.join(os.path.expanduser(prefix), ".envbuild", "state")


def tmp_dir_of(prefix):
    """The node's temporary folder for envbuild's runs: inside the prefix, so that what a
    killed run leaves (Ansible's module payloads, pip's and uv's build folders) stays there."""
    return os.path.join(os.path.expanduser(prefix), ".envbuild", "tmp")


def fresh_tmp(prefix, keep=None):
    """Empty the prefix's temporary folder of what earlier runs left, then make sure it exists
    (the caller holds the prefix's lock: no other run of it is going on). ``keep``: a path of
    the running process inside it (its own module payload), with the entry that holds it kept.
    Returns the names removed."""
    import shutil

    folder = tmp_dir_of(prefix)
    removed = []
    if os.path.isdir(folder) and not os.path.islink(folder):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if keep and os.path.realpath(keep).startswith(os.path.realpath(path) + os.sep):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
            removed.append(name)
    elif os.path.lexists(folder):
        os.unlink(folder)  # a file or a link where the folder belongs
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o700)
    return removed


def read_marker(state, sid):
    try:
        with open(os.path.join(state, sid + ".done")) as fh:
            return fh.read().strip()
    except OSError:
        return None


def node_state(prefix, steps, from_step=None, deep=False, refresh=False):
    """Which plan steps must run: ``steps`` is ``[{id, digest, effect}]`` in plan order.

    The first step whose marker is missing or differs, whose effect does not hold, or that is
    ``from_step`` (``--from-step``/``--force``) runs again, with every step after it. Returns
    {"done", "pending", "repair", "effect_failed": {id: detail}, "reasons": {id: why},
    "effects": {id: {ok, detail}}, "prefix"}. Changes nothing on the node, except with
    ``refresh``: the manifest of a done step whose files were re-hashed (their stat changed,
    their content did not) is rewritten, so the next check reads none of them again."""
    state = state_dir_of(prefix)
    ctx = EffectContext(state, deep=deep)
    done, pending, repair, failed, reasons, results = [], [], [], {}, {}, {}
    first = None
    for step in steps:
        sid = step["id"]
        marker = read_marker(state, sid)
        marker_ok = marker is not None and marker == step.get("digest")
        res = check_effect(step["effect"], ctx, sid) if step.get("effect") else None
        if res is not None:
            results[sid] = {"ok": res["ok"], "detail": res["detail"]}
            if refresh and marker_ok and res["ok"] and res.get("rewrite"):
                _write_json(os.path.join(state, sid + ".manifest.json"), res["manifest"])
        effect_ok = res is None or res["ok"]
        if marker_ok and not effect_ok:
            failed[sid] = res["detail"]
        if first is None:
            if from_step is not None and sid == from_step:
                first, why = sid, "forced (--from-step/--force)"
            elif marker is None:
                first, why = sid, "no marker: never finished here"
            elif not marker_ok:
                first, why = sid, "its parameters changed (digest %s, recorded %s)" % (step.get("digest"), marker)
            elif not effect_ok:
                first, why = sid, "its effect does not hold: " + res["detail"]
            else:
                done.append(sid)
                continue
            reasons[sid] = why
        else:
            reasons[sid] = ("its effect does not hold: " + res["detail"]) if not effect_ok and marker_ok \
                else "runs after %s" % first
        pending.append(sid)
        if res is not None and not res["ok"] and res.get("repair"):
            repair.append(sid)
    return {"done": done, "pending": pending, "repair": repair, "effect_failed": failed,
            "reasons": reasons, "effects": results, "prefix": os.path.expanduser(prefix)}


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, separators=(",", ":"))
    os.replace(tmp, path)


def record_step(prefix, sid, digest, effect=None):
    """After step ``sid`` ran: check its effect in full (every RECORD hash), keep the manifest
    that makes later checks fast, then write the marker. Raises ActionFailed when the effect
    does not hold: a step is never marked done on the strength of its exit code alone."""
    state = state_dir_of(prefix)
    if not os.path.isdir(state):
        os.makedirs(state)
    manifest_path = os.path.join(state, sid + ".manifest.json")
    detail = ""
    if effect:
        res = check_effect(effect, EffectContext(state, deep=True), sid)
        if not res["ok"]:
            raise ActionFailed("step %s ran but its effect does not hold: %s" % (sid, res["detail"]))
        detail = res["detail"]
        if res.get("manifest") is not None:
            _write_json(manifest_path, res["manifest"])
        elif os.path.exists(manifest_path):
            os.remove(manifest_path)
    path = os.path.join(state, sid + ".done")
    with open(path + ".tmp", "w") as fh:
        fh.write(digest + "\n")
    os.replace(path + ".tmp", path)
    return detail
