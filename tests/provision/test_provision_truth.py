"""Fast tier: every way a run can end maps to a status and an exit code that tell the truth;
file modes; secrets masked in what envbuild writes."""

from __future__ import annotations

import json
import signal
import stat

import pytest

from envbuild import rundir
from envbuild.record import create_run
from envbuild.execute.ansible import RunResult
from envbuild.execute.events import Event, EventSink, StepTracker
from envbuild.fsio import write_atomic
from envbuild.interrupt import Interrupted, StopRequest, exit_code, signum_of
from envbuild.plan.model import Plan, Step
from envbuild.provision.results import exit_code as _exit, finish as _finish, node_status as _node_status
from envbuild.redact import Redactor, is_secret_name, mask_env, secret_values

STEP = Step(id="env-file", title="e", params={"kind": "env_file", "path": "/p/.envbuild/env.sh", "vars": {}})
PLAN = Plan(recipe="r", target="local", host="n1", prefix="/p", backend="venv", steps=[STEP])


def ok(host, msg):
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": "Envbuild start", "res": {"msg": msg}}}


STATS = {"event": "playbook_on_stats", "event_data": {"failures": {}, "dark": {}, "ok": {"n1": 3}}}


def tracked(*raws) -> StepTracker:
    t = StepTracker()
    for raw in raws:
        t.feed(raw)
    return t


@pytest.mark.parametrize("raws, ran, expected", [
    # ansible-runner "successful", the playbook ended, every step done: ok
    ([ok("n1", "envbuild:start env-file"), ok("n1", "envbuild:done env-file"), STATS],
     RunResult("successful", 0), ("ok", None)),
    # "canceled" by SIGTERM in the middle of a step: interrupted at that step
    ([ok("n1", "envbuild:start env-file")], RunResult("canceled", 254, signal.SIGTERM),
     ("interrupted", "env-file")),
    # "timeout": failed at the step it was in
    ([ok("n1", "envbuild:start env-file")], RunResult("timeout", 254), ("failed", "env-file")),
    # "failed" with no failed task for this node, and the playbook never ended: not ok
    ([ok("n1", "envbuild:start env-file")], RunResult("failed", 2), ("failed", "env-file")),
    # "successful" but a plan step never reported: not ok
    ([{"event": "runner_on_ok", "event_data": {"host": "n1", "task": "Envbuild state", "res": {"done": []}}},
      STATS], RunResult("successful", 0), ("failed", "env-file")),
    # nothing at all from this node: unreachable
    ([STATS], RunResult("successful", 0), ("unreachable", None)),
    # ansible's own count says this node failed, outside a step: not ok
    ([ok("n1", "envbuild:start env-file"), ok("n1", "envbuild:done env-file"),
      {"event": "playbook_on_stats", "event_data": {"failures": {"n1": 1}, "dark": {}}}],
     RunResult("failed", 2), ("failed", "ansible")),
])
def test_every_runner_status_maps_to_a_node_status(raws, ran, expected):
    tracker = tracked(*raws)
    status, step, why = _node_status("n1", tracker.hosts.get("n1"), ran, tracker, PLAN)
    assert (status, step) == expected
    assert status == "ok" or why


def test_exit_codes_fail_closed():
    assert _exit({"a": {"status": "ok"}}) == 0
    assert _exit({"a": {"status": "ok"}, "b": {"status": "failed"}}) == 4
    assert _exit({"a": {"status": "unreachable"}, "b": {"status": "refused"}}) == 3
    assert _exit({"a": {"status": "refused"}}) == 1
    assert _exit({"a": {"status": "error"}}) == 4
    assert _exit({"a": {"status": "something new"}}) == 4  # an unknown status is never 0
    assert exit_code(signal.SIGINT) == 130 and exit_code(signal.SIGTERM) == 143
    assert signum_of(KeyboardInterrupt()) == signal.SIGINT and signum_of(Interrupted(signal.SIGTERM)) == 15
    assert signum_of(RuntimeError()) is None


