"""The action plugins of ``envbuild_actions`` and ``envbuild_state`` (the collection's
plugins/action/, plugins/plugin_utils/node_task.py) against the modules themselves, through real
ansible-runner runs on this machine (local connection).

With pipelining on (envbuild's setting) the plugin runs the module's task on the node in one
command (no AnsiballZ payload: the result carries no ``invocation``, which AnsibleModule adds).
The same play gives the same results both ways:
what changed, the log, the recorded step, the steps pending, a failed command's message, exit
status and output, check mode's ``would_run``, parameters refused by the module's spec. The
baseline is a copy of the collection without the plugins (Ansible's ``normal`` action and
AnsibleModule); with pipelining off the plugin runs the module itself, with the same results. The
node's Python is Ansible's pick: its discovery runs and is handed back as a fact; an interpreter
that prints no result fails the task with what it printed. The command carries every file the
task imports, stays within what one argument of ``sh -c`` may hold, and runs under the node
package's floor Python.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.nodefloor import FLOOR, floor_python

from envbuild.actions.nodestate import ARG_LIMIT
from envbuild.shipped import NODE, PLAYBOOKS

PLUGIN_UTILS = PLAYBOOKS / "ansible_collections/envbuild/node/plugins/plugin_utils/node_task.py"

pytestmark = pytest.mark.integration

PLAY = """\
---
- name: Both tasks
  hosts: all
  gather_facts: false
  tasks:
    - name: Write and run
      envbuild.node.envbuild_actions:
        actions:
          - {op: mkdir, path: "%(dir)s/made"}
          - {op: write, path: "%(dir)s/made/hello.txt", content: "hello\\n", perm: "0640"}
          - {op: run, argv: [sh, -c, "echo ran in $PWD"], cwd: "%(dir)s/made"}
        record: {prefix: "%(dir)s/env", id: first, digest: abc123, effect: null}
    - name: Pending
      envbuild.node.envbuild_state:
        prefix: "%(dir)s/env"
        steps: [first, second]
        digests: [abc123, def456]
    - name: Fails
      envbuild.node.envbuild_actions:
        actions:
          - {op: run, argv: [sh, -c, "echo out; echo err >&2; exit 7"]}
      ignore_errors: true
    - name: Refused
      envbuild.node.envbuild_state:
        prefix: "%(dir)s/env"
        no_such_option: 1
      ignore_errors: true
