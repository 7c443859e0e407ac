"""The action -> shell translation, executed for real by sh: values stay data, files are exact;
checkouts, patches, wheel builds and captures go through the shipped node tool, which checks
out and verifies the pinned commit, applies patches, records every capture before failing, and
leaves what Ansible's path (the same function, ``run_actions``) leaves. Fast: local git only,
no pip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.actions.model import (ApplyPatch, BuildWheel, Capture, CopyAsset, GitCheckout, MakeDir, Run,
                                    WriteFile)
from envbuild.node import actions as node_actions
from envbuild.render import script
from envbuild.render.shell import (NODE_TOOL, Where, action_name, capture_failures, commands,
                                   heredoc_delimiter, ship_into, shipped)
from support.paths import ROOT


def run_sh(tmp: Path, actions: list, *, pre: list[str] = (), post: list[str] = ()) -> subprocess.CompletedProcess:
    """Write the commands and shipped files under ``tmp`` and run them with sh -eu (the node tool
    under this interpreter)."""
    files = tmp / "files"
    for rel, item in shipped(actions).items():
        (files / rel).parent.mkdir(parents=True, exist_ok=True)
        (files / rel).write_text(item if isinstance(item, str) else Path(item).read_text())
    body = "\n".join(["set -eu", *pre, *commands(actions, Where(files=str(files), python=sys.executable)),
                      *post]) + "\n"
    (tmp / "s.sh").write_text(body)
    return subprocess.run(["sh", str(tmp / "s.sh")], capture_output=True, text=True, timeout=60)


NASTY = "$HOME `id` $(echo x) 'single' \"double\" \\back\nENVBUILD_EOF_x\n"


@pytest.mark.parametrize("content", [NASTY, "no newline at the end $PATH", "", "line\n" * 3])
def test_write_file_is_exact_and_never_expanded(tmp_path: Path, content: str) -> None:
    dest = tmp_path / "a b" / "f.txt"
    r = run_sh(tmp_path, [WriteFile(path=str(dest), content=content, perm="0600")])
    assert r.returncode == 0, r.stderr
    assert dest.read_bytes() == content.encode()
    assert dest.stat().st_mode & 0o777 == 0o600


def test_heredoc_delimiter_avoids_the_content() -> None:
    d = heredoc_delimiter("x\n")
    assert heredoc_delimiter(f"x\n{d}\n") != d


def test_run_quotes_argv_env_cwd_and_path(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "mytool"
    tool.write_text('#!/bin/sh\nprintf "%s|" "$@" "$PWD" "$V"\n')
    tool.chmod(0o755)
    out = tmp_path / "state" / "out.txt"
    act = Run(argv=["mytool", "a b", "$(touch pwned)", "it's"], env={"V": "$HOME;`id`"},
              cwd=str(tmp_path), path=[str(tmp_path / "bin")], stdout=str(out))
    r = run_sh(tmp_path, [act])
    assert r.returncode == 0, r.stderr
    assert out.read_text() == f"a b|$(touch pwned)|it's|{tmp_path}|$HOME;`id`|"
    assert not (tmp_path / "pwned").exists()


def test_failing_run_stops_the_script(tmp_path: Path) -> None:
    r = run_sh(tmp_path, [Run(argv=["false"]), MakeDir(path=str(tmp_path / "never"))])
    assert r.returncode != 0 and not (tmp_path / "never").exists()


def _repo(path: Path) -> list[str]:
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    shas = []
    for i in range(2):
        (path / "setup.py").write_text(f"VERSION = {i}\nCHECK = True\n")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"c{i}"], check=True)
        shas.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip())
    return shas


def test_git_checkout_pins_verifies_and_reuses(tmp_path: Path) -> None:
    first, _ = _repo(tmp_path / "upstream")
    dest = tmp_path / "src" / "tree"
    act = GitCheckout(fetch_url=str(tmp_path / "upstream"), url="https://example.invalid/o/n",
                      ref="main", sha=first, dest=str(dest))
    for _ in range(2):  # the second run reuses the clone
        r = run_sh(tmp_path, [act])
        assert r.returncode == 0, r.stderr
        assert subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip() == first
    assert "VERSION = 0" in (dest / "setup.py").read_text()
    origin = subprocess.run(["git", "-C", str(dest), "remote", "get-url", "origin"], capture_output=True, text=True)
    assert origin.stdout.strip() == "https://example.invalid/o/n"
    bad = act.model_copy(update={"sha": "0" * 40, "fetch_url": str(tmp_path / "upstream")})
    assert run_sh(tmp_path, [bad]).returncode != 0


def test_apply_patch_through_the_shipped_tool(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "setup.py").write_text("CHECK = True\n")
    spec = {"id": "no-check", "kind": "replace", "file": "setup.py", "old": "CHECK = True",
            "new": "CHECK = False", "count": 1, "decision": None, "nvcc": None, "torch_cuda": None}
    act = ApplyPatch(spec=spec, dest=str(tree), diff_dir=str(tmp_path / "diffs"))
    r = run_sh(tmp_path, [act])
    assert r.returncode == 0, r.stderr
    assert "applied" in r.stdout and (tree / "setup.py").read_text() == "CHECK = False\n"
    assert "+CHECK = False" in (tmp_path / "diffs" / "no-check.diff").read_text()
    again = run_sh(tmp_path, [act])
    assert again.returncode == 0 and "already-applied" in again.stdout
    (tree / "setup.py").write_text("something else\n")
    assert run_sh(tmp_path, [act]).returncode == 1


def test_captures_all_run_then_the_step_fails(tmp_path: Path) -> None:
    env_file = tmp_path / "env.sh"
    env_file.write_text("export GREETING='hello from env.sh'\n")
    out = tmp_path / "smoke"
    acts = [Capture(name="bad", argv=["sh", "-c", "echo oops >&2; exit 3"], cwd=str(tmp_path), dir=str(out)),
            Capture(name="good", argv=["sh", "-c", 'echo "$GREETING"'], cwd=str(tmp_path), dir=str(out),
                    env_file=str(env_file))]
    r = run_sh(tmp_path, acts, pre=["failed=''"], post=[capture_failures()])
    assert r.returncode == 1 and "smoke failed: bad(exit 3)" in r.stderr
    assert (out / "bad.rc").read_text() == "3\n" and (out / "bad.err").read_text() == "oops\n"
    assert (out / "good.rc").read_text() == "0\n" and (out / "good.out").read_text() == "hello from env.sh\n"


def test_copy_asset_from_the_files_folder(tmp_path: Path) -> None:
    dest = tmp_path / "smoke" / "gpt.py"
    r = run_sh(tmp_path, [CopyAsset(asset="smoke/gpt.py", dest=str(dest), perm="0755")])
    assert r.returncode == 0, r.stderr
    assert dest.read_text() == (ROOT / "envbuild/smoke/gpt.py").read_text()
    assert dest.stat().st_mode & 0o777 == 0o755


# --- one implementation: the shell render's node tool and Ansible's function leave the same ---

def both(tmp: Path, make) -> tuple[subprocess.CompletedProcess, dict | node_actions.ActionFailed]:
    """``make(root)`` -> actions, run once by a render's commands under ``tmp/sh`` and once by the
    function Ansible's envbuild_actions module calls (``run_actions``) under ``tmp/node``."""
    (tmp / "sh").mkdir(parents=True, exist_ok=True)
    (tmp / "node").mkdir(parents=True, exist_ok=True)
    shell = run_sh(tmp / "sh", make(tmp / "sh"), pre=["failed=''"], post=[capture_failures()])
    try:
        node = node_actions.run_actions([a.model_dump(mode="json") for a in make(tmp / "node")])
    except node_actions.ActionFailed as exc:
        node = exc
    return shell, node


