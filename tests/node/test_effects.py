"""Step effects: derived from the plan alone, checked on the node (envbuild.node.effects, envbuild.node.state).

Fast tier: a fake environment (a real interpreter's site folder with hand-made distributions,
RECORD rows with real hashes), the split of steps into done and pending, the stat manifest
that keeps the no-op fast and what makes it fall back to hashing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.actions.effects import effect_data, effects
from envbuild.actions.nodestate import parse_probe, plan_steps, probe_command
from envbuild.actions.steps import actions, env_file_text
from envbuild.connect.local import run_local
from envbuild.node import actions as node_actions, effects as node_effects, state as node_steps
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step


def req(name, version, hashes=("sha256:00",)):
    return P.Requirement(name=name, version=version, requirement=f"{name}=={version}", hashes=list(hashes))


def plan_of(prefix: str, *steps: Step) -> Plan:
    return Plan(recipe="r", target="t", host="h", prefix=prefix, backend="venv", steps=list(steps))


def test_effects_are_a_pure_function_of_the_plan():
    prefix, dest = "/e", "/e/src/x"
    patch = P.PatchParams(id="p1", component="x", dest=dest, patch_kind="replace", file="a.py", old="1", new="2")
    plan = plan_of(
        prefix,
        Step(id="preflight", title="", params=P.PreflightParams(feasible=True)),
        Step(id="environment", title="", params=P.EnvironmentParams(backend="venv", prefix=prefix, python="3.11",
                                                                     interpreter="/usr/bin/python3.11")),
        Step(id="pip:torch", title="", params=P.PipInstallParams(requirements=[req("Torch", "2.13.0+cpu")])),
        Step(id="pip-tooling", title="", params=P.PipToolingParams(requirements=[
            P.Requirement(name="wheel", version="<0.46", requirement="wheel<0.46")])),
        Step(id="git:x", title="", params=P.GitSourceParams(name="x", url="u", fetch_url="u", ref="main",
                                                             sha="a" * 40, dest=dest)),
        Step(id="patch:p1", title="", params=patch),
        Step(id="install:x", title="", params=P.InstallSourceParams(name="x", dest=dest, mode="pth")),
        Step(id="install:y", title="", params=P.InstallSourceParams(name="y", dest="/e/src/y", mode="editable")),
        Step(id="env-file", title="", params=P.EnvFileParams(path="/e/.envbuild/env.sh", vars={"A": "1"})),
        Step(id="import-check", title="", params=P.ImportCheckParams(modules=["json"])),
    )
    eff = effect_data(plan)
    assert eff == effect_data(plan)  # pure
    assert eff["preflight"] is None and eff["import-check"] is None
    assert eff["environment"] == {"check": "interpreter", "python": "/e/bin/python", "prefix": "/e", "venv": True,
                                  "system_site_packages": False}
    assert eff["pip:torch"] == {"check": "dists", "python": "/e/bin/python", "dists": {"torch": "2.13.0+cpu"}}
    assert eff["pip-tooling"]["dists"] == {"wheel": None}  # a specifier: any version, files intact
    assert eff["git:x"]["sha"] == "a" * 40 and [p["id"] for p in eff["git:x"]["patches"]] == ["p1"]
    assert eff["patch:p1"]["spec"]["old"] == "1"
    assert eff["install:x"] == {"check": "pth", "python": "/e/bin/python", "name": "x", "content": dest + "\n"}
    assert eff["install:y"]["check"] == "source" and eff["install:y"]["editable"] is True
    text = env_file_text(prefix, {"A": "1"})
    assert eff["env-file"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert set(effects(plan)) == {s.id for s in plan.steps}


def test_pip_actions_carry_their_repair_arguments():
    step = Step(id="pip:torch", title="", params=P.PipInstallParams(requirements=[req("torch", "2.13.0")]))
    runs = [a for a in actions(step, "/e") if a.op == "run"]
    assert runs and all(a.repair_args == ["--force-reinstall"] for a in runs)
    assert all("--force-reinstall" not in a.argv for a in runs)  # only a repair adds it


# --- a fake environment: this interpreter, its sys.path pointed at a folder of our own ---------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_dist(site: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    rows = [f"{info.name}/METADATA,sha256={_b64((info / 'METADATA').read_bytes())},{(info / 'METADATA').stat().st_size}"]
    for rel, data in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append(f"{rel},sha256={_b64(data)},{len(data)}")
    rows += [f"{info.name}/RECORD,,", f"{name}/__pycache__/x.cpython-311.pyc,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    make_dist(site, "Alpha_Pkg", "1.0", {"alpha/__init__.py": b"A = 1\n", "alpha/data.bin": b"x" * 1000})
    make_dist(site, "beta", "2.0+cpu", {"beta.py": b"B = 2\n"})
    monkeypatch.setattr(sys, "path", [str(site)])  # the environment of sys.executable is this folder
    return site


def dists_effect(**dists):
    return {"check": "dists", "python": sys.executable, "dists": dists}


def check(tmp_path, eff, sid="pip:x", deep=False):
    return node_effects.check_effect(eff, node_effects.EffectContext(str(tmp_path / "state"), deep=deep), sid)


def test_distributions_intact_missing_other_version_and_broken_files(tmp_path, site):
    ok = check(tmp_path, dists_effect(**{"alpha-pkg": "1.0", "beta": "2.0"}))
    assert ok["ok"] and "2 distribution(s) intact" in ok["detail"]
    assert not check(tmp_path, dists_effect(gamma="1"))["repair"]  # not installed: pip installs it
    other = check(tmp_path, dists_effect(beta="3.0"))
    assert not other["ok"] and "beta 2.0+cpu installed, want 3.0" in other["detail"] and not other["repair"]
    (site / "alpha" / "data.bin").unlink()
    (site / "alpha" / "__init__.py").write_text("A = 2\n")  # same size, other content
    broken = check(tmp_path, dists_effect(**{"alpha-pkg": "1.0"}))
    assert not broken["ok"] and broken["repair"]  # metadata there, files not: pip would say "satisfied"
    assert "alpha/data.bin (missing)" in broken["detail"] and "alpha/__init__.py (content differs" in broken["detail"]


def test_folders_a_record_lists_are_not_files(tmp_path, site):
    """cmake 3.26.4's wheel (`wheel tags`, pypa/wheel#558) lists folders in RECORD with the empty
    file's hash and size 0, one of them a folder pip never creates (cmake.libs/): the CPU import
    proof of nanogpt failed on them. A folder is no file to check; the files stay checked."""
    info = make_dist(site, "cmake", "3.26.4", {"cmake/__init__.py": b"def cmake(): pass\n",
                                              "cmake/data/bin/cmake": b"\x7fELF" * 64})
    empty = _b64(b"")
    folders = [f"{info.name}/", "cmake.libs/", "cmake/", "cmake/data/", "cmake/data/bin/"]
    with open(info / "RECORD", "a") as fh:
        fh.write("".join(f"{folder},sha256={empty},0\n" for folder in folders))
    ok = check(tmp_path, dists_effect(cmake="3.26.4"))
    assert ok["ok"] and "1 distribution(s) intact" in ok["detail"], ok["detail"]
    (site / "cmake" / "data" / "bin" / "cmake").unlink()
    broken = check(tmp_path, dists_effect(cmake="3.26.4"))
    assert not broken["ok"] and "cmake/data/bin/cmake (missing)" in broken["detail"]
    assert "cmake/ (" not in broken["detail"] and "cmake.libs/" not in broken["detail"]


def test_manifest_makes_the_check_read_no_file_and_a_changed_stat_is_hashed(tmp_path, site, monkeypatch):
    eff = dists_effect(**{"alpha-pkg": "1.0"})
    os.makedirs(tmp_path / "state")
    node_steps.record_step(str(tmp_path), "pip:x", "d1", eff)  # hashes all, keeps the manifest
    manifest = json.loads((tmp_path / ".envbuild" / "state" / "pip:x.manifest.json").read_text())
    assert manifest["effect"] == eff and len(manifest["dists"]["alpha-pkg"]["files"]) == 3
    hashed = []
    real = node_effects._file_hash
    monkeypatch.setattr(node_effects, "_file_hash", lambda p, a: hashed.append(p) or real(p, a))
    state = str(tmp_path / ".envbuild" / "state")
    res = node_effects.check_effect(eff, node_effects.EffectContext(state), "pip:x")
    assert res["ok"] and hashed == [] and not res["rewrite"]  # stat unchanged: nothing read
    os.utime(site / "alpha" / "data.bin", ns=(1, 1))  # touched, content unchanged
    res = node_effects.check_effect(eff, node_effects.EffectContext(state), "pip:x")
    assert res["ok"] and [Path(p).name for p in hashed] == ["data.bin"] and res["rewrite"]
    hashed.clear()
    res = node_effects.check_effect(eff, node_effects.EffectContext(state, deep=True), "pip:x")
    assert res["ok"] and len(hashed) == 3  # --deep hashes every file
    (site / "alpha" / "data.bin").write_bytes(b"y" * 1000)
    res = node_effects.check_effect(eff, node_effects.EffectContext(state), "pip:x")
    assert not res["ok"] and "data.bin (content differs from RECORD)" in res["detail"]


def test_record_refuses_a_step_whose_effect_does_not_hold(tmp_path, site):
    (site / "beta.py").unlink()
    with pytest.raises(node_actions.ActionFailed, match="ran but its effect does not hold: beta 2.0.cpu: 1 file"):
        node_steps.record_step(str(tmp_path), "pip:b", "d", dists_effect(beta="2.0"))
    assert not (tmp_path / ".envbuild" / "state" / "pip:b.done").exists()


def test_node_state_runs_from_the_first_step_not_done(tmp_path, site):
    env_file = tmp_path / "env.sh"
    env_file.write_text("X\n")
    os.chmod(env_file, 0o644)
    file_eff = {"check": "file", "path": str(env_file), "sha256": hashlib.sha256(b"X\n").hexdigest(), "perm": "0644"}
    steps = [{"id": "a", "digest": "1", "effect": None},
             {"id": "pip:x", "digest": "2", "effect": dists_effect(**{"alpha-pkg": "1.0"})},
             {"id": "env", "digest": "3", "effect": file_eff},
             {"id": "z", "digest": "4", "effect": None}]
    for s in steps:
        node_steps.record_step(str(tmp_path), s["id"], s["digest"], s["effect"])
    prefix = str(tmp_path)
    assert node_steps.node_state(prefix, steps)["pending"] == []
    (site / "alpha" / "data.bin").unlink()
    st = node_steps.node_state(prefix, steps)
    assert st["done"] == ["a"] and st["pending"] == ["pip:x", "env", "z"] and st["repair"] == ["pip:x"]
    assert list(st["effect_failed"]) == ["pip:x"] and st["reasons"]["env"] == "runs after pip:x"
    st = node_steps.node_state(prefix, [{**s, "digest": "new"} if s["id"] == "env" else s for s in steps],
                           from_step="a")
    assert st["pending"] == ["a", "pip:x", "env", "z"] and st["reasons"]["a"].startswith("forced")
    env_file.write_text("Y\n")
    (tmp_path / ".envbuild" / "state" / "a.done").unlink()
    st = node_steps.node_state(prefix, steps)
    assert st["reasons"]["a"].startswith("no marker") and set(st["effect_failed"]) == {"pip:x", "env"}


def test_git_effect_accepts_the_patched_text_only(tmp_path):
    import subprocess

    repo = tmp_path / "x"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *a], cwd=repo,  # noqa: E731
                                    check=True, capture_output=True, text=True).stdout.strip()
    run("init", "-q")
    (repo / "a.py").write_text("V = 'old'\n")
    (repo / "b.py").write_text("B = 1\n")
    run("add", ".")
    run("commit", "-qm", "one")
    sha = run("rev-parse", "HEAD")
    spec = {"id": "p", "kind": "replace", "file": "a.py", "old": "'old'", "new": "'new'", "count": 1}
    eff = {"check": "git", "dest": str(repo), "sha": sha, "patches": [spec]}
    assert check(tmp_path, eff)["ok"]  # the commit's text
    (repo / "a.py").write_text("V = 'new'\n")
    assert check(tmp_path, eff)["ok"]  # the patched text
    assert check(tmp_path, {"check": "patch", "dest": str(repo), "spec": spec})["ok"]
    (repo / "a.py").write_text("V = 'new'\nW = 1\n")
    assert "neither the commit's nor the patched text" in check(tmp_path, eff)["detail"]
    (repo / "a.py").write_text("V = 'new'\n")
    (repo / "b.py").write_text("B = 2\n")
    assert "local changes: b.py" in check(tmp_path, eff)["detail"]
    assert "want " in check(tmp_path, {**eff, "sha": "f" * 40})["detail"]
    # deviation run-single-edits-tree: the next provision's git step checks the pinned commit out again
    run("remote", "add", "origin", str(repo))
    changed, _ = node_actions.do_git({"dest": str(repo), "sha": sha, "ref": None, "fetch_url": str(repo)})
    assert changed and (repo / "b.py").read_text() == "B = 1\n" and check(tmp_path, eff)["ok"]


def test_git_effect_reads_a_crlf_file_as_the_patch_action_writes_it(tmp_path):
    """DeeperSpeed eb7f5cf commits deepspeed/runtime/zero/stage3.py with CRLF endings: the tree as
    checked out (CRLF) is the commit's text, and after the patch action (universal newlines in,
    "\\n" out) it is the patched text; found on a lent H200, where both were called local changes."""
    import subprocess

    repo = tmp_path / "x"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "core.autocrlf=false",  # noqa: E731
                                     *a], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()
    run("init", "-q")
    (repo / "s.py").write_bytes(b"import torch\r\nfrom torch._six import inf\r\nX = inf\r\n")
    run("add", ".")
    run("commit", "-qm", "one")
    sha = run("rev-parse", "HEAD")
    spec = {"id": "six", "kind": "replace", "file": "s.py", "old": "from torch._six import inf\n",
            "new": "from torch import inf\n", "count": 1}
    eff = {"check": "git", "dest": str(repo), "sha": sha, "patches": [spec]}
    assert check(tmp_path, eff)["ok"], check(tmp_path, eff)  # as checked out
    changed, _ = node_actions.do_patch({"spec": spec, "dest": str(repo), "diff_dir": str(tmp_path / "diffs")})
    assert changed and b"from torch import inf\n" in (repo / "s.py").read_bytes()
    assert check(tmp_path, eff)["ok"], check(tmp_path, eff)  # as patched
    assert check(tmp_path, {"check": "patch", "dest": str(repo), "spec": spec})["ok"]
    (repo / "s.py").write_bytes(b"import torch\nfrom torch import inf\nX = 2\n")
    assert "neither the commit's nor the patched text" in check(tmp_path, eff)["detail"]


def test_probe_command_runs_the_same_check_in_one_process(tmp_path):
    prefix = str(tmp_path / "env")
    step = Step(id="env-file", title="", params=P.EnvFileParams(path=f"{prefix}/.envbuild/env.sh", vars={"A": "1"}))
    plan = plan_of(prefix, step)
    os.makedirs(f"{prefix}/.envbuild/state")
    Path(step.params.path).write_text(env_file_text(prefix, {"A": "1"}))
    os.chmod(step.params.path, 0o644)
    cmd = probe_command(sys.executable, prefix, plan_steps(plan))
    rc, out, err = run_local(cmd)
    assert rc == 0, err
    probe = parse_probe(out)
    assert probe.pending == ["env-file"] and probe.state["reasons"]["env-file"].startswith("no marker")
    assert probe.state["effects"]["env-file"]["ok"] and probe.observed is None


def test_a_bundle_of_thousands_of_files_is_probed_through_stdin(tmp_path):
    """The probe of a plan whose bundle step lists 10,000 files (issue 41: 3,000 gave E2BIG, one
    `sh -c` argument over 128 KiB) sends its payload on stdin; the command stays small and every
    file's size is checked, by this machine's runner and by the node path's."""
    from envbuild.actions.nodestate import ARG_LIMIT, probe_call
    from envbuild.connect.nodes import local_node
    from envbuild.connect.runners import LocalRunner
    from envbuild.connect.ssh import run as node_run

    prefix = str(tmp_path / "env")
    bundle = Path(prefix) / ".envbuild" / "bundle"
    (bundle / "w").mkdir(parents=True)
    files = []
    for i in range(10_000):
        name = f"w/pkg_{i:05d}-1.0-py3-none-any.whl"
        (bundle / name).write_bytes(b"x" * (i % 7))
        files.append(P.StagedFile(name=name, sha256=f"{i:064x}", size=i % 7))
    params = P.BundleParams(digest="d" * 64, src=str(tmp_path / "src"), files=files, dir=str(bundle))
    plan = plan_of(prefix, Step(id="bundle", title="", params=params))
    os.makedirs(f"{prefix}/.envbuild/state", exist_ok=True)
    call = probe_call(sys.executable, prefix, plan_steps(plan))
    assert call.stdin is not None and len(call.command) < ARG_LIMIT + 64 * 1024
    res = LocalRunner().run(call.command, stdin=call.stdin)
    for rc, out, err in (node_run(local_node(), call.command, stdin=call.stdin), (res.rc, res.stdout, res.stderr)):
        assert rc == 0, err
        effect = parse_probe(out).state["effects"]["bundle"]
        assert effect["ok"] and "10000 file(s), sizes checked" in effect["detail"], effect


