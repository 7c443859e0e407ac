#!/usr/bin/python
"""Which plan steps must run on this node.

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


def main():
    module = AnsibleModule(argument_spec=dict(
        prefix=dict(type="str", required=True),
        steps=dict(type="list", elements="str", required=True),
        digests=dict(type="list", elements="str", required=True),
    ), supports_check_mode=True)
    p = module.params
    done, pending = split(p["prefix"], p["steps"], p["digests"])
    module.exit_json(changed=False, done=done, pending=pending,
                     prefix=os.path.expanduser(p["prefix"]))


if __name__ == "__main__":
    main()