def listing(root: Path) -> dict[str, str]:
    """Every file under ``root`` but git's own and the shell run's script and files/ (path -> text)."""
    return {str(p.relative_to(root)): p.read_text(errors="replace") for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts
            and p.relative_to(root).parts[0] not in ("files", "s.sh")}


def tree(dest: Path) -> dict:
    def git(*args: str, at: Path = dest) -> str:
        return subprocess.run(["git", "-C", str(at), *args], capture_output=True, text=True, check=True).stdout.strip()

    return {"head": git("rev-parse", "HEAD"), "origin": git("remote", "get-url", "origin"),
            "status": git("status", "--porcelain"), "sub": git("rev-parse", "HEAD", at=dest / "sub"),
            "files": listing(dest)}


def test_a_checkout_with_a_submodule_is_the_same_by_run_sh_and_by_ansible(tmp_path: Path) -> None:
    sub_sha, _ = _repo(tmp_path / "subrepo")
    first, _ = _repo(tmp_path / "upstream")
    up = ["git", "-C", str(tmp_path / "upstream"), "-c", "user.name=t", "-c", "user.email=t@t",
          "-c", "protocol.file.allow=always"]
    subprocess.run([*up, "submodule", "add", "-q", str(tmp_path / "subrepo"), "sub"], check=True)
    subprocess.run([*up, "-C", "sub", "checkout", "-q", sub_sha], check=True)
    subprocess.run([*up, "config", "-f", ".gitmodules", "submodule.sub.url", "https://example.invalid/sub"], check=True)
    subprocess.run([*up, "commit", "-qam", "sub"], check=True)
    pinned = subprocess.run([*up, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    def make(root: Path, sha: str = pinned) -> list:
        return [GitCheckout(fetch_url=str(tmp_path / "upstream"), url="https://example.invalid/o/n", ref="main",
                            sha=sha, dest=str(root / "src" / "tree"), submodules=["sub"],
                            submodule_mirrors={"https://example.invalid/sub": str(tmp_path / "subrepo")})]

    for _ in range(2):  # the second run reuses each clone
        shell, node = both(tmp_path, make)
        assert shell.returncode == 0 and isinstance(node, dict), (shell.stderr, node)
        got = tree(tmp_path / "sh" / "src" / "tree")
        assert got == tree(tmp_path / "node" / "src" / "tree")
        assert got["head"] == pinned and got["sub"] == sub_sha and got["origin"] == "https://example.invalid/o/n"
    shell, node = both(tmp_path / "bad", lambda root: make(root, "0" * 40))
    assert shell.returncode == 1 and f"commit {'0' * 40} is not in" in shell.stderr
    assert isinstance(node, node_actions.ActionFailed) and node.msg.replace("/node/", "/sh/") in shell.stderr
    assert not list((tmp_path / "bad" / "sh" / "src").iterdir()) and not list((tmp_path / "bad" / "node" / "src").iterdir())


def test_a_patch_is_the_same_by_run_sh_and_by_ansible(tmp_path: Path) -> None:
    spec = {"id": "no-check", "kind": "regex", "file": "setup.py", "old": r"^CHECK = True$",
            "new": "CHECK = False", "count": 1, "decision": None, "nvcc": None, "torch_cuda": None}

    def make(root: Path) -> list:
        (root / "tree").mkdir(exist_ok=True)
        if not (root / "tree" / "setup.py").exists():
            (root / "tree" / "setup.py").write_text("VERSION = 1\nCHECK = True\n")
            (root / "tree" / "setup.py").chmod(0o750)
        return [ApplyPatch(spec=spec, dest=str(root / "tree"), diff_dir=str(root / "diffs"))]

    for status in ("applied", "already-applied"):
        shell, node = both(tmp_path, make)
        assert shell.stdout == f"patch no-check: {status}\n" and node["log"] == [f"patch no-check: {status}"]
        assert listing(tmp_path / "sh") == listing(tmp_path / "node")
        assert (tmp_path / "sh" / "tree" / "setup.py").stat().st_mode & 0o777 == 0o750
    assert "+CHECK = False" in (tmp_path / "sh" / "diffs" / "no-check.diff").read_text()


WHEEL = ("import os, pathlib, sys; print('running bdist_wheel', flush=True); "
         "pathlib.Path(sys.argv[1]).joinpath(os.environ['NAME']).write_text("
         "pathlib.Path('setup.py').read_text() + os.environ['PATH'].split(':')[0])")


def test_a_wheel_build_is_the_same_by_run_sh_and_by_ansible(tmp_path: Path) -> None:
    def make(root: Path, name: str = "x-1.0-py3-none-any.whl") -> list:
        (root / "tree").mkdir(exist_ok=True)
        (root / "tree" / "setup.py").write_text("built from the tree\n")
        return [BuildWheel(argv=[sys.executable, "-c", WHEEL, str(root / "wheels" / "k")], cwd=str(root / "tree"),
                           env={"NAME": name}, path=["/first/on/path"], outdir=str(root / "wheels" / "k"),
                           cache_key="k")]

    shell, node = both(tmp_path, make)
    assert shell.returncode == 0 and isinstance(node, dict), (shell.stderr, node)
    assert listing(tmp_path / "sh") == listing(tmp_path / "node")
    assert (tmp_path / "sh" / "wheels" / "k" / "x-1.0-py3-none-any.whl").read_text() == "built from the tree\n/first/on/path"
    # the build's output: as it comes on run.sh's stdout, its tail in the module's log
    assert shell.stdout.splitlines()[1:] == ["running bdist_wheel", "wheel: x-1.0-py3-none-any.whl"]
    assert shell.stdout.startswith(f"$ {sys.executable} -c ")
    assert node["log"][1:] == ["running bdist_wheel", "wheel: x-1.0-py3-none-any.whl"]
    shell, node = both(tmp_path / "none", lambda root: make(root, "not-a-wheel.txt"))
    assert shell.returncode == 1 and isinstance(node, node_actions.ActionFailed)
    assert shell.stderr == node.msg.replace("/node/", "/sh/") + "\n"
    assert node.msg == f"the build produced no wheel in {tmp_path / 'none' / 'node' / 'wheels' / 'k'}"


def test_a_wheel_build_takes_its_parallelism_from_the_machine_it_runs_on(tmp_path: Path) -> None:
    """MAX_JOBS is sized where the script runs (at most the planned value): on the command line,
    not in the action's file."""
    act = BuildWheel(argv=["sh", "-c", 'printf %s "$MAX_JOBS" > "$0/MAX_JOBS.whl"', str(tmp_path / "w")],
                     cwd=str(tmp_path), env={"MAX_JOBS": "96"}, outdir=str(tmp_path / "w"), cache_key="k")
    assert json.loads(shipped([act])[action_name(act)])["env"] == {}
    r = run_sh(tmp_path, [act])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "w" / "MAX_JOBS.whl").read_text() == str(min(os.cpu_count() or 1, 96))


def test_captures_are_the_same_by_run_sh_and_by_ansible(tmp_path: Path) -> None:
    """Every capture runs and is recorded before the failure is told, by both."""
    def make(root: Path) -> list:
        (root / "env.sh").write_text("export GREETING='hello from env.sh'\n")
        return [Capture(name="bad", argv=["sh", "-c", "echo oops >&2; exit 3"], cwd=str(root), dir=str(root / "smoke")),
                Capture(name="slow", argv=["sleep", "5"], cwd=str(root), dir=str(root / "smoke"), timeout=1),
                Capture(name="good", argv=["sh", "-c", 'echo "$GREETING" "$X"'], cwd=str(root), dir=str(root / "smoke"),
                        env_file=str(root / "env.sh"), env={"X": "$HOME"})]

    shell, node = both(tmp_path, make)
    assert shell.returncode == 1 and "smoke failed: bad(exit 3) slow(exit 124)" in shell.stderr
    assert isinstance(node, node_actions.ActionFailed) and node.rc == 3
    assert node.msg == "smoke failed: bad (exit 3): oops; slow (exit 124, timed out): "
    assert listing(tmp_path / "sh") == listing(tmp_path / "node")
    smoke = tmp_path / "sh" / "smoke"
    assert [(smoke / f"{n}.rc").read_text() for n in ("bad", "slow", "good")] == ["3\n", "124\n", "0\n"]
    assert (smoke / "bad.err").read_text() == "oops\n" and (smoke / "good.out").read_text() == "hello from env.sh $HOME\n"


def test_the_node_tool_is_shipped_as_one_folder_with_each_actions_file() -> None:
    acts = [GitCheckout(fetch_url="/m", url="https://example.invalid/a b", ref="r", sha="1" * 40, dest="/p/src/a b"),
            Capture(name="gpt", argv=["true"], cwd="/p", dir="/p/smoke")]
    files = shipped(acts)
    assert sorted(files) == ["actions/capture-gpt.json", "actions/git-a_b.json",
                             *(f"{NODE_TOOL}/{n}" for n in ("__init__.py", "__main__.py", "actions.py", "textpatch.py"))]
    assert json.loads(files["actions/git-a_b.json"]) == acts[0].model_dump(mode="json")
    assert commands(acts, Where(files='"$FILES"', python="/p/bin/python")) == [
        '/p/bin/python "$FILES/envbuild_node" "$FILES/actions/git-a_b.json"',
        '/p/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"']
    into: dict = {}
    ship_into(into, files, "files/")
    ship_into(into, shipped(acts[:1]), "files/")  # the same files again: nothing changes
    other = acts[1].model_copy(update={"argv": ["false"]})  # another capture of the same name
    with pytest.raises(ValueError, match="two shipped files named files/actions/capture-gpt.json"):
        ship_into(into, shipped([other]), "files/")


def test_run_sh_runs_chosen_steps(tmp_path: Path) -> None:
    """The shell format's run.sh: functions per step, selected by id, unknown id refused."""
    from envbuild.facts.model import Interpreter
    from envbuild.facts.profile import from_target
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import resolve
    from envbuild.recipes import load_recipe
    from envbuild.render.context import write
    from envbuild.targets import load_target

    tgt = load_target("local")
    facts = from_target(tgt).model_copy(update={"home": str(tmp_path), "missing": {},
                                                "pythons": [Interpreter(path="python3", version="3.11")]})
    prefix = tmp_path / "env"
    plan = resolve(load_recipe("cpu-reference"), tgt, facts, None, PlanOptions(prefix=str(prefix))).plan
    write(script.render(plan), tmp_path / "out")
    r = subprocess.run(["bash", str(tmp_path / "out" / "run.sh"), "preflight", "env-file"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "==> [2/2] env-file" in r.stdout
    assert f"export VIRTUAL_ENV={prefix}" in (prefix / ".envbuild" / "env.sh").read_text()
    bad = subprocess.run(["bash", str(tmp_path / "out" / "run.sh"), "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no step nope" in bad.stderr
