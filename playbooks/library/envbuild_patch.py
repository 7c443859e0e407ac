#!/usr/bin/python
"""Apply one declarative patch to a file in a source tree (text logic: module_utils/textpatch).

Records the applied unified diff under <diff_dir>/<id>.diff. Applying twice is a no-op
(status already-applied). A patch that does not fit fails without touching the file.
"""
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.textpatch import apply_text_patch, unified_diff


def main():
    module = AnsibleModule(argument_spec=dict(
        id=dict(type="str", required=True),
        dest=dict(type="path", required=True),
        file=dict(type="str", required=True),
        kind=dict(type="str", required=True),
        old=dict(type="str", default=None),
        new=dict(type="str", default=None),
        count=dict(type="int", default=1),
        decision=dict(type="str", default=None),
        nvcc=dict(type="str", default=None),
        torch_cuda=dict(type="str", default=None),
        diff_dir=dict(type="path", required=True),
    ))
    p = module.params
    path = os.path.join(p["dest"], p["file"])
    try:
        with open(path) as fh:
            before = fh.read()
    except OSError as exc:
        module.fail_json(msg="cannot read %s: %s" % (path, exc))
    status, after = apply_text_patch(before, p["kind"], p["old"] or None, p["new"] or None,
                                     p["count"])
    if status.startswith("failed"):
        module.fail_json(msg="patch %s on %s: %s" % (p["id"], p["file"], status), status=status)
    diff_path = os.path.join(p["diff_dir"], p["id"] + ".diff")
    diff = ""
    if after != before:
        diff = unified_diff(before, after, p["file"])
        tmp = path + ".envbuild-tmp"
        with open(tmp, "w") as fh:
            fh.write(after)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
        os.makedirs(p["diff_dir"], exist_ok=True)
        with open(diff_path, "w") as fh:
            fh.write(diff)
    module.exit_json(changed=after != before, status=status, diff_path=diff_path, patch_diff=diff)


if __name__ == "__main__":
    main()
