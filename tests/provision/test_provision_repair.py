"""Re-provisioning trusts the node's state, not step markers: each drift is seen by ``verify``
and repaired by ONE provision, which says which steps ran again and why.

One real cpu-reference environment (torch 2.13.0+cpu from the wheelhouse) is provisioned once
for the module; the drift cases run in sequence on it: a package uninstalled, files of torch
deleted (pip would say "already satisfied"), another version of a locked package, the env file
edited, a half-installed torch (files gone and its marker gone, as a crash in the middle of the
install leaves it). Git trees (moved to another commit, dirty, patch reverted) run on a tiny
local repository through the real playbook (``run_local_plan``). ``ansible-playbook --check``
changes nothing, markers included. A no-op provision starts no Ansible.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envbuild.connect.runners import LocalRunner
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.provision import ProvisionOptions, provision
from envbuild.testbed.local_plan import run_local_plan
from envbuild.verify import verify

pytestmark = pytest.mark.integration

WHEELS = "/opt/wheels"
CASES: dict[str, bool] = {}  # drift case -> repaired by one provision (the closing test counts them)


@pytest.fixture(scope="module")
def env(module_tmp):
    """One provisioned cpu-reference environment, shared by the cases below (in order)."""
    root = module_tmp("repair")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVBUILD_HOME", str(root / "home"))
        prefix = root / "env"
        out = provision(ProvisionOptions(target="local", prefix=str(prefix), wheelhouse=WHEELS, smoke=False))
        assert out.exit_code == 5, out.results  # no smoke: nothing judged (NOT JUDGED, exit 5)
        yield {"root": root, "prefix": prefix, "site": prefix / "lib" / "python3.11" / "site-packages",
               "python": str(prefix / "bin" / "python")}


def again(env, **kw):
    """One provision of the shared environment: (outcome, its node result, its events)."""
    out = provision(ProvisionOptions(target="local", prefix=str(env["prefix"]), wheelhouse=WHEELS, smoke=False, **kw))
    events = [json.loads(x) for x in (out.run_dir / "events.jsonl").read_text().splitlines() if x.strip()]
    return out, out.results.get("local"), events


def ids(out) -> list[str]:
    """The plan's step ids, in order."""
    return [s.id for s in out.plans["local"].steps]


def from_(out, sid: str) -> list[str]:
    """``sid`` and every step after it: what runs again when ``sid`` is the first not done."""
    all_ids = ids(out)
    return all_ids[all_ids.index(sid):]


def earlier(out, sid: str) -> list[str]:
    all_ids = ids(out)
    return all_ids[:all_ids.index(sid)]


def drift_of(run_dir: Path) -> list[tuple[str, str]]:
    [verdict] = verify(run_dir, [LocalRunner(name="local")])
    assert verdict.status in ("clean", "drift"), verdict.message
    return [(d.kind, d.subject) for d in verdict.drift]


def latest(env) -> Path:
    return Path(env["root"] / "home" / "runs" / "latest").resolve()


def repaired(env, case: str, out, res, ran: list[str], broken: list[str], repair: list[str]) -> None:
    """Assert one provision repaired ``case``: exit 5 (no smoke: NOT JUDGED), the steps that ran, the steps whose effect
    did not hold, the steps reinstalled, and a clean verify after it."""
    assert out.exit_code == 5, res
    assert res["changed"] == ran, res
    assert sorted(res["effect_failed"]) == sorted(broken), res["effect_failed"]
    assert res["repair"] == repair, res
    after = drift_of(out.run_dir)
    CASES[case] = not after
    assert after == [], after


def pip(env, *args):
    subprocess.run([env["python"], "-m", "pip", *args], check=True, capture_output=True)


def state_snapshot(prefix: Path) -> dict:
    state = prefix / ".envbuild" / "state"
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(state.iterdir())}