def test_finished_run_that_the_report_fails_never_exits_0(tmp_path):
    rd = create_run("r", "local", argv=["envbuild"], hosts=["n1"], options={}, home=tmp_path).rd
    rd.write_node("n1", "result.json", {"status": "ok", "failed_step": None})
    results = {"n1": {"status": "ok"}}
    status, code = _finish(rd, results, 1)  # no observed.json: the installed state is unverified
    run = json.loads((rd.path / "run.json").read_text())
    assert status == "ok" and run["verdict"] == "FAIL" and code == 1
    assert any(r["kind"] == "unobserved" for r in run["verdict_reasons"])
    assert rundir.latest(tmp_path).path == rd.path.resolve()  # finished: it is latest now


def test_stop_request_records_first_signal_and_second_raises():
    with StopRequest() as stop:
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested and stop.signum == signal.SIGTERM
        # the second signal is SIGTERM again: a job started in the background (`cmd &`, as a
        # CI wrapper may run the suite) inherits SIGINT ignored, which StopRequest leaves so
        with pytest.raises(Interrupted) as exc:
            signal.raise_signal(signal.SIGTERM)
        assert exc.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is not stop._on_signal  # handlers restored


def test_write_atomic_keeps_an_existing_mode_and_new_files_get_a_sane_one(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    write_atomic(script, "#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o755 and "echo hi" in script.read_text()
    secret = write_atomic(tmp_path / "private.json", "{}", mode=0o600)
    write_atomic(secret, '{"a": 1}', mode=0o644)  # an existing file keeps its mode
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    plain = write_atomic(tmp_path / "report.md", "x")
    assert stat.S_IMODE(plain.stat().st_mode) & 0o077 in (0o044, 0o000, 0o004, 0o040)
    assert not stat.S_IMODE(plain.stat().st_mode) & 0o133  # never executable, never world-writable


def test_run_dirs_are_private_and_created_private(tmp_path):
    home = tmp_path / "eb"
    rd = create_run("r", "local", argv=["envbuild"], hosts=["n1"], options={}, home=home).rd
    rd.write_node("n1", "log.txt", "x\n")
    for folder in (home, home / "runs", rd.path, rd.path / "nodes", rd.node("n1")):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for f in (rd.path / "run.json", rd.node("n1") / "log.txt"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    (home / "runs").chmod(0o755)  # an older, wider runs/ is narrowed
    create_run("r", "local", argv=["envbuild"], hosts=["n1"], options={}, home=home)
    assert stat.S_IMODE((home / "runs").stat().st_mode) == 0o700


def test_secrets_masked_in_run_json_results_and_events(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "sekrit-xyz")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws/sekrit/abc")
    rd = create_run("r", "local", argv=["envbuild", "provision", "--token", "sekrit-xyz", "HF_TOKEN=sekrit-xyz",
                                           "--conda-channel", "https://me:pw123@conda.example/c"],
                       hosts=["n1"], options={"conda_channel": "https://me:pw123@conda.example/c"}, home=tmp_path).rd
    rd.write_node("n1", "result.json", {"status": "failed", "log_tail": "pip: 401 for aws/sekrit/abc",
                                        "env": {"HF_TOKEN": "other", "PATH": "/bin"}, "tokens_per_s": 5})
    sink = EventSink(rd.events)
    sink.emit(Event(0.0, "n1", "s", "failed", "clone https://x:sekrit-xyz@github.com/o/r failed"))
    sink.close()
    text = "".join(p.read_text() for p in rd.path.rglob("*") if p.is_file())
    assert "sekrit" not in text and "pw123" not in text and '"other"' not in text
    run = json.loads((rd.path / "run.json").read_text())
    assert run["argv"][3:5] == ["***", "HF_TOKEN=***"] and "https://me:***@conda.example/c" in run["argv"]
    res = json.loads((rd.node("n1") / "result.json").read_text())
    assert res["tokens_per_s"] == 5 and res["env"] == {"HF_TOKEN": "***", "PATH": "/bin"}


def test_secret_names():
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GITHUB_PAT", "DB_PASSWORD",
                 "PGPASSWD", "WANDB_API_KEY", "AZURE_CLIENT_CREDENTIALS", "NPM_AUTH"):
        assert is_secret_name(name), name
    for name in ("PATH", "HOME", "SSH_AUTH_SOCK", "NCCL_IB_HCA", "PIP_INDEX_URL", "BYPASS", "PASSAGE"):
        assert not is_secret_name(name), name
    assert mask_env({"HF_TOKEN": "x", "LANG": "C"}) == {"HF_TOKEN": "***", "LANG": "C"}
    assert Redactor({}).text("git+https://u:p4ss@host/x.git") == "git+https://u:***@host/x.git"

    inventory = {"all": {"hosts": {"n1": {"ansible_become_password": "pw-123456", "ansible_host": "10.0.0.1",
                                          "ansible_ssh_private_key_file": "/home/u/.ssh/id", "provision_prefix": "/p"}}}}
    assert secret_values(inventory) == {"pw-123456"}
    assert Redactor({}).add({"pw-123456"}).obj(inventory)["all"]["hosts"]["n1"]["ansible_become_password"] == "***"


def test_runner_folder_scrubbed_of_secret_env_and_values(tmp_path):
    from envbuild.execute.ansible import _scrub

    events = tmp_path / "artifacts" / "provision" / "job_events"
    events.mkdir(parents=True)
    event = {"event": "runner_on_ok", "event_data": {"res": {"invocation": {"module_args": {"actions": [
        {"argv": ["git", "clone", "https://bot:ghp-abc123@github.com/o/r"], "env": {"HF_TOKEN": "hf-1", "LANG": "C"}}]}}}}}
    (events / "1-x.json").write_text(json.dumps(event))
    (tmp_path / "inventory.yml").write_text("ansible_become_password: inv-pw-1\n")
    _scrub(tmp_path, {"inv-pw-1"})
    text = (events / "1-x.json").read_text() + (tmp_path / "inventory.yml").read_text()
    assert "ghp-abc123" not in text and "hf-1" not in text and "inv-pw-1" not in text
    action = json.loads((events / "1-x.json").read_text())["event_data"]["res"]["invocation"]["module_args"]["actions"][0]
    assert action["env"] == {"HF_TOKEN": "***", "LANG": "C"}


def node_step(etype, host, sid, **res):
    """A runner event of a step that is one task (``form: node``: tasks/step_node.yml)."""
    return {"event": etype, "event_data": {"host": host, "task": f"provision : Envbuild node step {sid}",
                                           "res": res}}


def test_a_one_task_step_starts_and_ends_with_its_task():
    """The task named for the step is the step: its start starts it (an interrupt then names it),
    its end ends it, changed as the module says; its output is shown under the step it ran in;
    a failure of it is the step's."""
    t = StepTracker()
    started = t.feed(node_step("runner_on_start", "n1", "pip:packages"))
    assert [(e.kind, e.step) for e in started] == [("start", "pip:packages"), ("task", "pip:packages")]
    assert started[1].msg == "Node actions"  # the live view shows the work, as batch_node.yml's task
    assert t.hosts["n1"].current == "pip:packages"
    done = t.feed(node_step("runner_on_ok", "n1", "pip:packages", changed=True, stdout="$ uv pip install"))
    assert [(e.kind, e.step) for e in done] == [("output", "pip:packages"), ("changed", "pip:packages")]
    t.feed(node_step("runner_on_start", "n1", "env-file"))
    assert [(e.kind, e.step) for e in t.feed(node_step("runner_on_ok", "n1", "env-file", changed=False))] == [
        ("ok", "env-file")]
    h = t.hosts["n1"]
    assert (h.changed, h.ok, h.current) == (["pip:packages"], ["env-file"], None)
    t.feed(node_step("runner_on_start", "n1", "import-check"))
    failed = t.feed(node_step("runner_on_failed", "n1", "import-check", msg="exit 1", cmd=["python", "-c", "x"], rc=1))
    assert [(e.kind, e.step, e.msg) for e in failed if e.kind == "failed"] == [
        ("failed", "import-check", "Node actions: exit 1")]
    assert (h.failed_step, h.rc) == ("import-check", 1)
    assert "TASK [Node actions]" in h.tail()  # the node's log names the work, the step is in the event
