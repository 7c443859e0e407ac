#!/usr/bin/python
"""Which plan steps must run on this node; with record=<id>, mark one step done.

Reads <prefix>/.envbuild/state/<step-id>.done files. The first step whose recorded digest
differs (or is missing) and every step after it are pending; the steps before it are done.
"""
import os

from ansible.module_utils.basic import AnsibleModule


def split(prefix, steps, digests):
    state = os.path.join(os.path.expanduser(prefix), ".envbuild", "state")
    done = []
    for sid, digest in zip(steps, digests):
        try:
            with open(os.path.join(state, sid + ".done")) as fh:
                recorded = fh.read().strip()
        except OSError:
            break
        if recorded != digest:
            break
        done.append(sid)
    return done, steps[len(done):]


def record(prefix, sid, digest):
    """Write <prefix>/.envbuild/state/<id>.done atomically."""
    state = os.path.join(os.path.expanduser(prefix), ".envbuild", "state")
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, sid + ".done")
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(digest + "\n")
    os.replace(tmp, path)


def main():
    module = AnsibleModule(argument_spec=dict(
        prefix=dict(type="str", required=True),
        steps=dict(type="list", elements="str", default=[]),
        digests=dict(type="list", elements="str", default=[]),
        record=dict(type="str", default=None),
        digest=dict(type="str", default=None),
    ), supports_check_mode=True)
    p = module.params
    if p["record"]:
        if module.check_mode:  # check mode changes nothing on the node, markers included
            module.exit_json(changed=False, recorded=None)
        record(p["prefix"], p["record"], p["digest"])
        module.exit_json(changed=False, recorded=p["record"])
    done, pending = split(p["prefix"], p["steps"], p["digests"])
    module.exit_json(changed=False, done=done, pending=pending,
                     prefix=os.path.expanduser(p["prefix"]))


if __name__ == "__main__":
    main()