def test_check_mode_changes_nothing_then_a_missing_package_is_reinstalled(env):
    """pip uninstall einops: verify says drift; ansible-playbook --check (the printed command of
    a dry run) changes nothing and writes no marker; one provision reinstalls it."""
    pip(env, "uninstall", "-y", "einops")
    assert ("package-missing", "einops") in drift_of(latest(env))
    assert ("effect-failed", "pip:packages") in drift_of(latest(env))

    dry = provision(ProvisionOptions(target="local", prefix=str(env["prefix"]), wheelhouse=WHEELS, smoke=False,
                                     dry_run=True))
    before = state_snapshot(env["prefix"])
    venv_bin = str(Path(sys.executable).parent)
    p = subprocess.run(["sh", "-c", dry.command + " --check"], capture_output=True, text=True,
                       env={**os.environ, "PATH": venv_bin + os.pathsep + os.environ["PATH"]})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Envbuild state" in p.stdout and "pip:packages" in p.stdout  # it did look, and would run it
    assert state_snapshot(env["prefix"]) == before  # no marker, no manifest written or touched
    assert not list(env["site"].glob("einops-*.dist-info"))  # nothing installed

    out, res, events = again(env)
    repaired(env, "einops uninstalled", out, res, ran=from_(out, "pip:packages"),
             broken=["pip:packages"], repair=[])
    assert res["skipped"] == earlier(out, "pip:packages")
    rerun = [e for e in events if e["kind"] == "rerun"]
    assert [e["step"] for e in rerun] == ["pip:packages"] and "einops not installed" in rerun[0]["msg"]


def test_deleted_torch_files_are_reinstalled(env):
    """pip says "already satisfied" when files are gone: the step runs as a repair."""
    lib = env["site"] / "torch" / "lib" / "libtorch_cpu.so"
    torchrun = env["prefix"] / "bin" / "torchrun"
    lib.unlink()
    torchrun.unlink()
    drift = drift_of(latest(env))
    assert drift == [("effect-failed", "pip:torch")], drift
    out, res, events = again(env)
    repaired(env, "torch files deleted", out, res, ran=from_(out, "pip:torch"), broken=["pip:torch"],
             repair=["pip:torch"])
    assert lib.stat().st_size > 10_000_000 and torchrun.is_file()
    msg = next(e["msg"] for e in events if e["kind"] == "rerun")
    assert "libtorch_cpu.so (missing)" in msg and "bin/torchrun (missing)" in msg and "reinstall" in msg
    plan = json.loads((out.run_dir / "nodes" / "local" / "plan.json").read_text())
    installer = next(s for s in plan["steps"] if s["id"] == "pip:torch")["params"].get("installer", "pip")
    # the installer's own repair: pip --force-reinstall, uv --reinstall --no-cache (from the
    # wheel itself); log.txt cuts lines at ~300 chars, the step's own log holds the whole command
    command = (env["prefix"] / ".envbuild" / "logs" / "pip-torch.log").read_text().splitlines()[0]
    assert (" --reinstall --no-cache" if installer == "uv" else "--force-reinstall") in command, (installer, command)


def test_another_version_of_a_locked_package_is_replaced(env):
    [locked] = [p.name for p in env["site"].glob("tqdm-*.dist-info")]
    pip(env, "install", "-q", "--no-deps", "tqdm==4.67.1")
    assert ("package-version", "tqdm") in drift_of(latest(env))
    out, res, _ = again(env)
    repaired(env, "tqdm another version", out, res, ran=from_(out, "pip:packages"),
             broken=["pip:packages"], repair=[])
    assert [p.name for p in env["site"].glob("tqdm-*.dist-info")] == [locked]


def test_edited_env_file_is_rewritten(env):
    env_file = env["prefix"] / ".envbuild" / "env.sh"
    planned = env_file.read_text()
    env_file.write_text(planned + "export OMP_NUM_THREADS=64\n")
    assert drift_of(latest(env)) == [("effect-failed", "env-file")]
    out, res, _ = again(env)
    repaired(env, "env file edited", out, res, ran=from_(out, "env-file"), broken=["env-file"], repair=[])
    assert env_file.read_text() == planned


