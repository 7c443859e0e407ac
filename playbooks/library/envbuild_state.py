#!/usr/bin/python
"""Which plan steps must run on this node; with record=<id>, mark one step done.

A step is done when its marker ``<prefix>/.envbuild/state/<id>.done`` holds the step's digest
**and** its effect holds on the node now (``effect``: data from ``envbuild.actions.effects``,
checked by ``module_utils/envbuild_onnode.check_effect``: distributions and their RECORD
files, git HEAD and tree, patches, file digests). The first step that is not done runs again
with every step after it; ``repair`` names the pending steps whose actions must force a
reinstall (pip says "already satisfied" when metadata is there and files are not);
``effect_failed`` the steps whose marker matched but whose effect did not hold.

record=<id> (after the step ran): the step's effect is checked in full (every RECORD hash),
the manifest that makes later checks fast is kept, then the marker is written; a step whose
effect does not hold after it ran fails here. Outside check mode the state check rewrites the
manifest of a done step whose files' stat changed but whose contents were verified; check mode
reads and never writes.
"""
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import envbuild_onnode as onnode
from ansible.module_utils import textpatch


def main():
    module = AnsibleModule(argument_spec=dict(
        prefix=dict(type="str", required=True),
        steps=dict(type="list", elements="str", default=[]),
        digests=dict(type="list", elements="str", default=[]),
        effects=dict(type="list", default=[]),
        from_step=dict(type="str", default=None),
        record=dict(type="str", default=None),
        digest=dict(type="str", default=None),
        effect=dict(type="raw", default=None),
    ), supports_check_mode=True)
    p = module.params
    if p["record"]:
        if module.check_mode:  # check mode changes nothing on the node, markers included
            module.exit_json(changed=False, recorded=None)
        try:
            detail = onnode.record_step(p["prefix"], p["record"], p["digest"], p["effect"] or None, textpatch)
        except onnode.ActionFailed as exc:
            module.fail_json(msg=exc.msg)
        module.exit_json(changed=False, recorded=p["record"], effect=detail)
    effects = list(p["effects"] or [])
    steps = [{"id": sid, "digest": digest, "effect": effects[i] if i < len(effects) else None}
             for i, (sid, digest) in enumerate(zip(p["steps"], p["digests"]))]
    if p["from_step"] and p["from_step"] not in p["steps"]:
        module.fail_json(msg="--from-step %s: no such step (steps: %s)" % (p["from_step"], ", ".join(p["steps"])))
    res = onnode.node_state(p["prefix"], steps, from_step=p["from_step"] or None, textpatch=textpatch,
                            refresh=not module.check_mode)
    module.exit_json(changed=False, **res)


if __name__ == "__main__":
    main()