"""


@pytest.fixture(scope="module")
def modules_only(tmp_path_factory) -> Path:
    """A copy of the collection without its action plugins: Ansible's ``normal`` action runs the
    modules themselves (AnsibleModule in an AnsiballZ payload), the baseline."""
    root = tmp_path_factory.mktemp("modules-only")
    shutil.copytree(PLAYBOOKS / "ansible_collections", root / "ansible_collections",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(root / "ansible_collections/envbuild/node/plugins/action")
    return root


def run_play(tmp_path: Path, name: str, *, pipelining: bool = True, check: bool = False,
             interpreter: str | None = sys.executable, play: str = PLAY,
             collections: Path = PLAYBOOKS, vault_password_file: Path | None = None,
             cwd: Path | None = None) -> dict[str, dict]:
    """Run ``play`` on localhost; {task name: its result} (the last event of each task)."""
    import ansible_runner

    work = tmp_path / name
    (work / "project").mkdir(parents=True, exist_ok=True)
    (work / "project" / "site.yml").write_text(play % {"dir": work / "node"})
    (work / "node").mkdir()
    (work / "runner").mkdir()
    results: dict[str, dict] = {}

    def seen(ev):
        data = ev.get("event_data") or {}
        if ev.get("event") in ("runner_on_ok", "runner_on_failed"):
            results[data["task"]] = dict(data.get("res") or {}, _event=ev["event"])
        return True

    envvars = {"ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_HOME": str(work / "ansible-home"),
               "ANSIBLE_PIPELINING": str(pipelining), "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
               # discovery looks on PATH: this venv's and the system's Pythons, no version manager's shims
               "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"}
    host = "localhost ansible_connection=local"
    if interpreter:
        host += f" ansible_python_interpreter={interpreter}"
    cmdline = " ".join((["--check"] if check else [])
                       + ([f"--vault-password-file {vault_password_file}"] if vault_password_file else []))
    r = ansible_runner.run(private_data_dir=str(work / "runner"), playbook=str(work / "project" / "site.yml"),
                           inventory=host, quiet=True, envvars=envvars, event_handler=seen,
                           cmdline=cmdline or None, project_dir=str(cwd) if cwd else None)
    results["_status"] = {"status": r.status, "stdout": r.stdout.read()[-3000:]}
    return results


def comparable(res: dict, work: Path) -> dict:
    """A result less what differs by run folder or by path: its own folder named ``WORK``."""
    drop = {"invocation", "_event", "stdout_lines", "stderr_lines", "ansible_facts"}
    text = {k: v for k, v in res.items() if k not in drop}
    return {k: v.replace(str(work), "WORK") if isinstance(v, str) else v for k, v in text.items()}


def test_the_plugin_runs_the_modules_task_and_gives_the_modules_results(tmp_path, modules_only):
    plugin = run_play(tmp_path, "plugin")
    module = run_play(tmp_path, "module", collections=modules_only)
    fallback = run_play(tmp_path, "fallback", pipelining=False)  # the plugin runs the module itself
    for res in (plugin, module, fallback):
        assert res["_status"]["status"] == "successful", res["_status"]
    for task in ("Write and run", "Pending", "Fails"):
        assert "invocation" not in plugin[task], task  # no AnsiballZ: the plugin's command ran it
        assert "invocation" in module[task] and "invocation" in fallback[task], task  # AnsibleModule's own runs
        want = comparable(module[task], tmp_path / "module")
        assert comparable(plugin[task], tmp_path / "plugin") == want, task
        assert comparable(fallback[task], tmp_path / "fallback") == want, task
    wrote = plugin["Write and run"]
    assert wrote["changed"] is True and wrote["recorded"] == "first" and "ran in " in wrote["stdout"]
    assert (tmp_path / "plugin/node/made/hello.txt").read_text() == "hello\n"
    assert oct((tmp_path / "plugin/node/made/hello.txt").stat().st_mode & 0o777) == "0o640"
    assert plugin["Pending"]["pending"] == ["second"] and plugin["Pending"]["changed"] is False
    failed = plugin["Fails"]
    assert failed["_event"] == "runner_on_failed" and failed["rc"] == 7
    assert "err" in failed["stderr"] and "out" in failed["stdout"] and failed["cmd"][0] == "sh"
    for res in (plugin, module):  # the module's spec refuses it, on the controller or in AnsibleModule
        assert res["Refused"]["_event"] == "runner_on_failed" and "no_such_option" in res["Refused"]["msg"]


def test_check_mode_runs_nothing_either_way(tmp_path, modules_only):
    plugin = run_play(tmp_path, "plugin", check=True)
    module = run_play(tmp_path, "module", check=True, collections=modules_only)
    for res, name in ((plugin, "plugin"), (module, "module")):
        assert res["Write and run"]["would_run"] == ["mkdir", "write", "run"], name
        assert not (tmp_path / name / "node" / "made").exists() and not (tmp_path / name / "node" / "env").exists()
    assert comparable(plugin["Write and run"], tmp_path / "plugin") == comparable(module["Write and run"], tmp_path / "module")


def test_the_interpreter_is_ansibles_discovery_handed_back_as_a_fact(tmp_path):
    """No ansible_python_interpreter: Ansible discovers one for the module; the plugin's
    command runs under it and hands the discovery back, as a module's run does."""
    res = run_play(tmp_path, "discover", interpreter=None)
    assert res["_status"]["status"] == "successful", res["_status"]
    first = res["Write and run"]
    assert "invocation" not in first and first["changed"] is True
    discovered = first["ansible_facts"]["discovered_interpreter_python"]
    assert Path(discovered).name.startswith("python") and Path(discovered).is_file()