def test_half_installed_torch_is_not_accepted(env):
    """A crash in the middle of the torch install: part of torch's files gone and no marker for
    pip:torch. The resume installs torch again (a repair: its metadata is there)."""
    for sub in ("nn", "optim"):
        subprocess.run(["rm", "-rf", str(env["site"] / "torch" / sub)], check=True)
    (env["prefix"] / ".envbuild" / "state" / "pip:torch.done").unlink()
    assert ("effect-failed", "pip:torch") in drift_of(latest(env))
    out, res, _ = again(env)
    # the marker is gone, so pip:torch is not counted as "effect failed" but it runs as a repair
    repaired(env, "half-installed torch", out, res, ran=from_(out, "pip:torch"), broken=[], repair=["pip:torch"])
    assert res["rerun_reasons"]["pip:torch"].startswith("no marker")
    assert (env["site"] / "torch" / "nn" / "modules" / "linear.py").is_file()


def _environment_case(env, case: str, why: str) -> None:
    """The environment step's effect no longer holds (``why`` in its detail): verify says so, and
    one provision makes the venv again over its folder (the packages stay) and runs what follows."""
    drift = drift_of(latest(env))  # with it, what the interpreter sees: a wrapper's packages are not ours
    assert ("effect-failed", "environment") in drift, (case, drift)
    out, res, _ = again(env)
    assert why in res["effect_failed"]["environment"], res["effect_failed"]
    # every step runs again (the uv binary is pushed in its own task, so it is listed out of order)
    assert sorted(res["changed"]) == sorted(from_(out, "environment")), res["changed"]
    # a wrapper's or the base interpreter's packages are not the prefix's: the install steps'
    # effects fail with it (and hold again after the venv is made again)
    assert "environment" in res["effect_failed"], res["effect_failed"]
    repaired(env, case, out, res, ran=res["changed"], broken=list(res["effect_failed"]), repair=[])
    probe = subprocess.run([env["python"], "-c", "import sys, torch; print(sys.prefix)"],
                           capture_output=True, text=True, check=True)
    assert Path(probe.stdout.strip()) == env["prefix"]


def test_an_interpreter_that_is_not_the_prefixs_own_is_replaced(env, tmp_path):
    """bin/python a wrapper around another environment's interpreter: installs would land there,
    outside the prefix. The effect compares sys.prefix; the venv is made again."""
    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    py = env["prefix"] / "bin" / "python"
    py.unlink()
    py.write_text(f'#!/bin/sh\nexec {other}/bin/python "$@"\n')
    py.chmod(0o755)
    _environment_case(env, "interpreter replaced", "not the environment's own interpreter")
    assert py.is_symlink()


def test_a_venv_without_pyvenv_cfg_is_made_again(env):
    """Without pyvenv.cfg bin/python is the base interpreter itself (sys.prefix outside the prefix)."""
    cfg = env["prefix"] / "pyvenv.cfg"
    cfg.unlink()
    _environment_case(env, "pyvenv.cfg removed", "pyvenv.cfg is missing")
    assert cfg.is_file()


def test_system_site_packages_switched_on_is_switched_off(env):
    cfg = env["prefix"] / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace("include-system-site-packages = false",
                                           "include-system-site-packages = true"))
    _environment_case(env, "system site packages switched on", "include-system-site-packages = true")
    assert "include-system-site-packages = false" in cfg.read_text()


def test_a_foreign_pth_file_is_removed(env):
    """A .pth no package owns runs its import lines at every start of the interpreter."""
    evil = env["site"] / "zz-evil.pth"
    evil.write_text("import os; os.environ.setdefault('ENVBUILD_PTH_RAN', '1')\n")
    _environment_case(env, "foreign .pth file", "zz-evil.pth")
    assert not evil.exists()
    assert (env["site"] / "distutils-precedence.pth").exists() == any(env["site"].glob("setuptools-*.dist-info"))


def test_a_metadata_version_edit_is_reinstalled(env):
    """METADATA edited to another version: uv reads the folder's name and says "satisfied", so the
    step runs as a repair (reinstall)."""
    [info] = env["site"].glob("tqdm-*.dist-info")
    meta = info / "METADATA"
    text = meta.read_text()
    locked = next(line for line in text.splitlines() if line.startswith("Version: "))
    meta.write_text(text.replace(locked, "Version: 0.0.1", 1))
    assert ("package-version", "tqdm") in drift_of(latest(env))
    out, res, _ = again(env)
    assert "METADATA was changed" in res["effect_failed"]["pip:packages"], res["effect_failed"]
    repaired(env, "METADATA version edited", out, res, ran=from_(out, "pip:packages"),
             broken=["pip:packages"], repair=["pip:packages"])
    assert locked in meta.read_text().splitlines()