def _forge(repo: Path, sha: str, path: str, text: str) -> None:
    """Replace the loose object of ``path`` at commit ``sha`` by ``text`` under the same name
    (what a re-packed bundle can carry: git reads a loose object by its name, unhashed)."""
    import zlib

    blob = subprocess.run(["git", "-C", str(repo), "rev-parse", f"{sha}:{path}"], check=True, capture_output=True,
                          text=True).stdout.strip()
    obj = repo / ".git" / "objects" / blob[:2] / blob[2:]
    obj.chmod(0o644)
    obj.write_bytes(zlib.compress(b"blob %d\0" % len(text.encode()) + text.encode()))


@pytest.mark.parametrize("mode", ["clone", "submodule", "without"])
def test_forged_objects_under_the_pinned_sha_are_refused(tmp_path, mode):
    """Issue 41: a copy of a repository (a bundle's, a mirror) whose object named by the pinned
    tree holds other content. Cloned as git copies objects locally, the forged code would be
    checked out and `git status` would see nothing; the node's clone hashes every object it
    receives (the git transport, transfer.fsckObjects), so the step fails and nothing is left
    at dest. The same for a submodule fetched from such a mirror, and for a copy that lacks
    documents by design (``without``: cloned by copying, then every object rehashed)."""
    submodule = mode == "submodule"

    def git(cwd, *args):
        return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                              env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                   "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()

    def repo(name, file, text):
        path = tmp_path / name
        path.mkdir()
        git(path, "init", "-q", "-b", "main")
        (path / file).write_text(text)
        git(path, "add", ".")
        git(path, "commit", "-qm", "one")
        return path

    src = repo("src", "run.py", "print('genuine')\n")
    mirrors = {}
    if submodule:
        sub = repo("sub", "lib.py", "print('genuine lib')\n")
        # .gitmodules names the upstream URL; the node fetches it from the mirror (insteadOf)
        git(src, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "lib")
        git(src, "config", "-f", ".gitmodules", "submodule.lib.url", "https://example.invalid/lib.git")
        git(src, "add", ".gitmodules")
        git(src, "commit", "-qm", "with lib")
        mirrors = {"https://example.invalid/lib.git": str(sub)}
        _forge(sub, git(sub, "rev-parse", "HEAD"), "lib.py", "print('pwned lib')\n")
    sha = git(src, "rev-parse", "HEAD")
    if not submodule:
        _forge(src, sha, "run.py", "print('pwned')\n")
        assert "pwned" in git(src, "show", f"{sha}:run.py")  # git itself reads the forgery
    dest = tmp_path / "dest"
    action = {"dest": str(dest), "sha": sha, "ref": "main", "fetch_url": str(src),
              "submodules": ["lib"] if submodule else [], "submodule_mirrors": mirrors,
              **({"without": ["docs/paper.pdf"]} if mode == "without" else {})}
    with pytest.raises(node_actions.ActionFailed) as err:
        node_actions.do_git(action)
    if mode == "without":
        assert "1 of 3 objects in the copy at" in str(err.value) and "do not hash to their names" in str(err.value)
    else:
        assert "did not receive expected object" in str(err.value), str(err.value)  # hashed on arrival
    for root, _dirs, files in os.walk(tmp_path / "dest"):
        for name in files:
            if name.endswith(".py"):
                assert "pwned" not in Path(root, name).read_text()
    if not submodule:
        assert not dest.exists() and not Path(str(dest) + ".partial").exists()
