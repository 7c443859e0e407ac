"""The playbook roles on the local node, through the real executor (render -> ansible-runner)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.connect.nodes import connection_vars, local_node
from envbuild.execute import ansible as ex
from envbuild.execute.events import EventSink, StepTracker
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.render.ansible import render

pytestmark = pytest.mark.integration


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    git("init", "-q", "-b", "main", cwd=r)
    (r / "mod_x.py").write_text("VALUE = 'old'\n")
    git("add", ".", cwd=r)
    git("commit", "-qm", "one", cwd=r)
    return r


def env_step(prefix, python="3.11", path=sys.executable):
    """A venv made --without-pip: no step of these plans installs with pip (ensurepip would cost
    ~2.5 s of CPU a venv, for nothing)."""
    return Step(id="environment", title="venv", params=P.EnvironmentParams(
        backend="venv", prefix=prefix, python=python, interpreter=path or f"python{python}", with_pip=False))


def run_plan(tmp_path, steps, prefix, edit=None):
    """Render the plan of ``steps`` for the local node, let ``edit`` change the planned steps as
    the playbook reads them (a list of dicts, edited in place), run it: (rc, host, events)."""
    plan = Plan(recipe="t", target="local", host="local", prefix=prefix, backend="venv", steps=steps)
    rd = tmp_path / "run"
    node = local_node()
    conn = {**connection_vars(node), "ansible_remote_tmp": str(rd / "remote")}
    r = render({"local": plan}, {"local": conn}, {"local": node.node_path}, run_dir=str(rd),
               cache_dir=str(tmp_path / "cache"))
    if edit is not None:
        hv = r.inventory["all"]["hosts"]["local"]
        planned = json.loads(hv["provision_plan_json"])
        edit(planned)
        hv["provision_plan_json"] = json.dumps(planned)
    job = ex.prepare(rd / "ansible", r, forks=1, insecure=False)
    tracker = StepTracker()
    sink = EventSink(rd / "events.jsonl")
    rc = ex.run(job, sink, tracker)
    sink.close()
    return rc, tracker.hosts["local"], [json.loads(x) for x in (rd / "events.jsonl").read_text().splitlines()]


def env_file_step(prefix):
    return Step(id="env-file", title="env", params=P.EnvFileParams(path=f"{prefix}/.envbuild/env.sh", vars={"A": "1"}))


def git_step(repo, sha, dest):
    return Step(id="git:x", title="x", params=P.GitSourceParams(
        name="x", url="https://example.invalid/x", fetch_url=str(repo), ref="main", sha=sha, dest=dest))


def test_git_patch_pth_envfile_import_and_rerun_skips(tmp_path, repo):
    prefix = str(tmp_path / "env")
    sha = git("rev-parse", "HEAD", cwd=repo)
    dest = f"{prefix}/src/x"
    steps = [
        env_step(prefix),
        git_step(repo, sha, dest),
        Step(id="patch:x-value", title="p", params=P.PatchParams(
            id="x-value", component="x", dest=dest, patch_kind="replace", file="mod_x.py",
            old="'old'", new="'new'", why="test")),
        Step(id="install:x", title="x", params=P.InstallSourceParams(name="x", dest=dest, mode="pth")),
        Step(id="env-file", title="env", params=P.EnvFileParams(
            path=f"{prefix}/.envbuild/env.sh", vars={"NCCL_IB_PCI_RELAXED_ORDERING": "1"})),
        Step(id="import-check", title="imp", params=P.ImportCheckParams(modules=["mod_x"])),
    ]
    rc, host, events = run_plan(tmp_path, steps, prefix)
    assert rc == 0, (host.message, host.tail())
    assert host.changed + host.ok == [s.id for s in steps]
    assert git("rev-parse", "HEAD", cwd=dest) == sha
    out = subprocess.run([f"{prefix}/bin/python", "-c", "import mod_x; print(mod_x.VALUE)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "new"
    assert "+VALUE = 'new'" in Path(prefix, ".envbuild/patches/x-value.diff").read_text()
    assert "export NCCL_IB_PCI_RELAXED_ORDERING=1" in Path(prefix, ".envbuild/env.sh").read_text()
    for s in steps:
        assert Path(prefix, ".envbuild/state", s.id + ".done").read_text().strip() == s.digest
    assert {e["kind"] for e in events} >= {"start", "changed"}

    rc, host, _ = run_plan(tmp_path, steps, prefix)
    assert rc == 0 and host.changed == [] and host.skipped == [s.id for s in steps]


def test_wrong_sha_fails_with_both_shas_and_leaves_nothing(tmp_path, repo):
    prefix = str(tmp_path / "env")
    head = git("rev-parse", "HEAD", cwd=repo)
    wrong = "0123456789abcdef0123456789abcdef01234567"
    dest = f"{prefix}/src/x"
    steps = [env_step(prefix), git_step(repo, wrong, dest)]
    rc, host, events = run_plan(tmp_path, steps, prefix)
    assert rc != 0
    assert host.failed_step == "git:x"
    assert wrong in host.message and head in host.message
    assert not Path(dest).exists() and not Path(dest + ".partial").exists()
    assert not Path(prefix, ".envbuild/state/git:x.done").exists()
    assert [e for e in events if e["kind"] == "failed"][0]["step"] == "git:x"


def test_missing_interpreter_is_named(tmp_path):
    prefix = str(tmp_path / "env")
    rc, host, _ = run_plan(tmp_path, [env_step(prefix, python="3.4", path=None)], prefix)
    assert rc != 0 and host.failed_step == "environment"
    assert "python3.4" in host.message and "not found on the node" in host.message
    assert not Path(prefix, "bin/python").exists()


def test_a_step_whose_effect_does_not_hold_is_not_recorded(tmp_path):
    """The marker of a step whose last batch is a node batch is written inside that module run,
    after the effect is checked in full: an effect that does not hold after the actions ran
    fails that step (by name, with the reason), writes no marker, and runs nothing after it."""
    prefix = str(tmp_path / "env")
    steps = [env_step(prefix), env_file_step(prefix),
             Step(id="import-check", title="imp", params=P.ImportCheckParams(modules=["json"]))]

    def unreachable_effect(planned):
        [env_file] = [s for s in planned if s["id"] == "env-file"]
        assert env_file["batches"][-1]["record"] is True  # recorded inside its node batch
        env_file["effect"] = {**env_file["effect"], "sha256": "0" * 64}  # what the actions cannot give

    rc, host, _ = run_plan(tmp_path, steps, prefix, edit=unreachable_effect)
    assert rc != 0 and host.failed_step == "env-file", (host.failed_step, host.message)
    assert "ran but its effect does not hold" in host.message
    state = Path(prefix, ".envbuild/state")
    assert (state / "environment.done").exists() and not (state / "env-file.done").exists()
    assert not (state / "import-check.done").exists()


def test_a_text_batch_writes_the_files_bytes_never_templated(tmp_path):
    """A ``text`` batch (envbuild's own text files: smoke scripts, node tools) is read on the
    controller and written on the node by envbuild_actions: the same bytes, the batch's mode,
    and a template in the text stays text (the lookup's result is not templated again)."""
    prefix = str(tmp_path / "env")
    marker = tmp_path / "pwned"
    source = tmp_path / "script.py"
    source.write_bytes(f"# {{{{ lookup('pipe', 'touch {marker}') }}}} {{% raw %}}\nprint('ü')\n\n".encode())
    dest = f"{prefix}/.envbuild/script.py"

    def text_first(planned):
        [env_file] = [s for s in planned if s["id"] == "env-file"]
        env_file["batches"] = [{"type": "text", "src": str(source), "dest": dest, "mode": "0640"},
                               *env_file["batches"]]
        env_file["form"] = "batches"

    rc, host, _ = run_plan(tmp_path, [env_step(prefix), env_file_step(prefix)], prefix, edit=text_first)
    assert rc == 0, (host.failed_step, host.message)
    assert Path(dest).read_bytes() == source.read_bytes() and Path(dest).stat().st_mode & 0o777 == 0o640
    assert not marker.exists()