def test_noop_starts_no_ansible_and_from_step_and_force(env, capsys):
    t = time.time()
    out, res, events = again(env)
    took = time.time() - t
    assert out.exit_code == 5 and res["skipped"] == ids(out) and res["changed"] == []
    run = json.loads((out.run_dir / "run.json").read_text())
    assert run["ansible"].startswith("not started") and run["verdict"] == "NOT JUDGED"  # no smoke ever ran
    assert (out.run_dir / "nodes" / "local" / "observed.json").is_file()
    assert not (out.run_dir / "ansible" / "artifacts").exists()
    assert all(e["kind"] == "skipped" for e in events) and took < 10, took
    # where its wall time went, phase by phase (run 23's no-op took 6 s on a GPU node: which part?)
    assert list(run["phase_s"]) == ["bundle", "facts", "preflight", "lock", "plan", "render", "prefix-lock",
                                    "probe", "finish"], run["phase_s"]
    # each phase is rounded to the millisecond (Phases.seconds), so their sum may exceed the
    # unrounded whole by half a millisecond a phase (a run of 0.3949 s summed to 0.395)
    assert all(v >= 0 for v in run["phase_s"].values())
    assert sum(run["phase_s"].values()) <= took + 0.0005 * len(run["phase_s"]), (run["phase_s"], took)

    # The same no-op as a command: it reads the lock and never loads what makes one (the
    # resolvers, the package-index client): each import is start-up time of every provision.
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "envbuild", "provision", "--target", "local",
                        "--prefix", str(env["prefix"]), "--wheelhouse", WHEELS, "--no-smoke", "--json"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "ENVBUILD_HOME": str(env["root"] / "home")})
    assert p.returncode == 5, p.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "envbuild.provision.run" in imported and "envbuild.lock.check" in imported
    # nor the image planner and its renderers: only a container backend's plan needs them
    assert not imported & {"envbuild.lock.make", "envbuild.lock.uvresolve", "requests",
                           "envbuild.plan.container", "envbuild.render.image"}, sorted(imported)

    out, res, _ = again(env, from_step="env-file")
    assert out.exit_code == 5 and res["changed"] == from_(out, "env-file"), res
    assert res["skipped"] == earlier(out, "env-file")

    from envbuild.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVBUILD_HOME", str(env["root"] / "home"))
        code = main(["provision", "--target", "local", "--prefix", str(env["prefix"]), "--wheelhouse", WHEELS,
                     "--no-smoke", "--dry-run", "--from-step", "pip:nope"])
    err = capsys.readouterr().err
    assert code == 2 and "pip:nope" in err and "pip:torch, pip:packages" in err

    out, res, _ = again(env, force=True)
    assert out.exit_code == 5 and sorted(res["changed"]) == sorted(ids(out)) and res["skipped"] == [], res
    phase_s = json.loads((out.run_dir / "run.json").read_text())["phase_s"]
    assert "ansible" in phase_s and phase_s["ansible"] == max(phase_s.values()), phase_s


