"""The Ansible collection envbuild.node (playbooks/) as its users meet it.

- ``ansible-lint --profile production`` and ``yamllint`` pass on the playbook and the
  collection (the linters come with the ``test`` extra; a test skips, saying so, only where
  the binary is absent);
- ``ansible-doc`` renders the six modules (DOCUMENTATION, EXAMPLES, RETURN) and the role's
  argument specs; ``ansible-galaxy collection build`` carries the shared code as files;
- Molecule's idempotence check: the role converges twice on a real sshd node through
  envbuild's executor, and Ansible's own stats count no change the second time; a forced rerun
  of steps that are done changes nothing either (the modules report ``changed`` truthfully);
- a playbook of the user's own calls the modules by FQCN.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from envbuild.connect.nodes import connection_vars, parse_hosts
from envbuild.execute import ansible as ex
from envbuild.execute.events import EventSink, StepTracker
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.render.ansible import render
from envbuild.shipped import NODE, PLAYBOOKS

PROJECT = PLAYBOOKS
COLLECTION = PROJECT / "ansible_collections" / "envbuild" / "node"
BIN = Path(sys.executable).parent
NODE_PATH = "/usr/local/bin:/usr/bin:/bin"


def _tool(name: str) -> str:
    """The linter of this venv (the ``test`` extra installs it), else skip saying so."""
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' installs it; CI does)")
    return str(path)


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """No user configuration: the project's ansible.cfg and .yamllint only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "YAMLLINT_"))}
    return {**env, "HOME": str(tmp_path / "home"), "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
            "PATH": f"{BIN}:{env.get('PATH', '')}", "NO_COLOR": "1"}


