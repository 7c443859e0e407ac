#!/usr/bin/python
"""Put a git tree at dest on an exact commit, from a mirror path or a URL, and prove it.

A fresh clone goes to <dest>.partial and is renamed only when HEAD equals the pinned SHA, so a
failed or killed clone leaves nothing at dest. A source that lacks the commit fails naming the
pinned SHA and the SHA its ref points at.
"""
import os
import shutil

from ansible.module_utils.basic import AnsibleModule


def git(module, *args, cwd=None, check=True):
    rc, out, err = module.run_command(["git"] + list(args), cwd=cwd)
    if check and rc != 0:
        module.fail_json(msg="git %s failed: %s" % (" ".join(args), (err or out).strip()),
                         cmd=["git"] + list(args), rc=rc, stdout=out, stderr=err)
    return rc, out.strip(), err.strip()


def has_commit(module, repo, sha):
    rc, _, _ = git(module, "cat-file", "-e", sha + "^{commit}", cwd=repo, check=False)
    return rc == 0


def ref_sha(module, repo, ref):
    rc, out, _ = git(module, "ls-remote", "origin", ref, cwd=repo, check=False)
    return out.split()[0] if rc == 0 and out else None


def main():
    module = AnsibleModule(argument_spec=dict(
        fetch_url=dict(type="str", required=True),
        url=dict(type="str", default=None),
        ref=dict(type="str", default=None),
        sha=dict(type="str", default=None),
        dest=dict(type="path", required=True),
    ))
    p = module.params
    dest, sha, ref, src = p["dest"], p["sha"], p["ref"], p["fetch_url"]
    want = sha or ref
    fresh = not os.path.isdir(os.path.join(dest, ".git"))
    work = dest + ".partial" if fresh else dest
    if fresh:
        if os.path.exists(dest) and os.listdir(dest):
            module.fail_json(msg="%s exists and is not a git tree; move it away" % dest)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(os.path.dirname(work) or ".", exist_ok=True)
        git(module, "clone", "--quiet", "--no-checkout", src, work)
    else:
        git(module, "remote", "set-url", "origin", src, cwd=work)
    rc, before, _ = git(module, "rev-parse", "HEAD", cwd=work, check=False)
    if sha and not has_commit(module, work, sha):
        git(module, "fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*",
            "+refs/tags/*:refs/tags/*", cwd=work, check=False)
        git(module, "fetch", "--quiet", "origin", sha, cwd=work, check=False)
    points = ref_sha(module, work, ref) if ref else None
    if sha and not has_commit(module, work, sha):
        if fresh:
            shutil.rmtree(work, ignore_errors=True)
        module.fail_json(
            msg="commit %s is not in %s (ref %s points at %s)" % (sha, src, ref, points or "nothing"),
            expected_sha=sha, ref_sha=points, fetch_url=src)
    target = sha or ("origin/" + ref if not has_commit(module, work, ref) else ref)
    git(module, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--force", target,
        cwd=work)
    _, head, _ = git(module, "rev-parse", "HEAD", cwd=work)
    if sha and head != sha:
        module.fail_json(msg="after checkout HEAD is %s, expected %s" % (head, sha),
                         expected_sha=sha, head=head)
    if fresh:
        os.rename(work, dest)
    warnings = []
    if sha and points and points != sha:
        warnings.append("ref %s points at %s; using the pinned %s" % (ref, points, sha))
    module.exit_json(changed=fresh or before != head, head=head, ref_sha=points, dest=dest,
                     warnings=warnings)


if __name__ == "__main__":
    main()