# --- git trees, through the real playbook on a tiny local repository ---------------------------


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def tree(module_tmp):
    """A venv with a git source (pinned at the first of two commits), a patch, a .pth install
    and an env file, provisioned once through the playbook; plus a run folder for verify."""
    root = module_tmp("gittree")
    repo = root / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "mod_x.py").write_text("VALUE = 'old'\n")
    (repo / "other.py").write_text("X = 1\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "one", cwd=repo)
    sha = git("rev-parse", "HEAD", cwd=repo)
    (repo / "other.py").write_text("X = 2\n")
    git("commit", "-qam", "two", cwd=repo)
    prefix = str(root / "env")
    dest = f"{prefix}/src/x"
    steps = [
        Step(id="environment", title="venv", params=P.EnvironmentParams(  # no step installs with pip
            backend="venv", prefix=prefix, python="3.11", interpreter=sys.executable, with_pip=False)),
        Step(id="git:x", title="x", params=P.GitSourceParams(
            name="x", url="https://example.invalid/x", fetch_url=str(repo), ref="main", sha=sha, dest=dest)),
        Step(id="patch:x-value", title="p", params=P.PatchParams(
            id="x-value", component="x", dest=dest, patch_kind="replace", file="mod_x.py",
            old="'old'", new="'new'", why="test")),
        Step(id="install:x", title="x", params=P.InstallSourceParams(name="x", dest=dest, mode="pth")),
        Step(id="env-file", title="env", params=P.EnvFileParams(path=f"{prefix}/.envbuild/env.sh", vars={"A": "1"})),
    ]
    plan = Plan(recipe="t", target="local", host="local", prefix=prefix, backend="venv", steps=steps)
    rc, host, _ = run_local_plan(root / "first", plan)
    assert rc == 0, host.message
    run = root / "home" / "runs" / "20261122-000000-t-local"
    (run / "nodes" / "local").mkdir(parents=True)
    (run / "nodes" / "local" / "plan.json").write_text(plan.to_json())
    (run / "run.json").write_text(json.dumps({"schema": "envbuild.run/1", "run_id": run.name, "recipe": "t",
                                              "target": "local", "status": "ok", "hosts": ["local"]}))
    return {"root": root, "plan": plan, "dest": Path(dest), "sha": sha, "run": run, "n": 0}


def reprovision(tree, case: str, ran: list[str]) -> None:
    tree["n"] += 1
    rc, host, _ = run_local_plan(tree["root"] / f"again{tree['n']}", tree["plan"])
    assert rc == 0, host.message
    assert sorted(host.changed + host.ok) == sorted(ran), (host.changed, host.ok, host.skipped)
    assert ran[0] in host.changed  # the first step that ran again changed the node
    assert host.skipped == [s.id for s in tree["plan"].steps if s.id not in ran]
    after = drift_of(tree["run"])
    CASES[case] = not after
    assert after == [], after
    assert git("rev-parse", "HEAD", cwd=tree["dest"]) == tree["sha"]
    assert (tree["dest"] / "mod_x.py").read_text() == "VALUE = 'new'\n"
    assert git("status", "--porcelain", "--untracked-files=no", cwd=tree["dest"]) == "M mod_x.py"


def test_git_tree_clean_then_moved_to_another_commit(tree):
    assert drift_of(tree["run"]) == []
    git("-c", "advice.detachedHead=false", "checkout", "-q", "--force", "main", cwd=tree["dest"])
    assert ("effect-failed", "git:x") in drift_of(tree["run"])
    reprovision(tree, "git tree at another commit", ["git:x", "patch:x-value", "install:x", "env-file"])


def test_git_tree_with_local_changes(tree):
    (tree["dest"] / "other.py").write_text("X = 'local edit'\n")
    assert drift_of(tree["run"]) == [("effect-failed", "git:x")]
    reprovision(tree, "git tree dirty", ["git:x", "patch:x-value", "install:x", "env-file"])


def test_patched_file_edited_beyond_the_patch(tree):
    (tree["dest"] / "mod_x.py").write_text("VALUE = 'new'\nEXTRA = 1\n")
    drift = drift_of(tree["run"])
    assert ("effect-failed", "git:x") in drift, drift
    reprovision(tree, "patched file edited", ["git:x", "patch:x-value", "install:x", "env-file"])


def test_reverted_patch(tree):
    git("checkout", "-q", "--", "mod_x.py", cwd=tree["dest"])
    assert ("effect-failed", "patch:x-value") in drift_of(tree["run"])
    reprovision(tree, "patch reverted", ["patch:x-value", "install:x", "env-file"])


def test_every_drift_case_was_repaired_by_one_provision():
    tried, fixed = len(CASES), sum(CASES.values())
    print(f"\ndrift cases tried: {tried}, repaired by one provision: {fixed}: {sorted(CASES)}")
    assert tried == 14 and fixed == tried, CASES