@pytest.mark.lint
def test_ansible_lint_production_profile_passes(tmp_path):
    lint = _tool("ansible-lint")
    p = subprocess.run([lint, "--profile", "production", "--offline", "--nocolor"], cwd=PROJECT,
                       capture_output=True, text=True, env=_clean_env(tmp_path), timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "Profile 'production' was required, and it passed" in out, out[-2000:]
    assert not list(PROJECT.rglob(".ansible")), "ansible-lint left files in the package"


@pytest.mark.lint
def test_yamllint_passes(tmp_path):
    yl = _tool("yamllint")
    p = subprocess.run([yl, "--strict", "-c", str(PROJECT / ".yamllint"), "."], cwd=PROJECT,
                       capture_output=True, text=True, env=_clean_env(tmp_path), timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    files = [f for f in PROJECT.rglob("*.yml")]
    assert len(files) >= 9  # it did read the playbook, the role and the collection metadata


@pytest.mark.parametrize("module", ["envbuild_actions", "envbuild_state", "envbuild_stage", "envbuild_tree",
                                    "envbuild_put", "envbuild_fetch"])
def test_module_documentation_renders(tmp_path, module):
    p = subprocess.run([str(BIN / "ansible-doc"), "--json", f"envbuild.node.{module}"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env={**_clean_env(tmp_path), "ANSIBLE_COLLECTIONS_PATH": str(PROJECT)})
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)[f"envbuild.node.{module}"]
    assert doc["doc"]["short_description"] and doc["doc"]["options"]
    assert doc["examples"].strip().startswith("- name:")
    assert doc["return"]
    spec = {"envbuild_actions": {"actions", "node_path", "repair", "record"},
            "envbuild_state": {"prefix", "steps", "digests", "effects", "from_step", "record", "digest",
                               "effect"},
            "envbuild_stage": {"sha256", "holder", "holder_in_play", "why_controller", "kept", "waited", "served",
                               "sent", "held"},
            "envbuild_tree": {"mode", "stash", "root", "outputs"},
            "envbuild_put": {"src", "dest", "mode"},
            "envbuild_fetch": {"src", "dest", "sha256"}}[module]
    assert set(doc["doc"]["options"]) == spec  # every argument of the module is documented


def test_role_argument_specs_document_every_input(tmp_path):
    p = subprocess.run([str(BIN / "ansible-doc"), "--json", "-t", "role", "envbuild.node.provision"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**_clean_env(tmp_path), "ANSIBLE_COLLECTIONS_PATH": str(PROJECT)})
    assert p.returncode == 0, p.stderr[-2000:]
    options = json.loads(p.stdout)["envbuild.node.provision"]["entry_points"]["main"]["options"]
    role = COLLECTION / "roles/provision"
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text())
    assert set(defaults) <= set(options)
    assert {k for k, v in options.items() if v.get("required")} == {"provision_plan_json", "provision_prefix"}
    # every variable the role reads is an input the specs document, or one the role sets itself
    # (registered, a loop or task variable, or vars/main.yml)
    own = set(yaml.safe_load((role / "vars/main.yml").read_text()))

    def walk(node):
        if isinstance(node, list):
            for x in node:
                walk(x)
        elif isinstance(node, dict):
            if isinstance(node.get("register"), str):
                own.add(node["register"])
            own.update((node.get("vars") or {}) if isinstance(node.get("vars"), dict) else {})
            if isinstance(node.get("loop_control"), dict) and node["loop_control"].get("loop_var"):
                own.add(node["loop_control"]["loop_var"])
            for key in ("block", "rescue", "always"):
                walk(node.get(key))

    texts = []
    for f in sorted((role / "tasks").glob("*.yml")):
        walk(yaml.safe_load(f.read_text()))
        texts.append(f.read_text())
    texts.append((role / "vars/main.yml").read_text())
    read = {v for v in re.findall(r"\bprovision_[a-z_]+\b", "".join(texts))
            if not re.search(rf"\b{v}\.yml\b", "".join(texts))}  # not a file name
    assert read - own <= set(options), read - own - set(options)
    assert {"provision_plan_json", "provision_prefix", "provision_node_path"} <= read - own
    # envbuild's renderer writes exactly these inputs
    r = render({"h": Plan(recipe="t", target="local", host="h", prefix="/p", backend="venv", steps=[])},
               {"h": {}}, {"h": NODE_PATH}, run_dir="/run", cache_dir="/cache")
    written = {k for k in r.inventory["all"]["hosts"]["h"] if k.startswith("provision_")} | set(r.extravars)
    assert written <= set(options) and written >= {"provision_plan_json", "provision_prefix"}


def test_collection_build_carries_the_shared_code_as_files(tmp_path):
    p = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path), str(COLLECTION)],
                       capture_output=True, text=True, timeout=120, env=_clean_env(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    (built,) = tmp_path.glob("envbuild-node-*.tar.gz")
    with tarfile.open(built) as tar:
        node = sorted(NODE.glob("*.py"))  # envbuild's node package, whole
        assert {"__init__.py", "actions.py", "effects.py", "state.py", "textpatch.py"} <= {p.name for p in node}
        for src in node:
            member = tar.getmember(f"plugins/module_utils/envbuild_node/{src.name}")
            assert member.isfile()  # the link's target, not a link out of the collection
            assert tar.extractfile(member).read() == src.read_bytes()
        names = set(tar.getnames())
    assert {"roles/provision/meta/argument_specs.yml", "plugins/modules/envbuild_actions.py",
            "plugins/modules/envbuild_state.py", "plugins/modules/envbuild_stage.py", "plugins/modules/envbuild_tree.py",
            "plugins/modules/envbuild_put.py", "plugins/action/envbuild_put.py",
            "plugins/modules/envbuild_fetch.py", "plugins/action/envbuild_fetch.py",
            "meta/runtime.yml"} <= names


# --- converge twice (Molecule's idempotence check) on a real sshd node ---------------------


def _git(*args, cwd):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def converged(ssh_nodes, module_tmp):
    """A plan of six steps (venv, git checkout, patch, .pth install, env file, import check) for
    the first sshd node, and a function that converges it and returns (rc, tracker)."""
    base = module_tmp("converge")
    repo = base / "repo"
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    (repo / "mod_x.py").write_text("VALUE = 'old'\n")
    _git("add", ".", cwd=repo)
    _git("commit", "-qm", "one", cwd=repo)
    sha = _git("rev-parse", "HEAD", cwd=repo)
    prefix = str(base / "env")
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
        Step(id="env-file", title="env", params=P.EnvFileParams(
            path=f"{prefix}/.envbuild/env.sh", vars={"NCCL_IB_PCI_RELAXED_ORDERING": "1"})),
        Step(id="import-check", title="imp", params=P.ImportCheckParams(modules=["mod_x"])),
    ]
    first = ssh_nodes.nodes[0]
    (node,) = parse_hosts(first.address, identity_file=first.key_path, known_hosts=[first.known_hosts])
    node = replace(node, python="/usr/bin/python3")  # as the testbed's inventory says (envbuild: from facts)
    plan = Plan(recipe="t", target="local", host=node.name, prefix=prefix, backend="venv", steps=steps)
    runs = iter(range(100))

    def converge(from_step: str | None = None):
        rd = base / f"run{next(runs)}"
        conn = {**connection_vars(node), "ansible_remote_tmp": str(rd / "remote")}
        r = render({node.name: plan}, {node.name: conn}, {node.name: NODE_PATH}, run_dir=str(rd),
                   cache_dir=str(base / "cache"))
        if from_step:
            r.inventory["all"]["hosts"][node.name]["provision_from_step"] = from_step
        job = ex.prepare(rd / "ansible", r, forks=1, insecure=False)
        tracker = StepTracker()
        sink = EventSink(rd / "events.jsonl")
        try:
            rc = ex.run(job, sink, tracker)
        finally:
            sink.close()
        return rc, tracker

    return {"converge": converge, "host": node.name, "steps": steps, "prefix": prefix}