def test_an_interpreter_that_prints_no_result_fails_the_task_with_its_output(tmp_path):
    fake = tmp_path / "fakepy"
    fake.write_text("#!/bin/sh\necho not python\necho broken >&2\nexit 3\n")
    fake.chmod(0o755)
    res = run_play(tmp_path, "fake", interpreter=str(fake))
    first = res["Write and run"]
    assert first["_event"] == "runner_on_failed"
    assert first["msg"] == "envbuild's node task printed no result (exit 3): broken"
    assert "not python" in first["module_stdout"] and "broken" in first["module_stderr"]
    assert not (tmp_path / "fake" / "node" / "made").exists()


def _relative_imports(name: str) -> set[str]:
    tree = ast.parse((NODE / f"{name}.py").read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return out


def test_the_command_carries_every_file_the_task_imports_and_fits_in_one_argument():
    files = next(ast.literal_eval(n.value) for n in ast.walk(ast.parse(PLUGIN_UTILS.read_text()))
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "FILES")
    want, todo = {"__init__"}, ["task"]
    while todo:
        name = todo.pop()
        if name not in want:
            want.add(name)
            todo += sorted(_relative_imports(name))
    assert set(files) == want
    size = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from ansible_collections."
                           "envbuild.node.plugins.plugin_utils.node_task import program; print(len(program()))",
                           str(PLAYBOOKS)], capture_output=True, text=True, check=True).stdout
    assert int(size) < ARG_LIMIT  # the command is one argument of sh -c: Linux refuses one over 128 KiB


def test_the_command_runs_under_the_node_packages_floor(tmp_path):
    python = floor_python()
    if python is None:
        pytest.skip(f"no Python {FLOOR} (the node package's floor) on this machine: pyenv install {FLOOR}")
    res = run_play(tmp_path, "floor", interpreter=python)
    assert res["_status"]["status"] == "successful", res["_status"]
    assert "invocation" not in res["Write and run"] and res["Write and run"]["recorded"] == "first"
    assert res["Pending"]["pending"] == ["second"]


ASYNC_AND_VAULT = """\
---
- name: Async and vault
  hosts: all
  gather_facts: false
  tasks:
    - name: In the background
      envbuild.node.envbuild_actions:
        actions:
          - {op: write, path: "%(dir)s/async.txt", content: "later\\n", perm: "0644"}
      async: 60
      poll: 2
    - name: A vaulted value
      envbuild.node.envbuild_actions:
        actions:
          - op: write
            path: "%(dir)s/vaulted.txt"
            perm: "0600"
            content: %(vaulted)s
"""


def test_async_runs_the_module_and_a_vaulted_value_arrives_as_its_text(tmp_path):
    """async: the plugin hands the task to the module as Ansible's ``normal`` action would; a
    vaulted parameter reaches the node decrypted, as Ansible encodes a module's parameters."""
    pw = tmp_path / "vault-pw"
    pw.write_text("not-a-secret\n")
    enc = subprocess.run([str(Path(sys.executable).parent / "ansible-vault"), "encrypt_string",
                          "--vault-password-file", str(pw), "vaulted text"],
                         capture_output=True, text=True, check=True).stdout
    vaulted = enc.strip().replace("\n", "\n              ")
    play = ASYNC_AND_VAULT.replace("%(vaulted)s", vaulted)
    res = run_play(tmp_path, "av", play=play, vault_password_file=pw)
    assert res["_status"]["status"] == "successful", res["_status"]
    assert (tmp_path / "av/node/async.txt").read_text() == "later\n"
    assert "invocation" not in res["A vaulted value"]
    assert (tmp_path / "av/node/vaulted.txt").read_text() == "vaulted text"


def test_a_module_named_like_the_standard_librarys_in_the_working_folder_is_not_imported(tmp_path):
    """``python -c`` puts the working folder first on sys.path; boot.py takes it off first."""
    work = tmp_path / "shadow" / "project"
    work.mkdir(parents=True)
    (work / "json.py").write_text("raise SystemExit('the working folder json.py was imported')\n")
    res = run_play(tmp_path, "shadow", cwd=work)
    assert res["_status"]["status"] == "successful", res["_status"]
    assert "invocation" not in res["Write and run"] and res["Write and run"]["changed"] is True
