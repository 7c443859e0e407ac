"""The action -> shell translation, executed for real by sh: values stay data, files are exact,
git checks out and verifies the pinned commit, patches apply through the shipped tool,
captures record every run before failing. Fast: local git only, no pip."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envbuild.actions.model import ApplyPatch, Capture, CopyAsset, GitCheckout, MakeDir, Run, WriteFile
from envbuild.render import script
from envbuild.render.shell import Where, capture_failures, commands, heredoc_delimiter, shipped


def run_sh(tmp: Path, actions: list, *, pre: list[str] = (), post: list[str] = ()) -> subprocess.CompletedProcess:
    """Write the commands and shipped files under ``tmp`` and run them with sh -eu."""
    files = tmp / "files"
    for rel, item in shipped(actions).items():
        (files / rel).parent.mkdir(parents=True, exist_ok=True)
        (files / rel).write_text(item if isinstance(item, str) else Path(item).read_text())
    body = "\n".join(["set -eu", *pre, *commands(actions, Where(files=str(files))), *post]) + "\n"
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
    assert dest.read_text() == (Path(__file__).resolve().parents[1] / "envbuild/smoke/gpt.py").read_text()
    assert dest.stat().st_mode & 0o777 == 0o755


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