def _counts(tracker: StepTracker, host: str) -> dict[str, int]:
    """Ansible's own per-host counts from the runner's stats event (playbook_on_stats)."""
    assert tracker.completed, "the playbook did not reach its end"
    return {k: int((tracker.stats.get(k) or {}).get(host, 0)) for k in ("ok", "changed", "failures", "dark")}


@pytest.mark.integration
def test_role_converges_twice_and_the_second_run_changes_nothing(converged):
    host, ids = converged["host"], [s.id for s in converged["steps"]]
    rc, t1 = converged["converge"]()
    first = _counts(t1, host)
    assert rc == 0, (t1.hosts[host].message, t1.hosts[host].tail())
    assert first["failures"] == 0 and first["dark"] == 0
    assert first["changed"] > 0 and t1.hosts[host].changed  # the first converge did the work
    out = subprocess.run([f"{converged['prefix']}/bin/python", "-c", "import mod_x; print(mod_x.VALUE)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "new"

    rc, t2 = converged["converge"]()
    second = _counts(t2, host)
    assert rc == 0 and second["failures"] == 0 and second["dark"] == 0
    assert second["changed"] == 0, second  # idempotent: Ansible itself counts no change
    assert second["ok"] > 0 and t2.hosts[host].skipped == ids


@pytest.mark.integration
def test_forced_rerun_of_done_steps_reports_no_change(converged):
    """Steps that are done, run again (--from-step patch:x-value): a patch already applied, an
    env file already written, the import check (a check: ``changes=False``) and each marker
    already holding its digest report no change, so Ansible counts none; the .pth step's
    command (``python -c`` writing the file) reports a change, as a command does whenever it
    runs (Ansible's own command module does the same). From git:x the checkout would undo the
    patch, which the patch step then redoes: both changes are real and reported."""
    host = converged["host"]
    converged["converge"]()  # converged (also when this test runs alone)
    rc, t = converged["converge"]("patch:x-value")
    counts = _counts(t, host)
    assert rc == 0, (t.hosts[host].message, t.hosts[host].tail())
    assert t.hosts[host].ok == ["patch:x-value", "env-file", "import-check"]
    assert t.hosts[host].changed == ["install:x"] and counts["changed"] == 1, counts

    rc, t = converged["converge"]("env-file")
    counts = _counts(t, host)
    assert rc == 0 and t.hosts[host].ok == ["env-file", "import-check"] and t.hosts[host].changed == []
    assert counts["changed"] == 0, counts


# --- a playbook of the user's own, calling the modules by FQCN -----------------------------

USER_PLAYBOOK = """\
---
- name: My own play
  hosts: all
  gather_facts: false
  tasks:
    - name: A folder
      envbuild.node.envbuild_actions:
        actions:
          - {op: mkdir, path: "%(dir)s/made"}
          - {op: write, path: "%(dir)s/made/hello.txt", content: "hello\\n", perm: "0640"}
    - name: Put a file
      envbuild.node.envbuild_put:
        src: "%(dir)s/tool.bin"
        dest: "%(dir)s/made/tool"
        mode: 0750  # unquoted: YAML's number 488, read in octal as copy reads it
    - name: Record a step as done
      envbuild.node.envbuild_state:
        prefix: "%(dir)s/env"
        record: first
        digest: abc123
    - name: Which steps are done
      envbuild.node.envbuild_state:
        prefix: "%(dir)s/env"
        steps: [first, second]
        digests: [abc123, def456]
      register: my_state
    - name: Show
      ansible.builtin.debug:
        var: my_state.pending
"""


@pytest.mark.integration
def test_user_playbook_calls_the_modules_by_fqcn(tmp_path):
    """Run twice: the first run changes the folder, the file and the marker; the second none."""
    import ansible_runner

    work = tmp_path / "mine"
    work.mkdir()
    tool = bytes(range(256)) * 64 + b"\n\n"
    (tmp_path / "tool.bin").write_bytes(tool)
    play = work / "site.yml"
    play.write_text(USER_PLAYBOOK % {"dir": tmp_path})
    results = []
    for i in range(2):
        changed: dict[str, bool] = {}
        pending: list = []

        def seen(ev, changed=changed, pending=pending):
            data = ev.get("event_data") or {}
            if ev.get("event") == "runner_on_ok":
                changed[data.get("task")] = bool((data.get("res") or {}).get("changed"))
                if data.get("task") == "Which steps are done":
                    pending.extend(data["res"]["pending"])
            return True

        (tmp_path / f"runner{i}").mkdir()
        r = ansible_runner.run(private_data_dir=str(tmp_path / f"runner{i}"), playbook=str(play),
                               inventory="localhost ansible_connection=local", quiet=True,
                               envvars={"ANSIBLE_COLLECTIONS_PATH": str(PROJECT),
                                        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
                                        "ANSIBLE_REMOTE_TMP": str(tmp_path / "remote-tmp"),
                                        "ANSIBLE_PYTHON_INTERPRETER": sys.executable},
                               event_handler=seen)
        assert r.status == "successful", r.stdout.read()[-3000:]
        results.append((changed, pending, r.stats))
    (c1, p1, s1), (c2, p2, s2) = results
    assert c1 == {"A folder": True, "Put a file": True, "Record a step as done": True, "Which steps are done": False,
                  "Show": False}
    assert set(c2.values()) == {False} and s2["changed"] == {}
    assert p1 == p2 == ["second"]
    assert (tmp_path / "made/hello.txt").read_text() == "hello\n"
    assert oct((tmp_path / "made/hello.txt").stat().st_mode & 0o777) == "0o640"
    # put, byte for byte, with its mode; the remote temporary folders removed (without
    # pipelining, as here, envbuild_actions runs as a module in that folder)
    assert (tmp_path / "made/tool").read_bytes() == tool
    assert oct((tmp_path / "made/tool").stat().st_mode & 0o777) == "0o750"
    assert list((tmp_path / "remote-tmp").iterdir()) == []


BECOME_PUT = """\
---
- name: Put as another user
  hosts: all
  gather_facts: false
  tasks:
    - name: Put a file as nobody
      become: true
      become_user: nobody
      become_method: ansible.builtin.sudo
      envbuild.node.envbuild_put:
        src: "%(src)s"
        dest: "%(dest)s"
        mode: "0750"
    - name: Capture as nobody
      become: true
      become_user: nobody
      become_method: ansible.builtin.sudo
      envbuild.node.envbuild_actions:
        actions:
          - {op: capture, name: who, argv: [id, -un], cwd: "%(out)s", dir: "%(out)s"}
      register: captured
    - name: Fetch as nobody (through slurp)
      become: true
      become_user: nobody
      become_method: ansible.builtin.sudo
      envbuild.node.envbuild_fetch:
        src: ["%(out)s/who.out", "%(out)s/who.rc"]
        dest: "%(back)s"
        sha256: "{{ captured.captured }}"
"""


@pytest.mark.integration
@pytest.mark.parametrize("pipelining", [True, False])
def test_put_and_fetch_through_become_reach_the_become_user(tmp_path, request, pipelining):
    """With become to an unprivileged user (sudo, which pipelines: no module file is sent that
    would have its folder's permissions fixed too) the file is transferred by the connection's
    user and put by the become user (Ansible's own permission fix-up of the temporary folder it takes in
    a system temp folder, as copy's): the bytes arrive, the file is that user's, the temporary
    folder is removed. Fetched back as that user, the files are read through slurp."""
    import pwd

    import ansible_runner

    if os.geteuid() != 0 or not shutil.which("sudo"):
        pytest.skip("sudo to another user without a password needs root and sudo (CI has both)")
    nobody = pwd.getpwnam("nobody")
    # a folder nobody can reach: pytest's and the suite's temporary folders are root's alone (0700)
    reach = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"))
    reach.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(reach, ignore_errors=True))
    out, system_tmp = reach / "out", reach / "system-tmp"
    for folder in (out, system_tmp):
        folder.mkdir()
        folder.chmod(0o1777)
    data = os.urandom(100_000)
    (tmp_path / "tool.bin").write_bytes(data)
    play = tmp_path / "site.yml"
    play.write_text(BECOME_PUT % {"src": tmp_path / "tool.bin", "dest": out / "tool", "out": out,
                                  "back": tmp_path / "back"})
    (tmp_path / "runner").mkdir()
    r = ansible_runner.run(private_data_dir=str(tmp_path / "runner"), playbook=str(play),
                           inventory="localhost ansible_connection=local", quiet=True,
                           envvars={"ANSIBLE_COLLECTIONS_PATH": str(PROJECT),
                                    "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
                                    # becoming another user, Ansible takes a system temp folder
                                    "ANSIBLE_SYSTEM_TMPDIRS": str(system_tmp),
                                    "ANSIBLE_PIPELINING": str(pipelining),
                                    "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3"})
    assert r.status == "successful", r.stdout.read()[-3000:]
    assert (out / "tool").read_bytes() == data and (out / "tool").stat().st_uid == nobody.pw_uid
    assert list(system_tmp.iterdir()) == []  # the transferred file's folder is gone
    # fetched back through slurp as the become user, checked against the capture's report
    assert (tmp_path / "back" / "who.out").read_text() == "nobody\n"
    assert (tmp_path / "back" / "who.rc").read_bytes() == (out / "who.rc").read_bytes() == b"0\n"


FETCH = """\
---
- name: Capture, then fetch
  hosts: all
  gather_facts: false
  tasks:
    - name: Capture
      envbuild.node.envbuild_actions:
        actions:
          - {op: capture, name: hello, argv: [sh, -c, "printf 'out\\\\n'; printf 'err' >&2"], cwd: "%(dir)s",
             dir: "%(dir)s/node"}
      register: captured
    - name: Fetch
      envbuild.node.envbuild_fetch:
        src: ["%(dir)s/node/hello.out", "%(dir)s/node/hello.err", "%(dir)s/node/hello.rc"]
        dest: "%(dir)s/back"
        sha256: "{{ captured.captured }}"
    - name: Fetch what the node did not report
      envbuild.node.envbuild_fetch:
        src: ["%(dir)s/node/hello.out"]
        dest: "%(dir)s/unreported"
        sha256: {}
      register: unreported
      ignore_errors: true
    - name: Fetch bytes that differ from the reported ones
      envbuild.node.envbuild_fetch:
        src: ["%(dir)s/node/hello.out"]
        dest: "%(dir)s/differ"
        sha256: {"%(dir)s/node/hello.out": "%(wrong)s"}
      register: differ
      ignore_errors: true
    - name: Say
      ansible.builtin.debug:
        msg: "{{ {'unreported': unreported.msg, 'differ': differ.msg} | to_json }}"
"""


@pytest.mark.integration
def test_fetch_keeps_only_files_whose_bytes_the_node_reported(tmp_path):
    """The capture's reported sha256 travel with the fetch: every file comes back byte for byte;
    a file with no reported sha256, or with other bytes, fails the task and leaves nothing."""
    import ansible_runner

    node = tmp_path / "node"
    node.mkdir()
    play = tmp_path / "site.yml"
    play.write_text(FETCH % {"dir": tmp_path, "wrong": "0" * 64})
    said: dict = {}

    def seen(ev):
        data = ev.get("event_data") or {}
        if ev.get("event") == "runner_on_ok" and data.get("task") == "Say":
            said.update(json.loads(data["res"]["msg"]))
        return True

    (tmp_path / "runner").mkdir()
    r = ansible_runner.run(private_data_dir=str(tmp_path / "runner"), playbook=str(play),
                           inventory="localhost ansible_connection=local", quiet=True, event_handler=seen,
                           envvars={"ANSIBLE_COLLECTIONS_PATH": str(PROJECT), "ANSIBLE_PIPELINING": "True",
                                    "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
                                    "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    assert r.status == "successful", r.stdout.read()[-3000:]
    back = tmp_path / "back"
    assert sorted(p.name for p in back.iterdir()) == ["hello.err", "hello.out", "hello.rc"]
    for name in ("hello.out", "hello.err", "hello.rc"):
        assert (back / name).read_bytes() == (node / name).read_bytes()
    assert (back / "hello.out").read_text() == "out\n" and (back / "hello.rc").read_text() == "0\n"
    assert said["unreported"] == f"no sha256 was reported for {node / 'hello.out'}: not fetched"
    assert said["differ"].startswith(f"{node / 'hello.out'} came back with sha256 ")
    assert not (tmp_path / "unreported").exists() or not list((tmp_path / "unreported").iterdir())
    assert list((tmp_path / "differ").iterdir()) == []  # not kept, no part left


# --- ENVBUILD_PLAYBOOKS: another copy of the project ---------------------------------------

OVERRIDE_RUN = """\
import json, sys
from pathlib import Path
from envbuild.execute import ansible as ex
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step
from envbuild.testbed.local_plan import run_local_plan

tmp = Path(sys.argv[1])
prefix = str(tmp / "env")
plan = Plan(recipe="t", target="local", host="local", prefix=prefix, backend="venv", steps=[
    Step(id="environment", title="venv", params=P.EnvironmentParams(
        backend="venv", prefix=prefix, python="3.11", interpreter=sys.executable, with_pip=False)),
    Step(id="env-file", title="env", params=P.EnvFileParams(path=prefix + "/.envbuild/env.sh", vars={"A": "1"}))])
rc, host, _ = run_local_plan(tmp, plan)
print(json.dumps({"rc": rc, "playbooks": str(ex.PLAYBOOKS), "done": host.changed + host.ok,
                  "collections": ex.ansible_env(tmp, insecure=False)["ANSIBLE_COLLECTIONS_PATH"]}))
"""


@pytest.mark.integration
def test_envbuild_playbooks_runs_another_copy_and_names_what_is_missing(tmp_path):
    copy = tmp_path / "project"
    shutil.copytree(PROJECT, copy, symlinks=False)  # the links' files, as in a bundle or a wheel
    env = {**os.environ, "ENVBUILD_PLAYBOOKS": str(copy)}
    p = subprocess.run([sys.executable, "-c", OVERRIDE_RUN, str(tmp_path)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"rc": 0, "playbooks": str(copy), "done": ["environment", "env-file"],
                   "collections": str(copy)}
    command = (tmp_path / "run/ansible/artifacts/provision/command").read_text()
    assert str(copy) in command and str(PROJECT) not in command  # the copy's playbook ran

    shutil.rmtree(copy / "ansible_collections")
    p = subprocess.run([sys.executable, "-c", "from envbuild.execute import ansible as ex; ex._playbooks()"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode != 0
    assert "ansible_collections/envbuild/node" in p.stderr and str(copy) in p.stderr


def test_the_playbook_runs_with_the_projects_config(tmp_path):
    """envbuild's ansible-playbook reads the project's ansible.cfg from any working folder: its
    poll interval (no ANSIBLE_* variable sets it) is what ansible-config reports there."""
    env = {**os.environ, **ex.ansible_env(tmp_path, insecure=False)}
    p = subprocess.run([str(Path(sys.executable).parent / "ansible-config"), "dump", "--only-changed",
                        "--format", "json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    changed = {row["name"]: row for row in json.loads(p.stdout) if "name" in row}
    poll = changed["DEFAULT_INTERNAL_POLL_INTERVAL"]
    assert poll["value"] == 0.02 and str(PROJECT / "ansible.cfg") in str(poll.get("origin")), poll
