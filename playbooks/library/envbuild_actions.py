#!/usr/bin/python
"""Run a batch of envbuild's primitive actions on the node (module_utils/envbuild_onnode).

The actions are data (argv lists, file contents, a commit to check out, a declarative patch,
a captured smoke run); this module runs them without a shell and without templating. With
repair=true (the step's effect did not hold, see envbuild_state) a run action's repair_args
are added (pip --force-reinstall). In check mode it changes nothing and reports what would run.
"""
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import envbuild_onnode as onnode
from ansible.module_utils import textpatch


def main():
    module = AnsibleModule(argument_spec=dict(
        actions=dict(type="list", elements="dict", required=True),
        node_path=dict(type="str", default=None),
        repair=dict(type="bool", default=False),
    ), supports_check_mode=True)
    acts = module.params["actions"]
    if module.check_mode:
        module.exit_json(changed=True, would_run=[a.get("op") for a in acts])
    try:
        res = onnode.run_actions(acts, node_path=module.params["node_path"], textpatch=textpatch,
                                 repair=module.params["repair"])
    except onnode.ActionFailed as exc:
        module.fail_json(msg=exc.msg, cmd=exc.cmd, rc=exc.rc, stdout=exc.stdout, stderr=exc.stderr)
    module.exit_json(changed=res["changed"], stdout="\n".join(res["log"]))


if __name__ == "__main__":
    main()
