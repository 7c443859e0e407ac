"""Progress of a provision: per node the step, its elapsed time, steps done/total, the task and
the log's tail; a live rich view on a terminal, plain lines elsewhere, nothing extra in JSON.

Unit tests feed recorded-shape runner events; the integration tests run a real
``envbuild provision`` of a recipe whose build step sleeps, once under a pseudo-terminal and
once into a pipe.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys

import pytest
from rich.console import Console

from envbuild.cli.progress import ProgressDisplay, ProgressState, fmt_elapsed
from envbuild.execute.events import Event, EventSink, StepTracker
from support.slowrecipe import slow_recipe

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def raw(event: str, task: str, **res) -> dict:
    return {"event": event, "event_data": {"host": "n1", "task": task, "res": res}}


def test_tracker_yields_progress_events_as_tasks_start_and_end():
    t = StepTracker()
    got = []
    for r in (raw("runner_on_start", "Envbuild state"),
              raw("runner_on_ok", "Envbuild state", done=["preflight"], pending=["environment", "build:x"]),
              raw("runner_on_ok", "Envbuild start", msg="envbuild:start environment"),
              raw("runner_on_start", "Node actions"),
              raw("runner_on_ok", "Node actions", changed=True, stdout="$ python -m venv /e"),
              raw("runner_on_ok", "Envbuild done", msg="envbuild:done environment")):
        got += [(e.kind, e.step, e.msg) for e in t.feed(r)]
    assert got == [("task", None, "Envbuild state"), ("skipped", "preflight", "already done (digest matches)"),
                   ("pending", None, "environment\nbuild:x"), ("start", "environment", ""),
                   ("task", "environment", "Node actions"), ("output", "environment", "$ python -m venv /e"),
                   ("changed", "environment", "")]


def test_a_step_that_is_one_task_shows_the_same_progress():
    """A step of one node batch runs as one task named for it (tasks/step_node.yml): the same
    events as the announced form above, and the live view shows its work as "Node actions"."""
    t = StepTracker()
    got = []
    for r in (raw("runner_on_ok", "Envbuild state", done=[], pending=["environment"]),
              raw("runner_on_start", "provision : Envbuild node step environment"),
              raw("runner_on_ok", "provision : Envbuild node step environment", changed=True,
                  stdout="$ python -m venv /e")):
        got += [(e.kind, e.step, e.msg) for e in t.feed(r)]
    assert got == [("pending", None, "environment"), ("start", "environment", ""),
                   ("task", "environment", "Node actions"), ("output", "environment", "$ python -m venv /e"),
                   ("changed", "environment", "")]
    s = ProgressState(clock=lambda: 0.0)
    s.feed(Event(0.0, "n1", "environment", "start"))
    s.feed(Event(0.0, "n1", "environment", "task", got[2][2]))
    assert s.nodes["n1"].task == "Node actions"


def test_sink_keeps_progress_events_out_of_the_record_and_the_json_lines(tmp_path, capsys):
    seen = []

    class Listener:
        def __call__(self, line):
            seen.append(("line", line))

        def event(self, ev):
            seen.append(("event", ev.kind))

    sink = EventSink(tmp_path / "events.jsonl", echo=Listener())
    for kind in ("task", "start", "output", "ok"):
        sink.emit(Event(1.0, "n1", "s", kind, "x"))
    sink.close()
    assert seen == [("event", "task"), ("event", "start"), ("event", "output"), ("event", "ok")]
    stored = [json.loads(x)["kind"] for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert stored == ["start", "ok"]
    sink = EventSink(None, json_lines=True, echo=Listener())
    sink.emit(Event(1.0, "n1", "s", "output", "x"))
    sink.emit(Event(1.0, "n1", "s", "ok", ""))
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x) for x in lines] == [{"type": "event", "ts": 1.0, "host": "n1", "step": "s",
                                               "kind": "ok", "msg": ""}]


def feed(display_or_state, *events):
    for e in events:
        (display_or_state.event if hasattr(display_or_state, "event") else display_or_state.feed)(e)


STEPS = [Event(100.0, "n1", None, "pending", "env\npip\nsmoke"),
         Event(100.0, "n1", "env", "start"), Event(104.5, "n1", "env", "changed"),
         Event(104.6, "n1", "pip", "start"), Event(104.7, "n1", "pip", "task", "Node actions")]


def test_state_counts_steps_times_them_and_keeps_the_tail():
    clock = [130.0]
    s = ProgressState(clock=lambda: clock[0])
    feed(s, *STEPS, Event(110.0, "n1", "pip", "output", "$ pip install -r req.txt\nCollecting torch"))
    n = s.nodes["n1"]
    assert (n.total, n.done, n.step, n.task, n.counter()) == (3, ["env"], "pip", "Node actions", "[1/3]")
    assert n.durations == {"env": 4.5} and list(n.tail)[-1] == "Collecting torch"
    text = render_text(s)
    assert "provision: 0 of 1 node(s) finished" in text
    assert "pip" in text and "25.4 s" in text and "Node actions" in text  # 130.0 - 104.6
    assert "$ pip install -r req.txt" in text
    feed(s, Event(160.0, "n1", "pip", "failed", "exit 1"))
    assert n.status == "failed" and n.durations["pip"] == pytest.approx(55.4)


def render_text(state: ProgressState) -> str:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(state.renderable(120))
    return out.getvalue()


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False)
    with ProgressDisplay(console) as display:
        assert not display.live_wanted
        feed(display, *STEPS, Event(112.0, "n1", "pip", "changed"))
        display("a message [with brackets]")
    text = out.getvalue()
    assert not ANSI.search(text)
    lines = text.splitlines()
    assert lines[0].split() == ["start", "n1", "env"]
    assert lines[1].split() == ["changed", "n1", "env", "4.5", "s", "[1/3]"]
    assert lines[3].split() == ["changed", "n1", "pip", "7.4", "s", "[2/3]"]
    assert lines[4] == "a message [with brackets]"
    assert "provision:" not in text and "Node actions" not in text  # no live view, no task lines


def test_live_view_on_a_terminal_then_gone():
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system="standard")
    clock = [106.0]
    display = ProgressDisplay(console, clock=lambda: clock[0])
    assert display.live_wanted
    with display:
        feed(display, *STEPS)
        display._live.refresh()
        clock[0] = 110.0
        display._live.refresh()
    text = ANSI.sub("", out.getvalue())
    assert "provision: 0 of 1 node(s) finished" in text
    assert "1.4 s" in text and "5.4 s" in text  # the pip step's clock ticks
    assert "changed n1               env  4.5 s  [1/3]" in " ".join(text.split("\n"))
    assert "start n1" not in text  # the live view shows the running step instead


def test_no_total_without_the_plan_from_envbuild_state():
    # nothing to do: every step reported skipped at once, Ansible never asked: no [n/total]
    out = io.StringIO()
    with ProgressDisplay(Console(file=out, width=120, force_terminal=False)) as display:
        feed(display, Event(1.0, "n1", "env", "skipped", "done"), Event(1.0, "n1", "pip", "skipped", "done"))
    assert [line.split() for line in out.getvalue().splitlines()] == [["skipped", "n1", "env"],
                                                                     ["skipped", "n1", "pip"]]


def test_fmt_elapsed():
    assert [fmt_elapsed(x) for x in (0.04, 59.96, 61, 3599, 3600 * 2 + 61)] == \
        ["0.0 s", "60.0 s", "1m01s", "59m59s", "2h01m"]


# -- a real provision -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def slow(module_tmp):
    base = module_tmp("progress")
    recipe, mirror = slow_recipe(base, ["sleep 2.5"])
    return {"base": base, "recipe": recipe, "mirror": mirror}


def argv(slow, *extra):
    return [sys.executable, "-m", "envbuild", "provision", str(slow["recipe"]), "--target", "local",
            "--git-mirror", str(slow["mirror"]), "--prefix", str(slow["base"] / "env"), "--no-smoke", *extra]


def run_in_pty(cmd: list[str], env: dict, timeout: float = 600) -> tuple[int, str]:
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            p.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.integration
@pytest.mark.slow
def test_real_provision_on_a_terminal_shows_the_build_step_ticking(slow):
    env = {**os.environ, "ENVBUILD_HOME": str(slow["base"] / "home"), "COLUMNS": "140", "TERM": "xterm"}
    rc, out = run_in_pty(argv(slow), env)
    text = ANSI.sub("", out).replace("\r", "\n")
    assert rc == 5, text[-3000:]  # --no-smoke: every node ok, nothing judged (NOT JUDGED, exit 5)
    assert "verdict: NOT JUDGED: the recipe declares no benchmark" in text
    # the live view while the build runs: the step and its clock, steps done of the plan's
    frames = [line for line in text.splitlines() if re.search(r"^\s*local\s.*build:slowpkg", line)]
    ticks = {m.group(1) for line in frames for m in [re.search(r"build:slowpkg\s+(\d+\.\d) s", line)] if m}
    assert len(ticks) >= 3, frames[-5:]  # the clock moved while the step ran
    assert any(re.search(r"\[\d/\d\]", line) for line in frames)
    assert "provision: 0 of 1 node(s) finished" in text
    # the finished step's line, with how long it took
    done = re.search(r"changed local\s+build:slowpkg\s+(\d+\.\d) s\s+\[(\d)/(\d)\]", text)
    assert done and float(done.group(1)) >= 2.5, text[-3000:]
    assert "local: ok" in text


@pytest.mark.integration
@pytest.mark.slow
def test_real_provision_into_a_pipe_prints_plain_lines(slow):
    env = {**os.environ, "ENVBUILD_HOME": str(slow["base"] / "home")}
    p = subprocess.run(argv(slow, "--force"), capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 5, p.stdout + p.stderr  # --no-smoke: every node ok, nothing judged (NOT JUDGED, exit 5)
    assert not ANSI.search(p.stdout) and "provision:" not in p.stdout
    lines = p.stdout.splitlines()
    assert any(line.split()[:3] == ["start", "local", "build:slowpkg"] for line in lines)
    done = [line for line in lines if line.split()[:3] == ["changed", "local", "build:slowpkg"]]
    assert done and re.search(r"\d+\.\d s\s+\[\d/\d\]$", done[0]), done
    # after the verdict, how to enter the environment; that line, run, gives the prefix's Python
    prefix = slow["base"] / "env"
    assert f"enter the environment: . {prefix}/.envbuild/env.sh" in lines
    entered = subprocess.run(["bash", "-c", f". {prefix}/.envbuild/env.sh && python -c 'import sys; print(sys.prefix)'"],
                             capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})
    assert entered.stdout.split() == [str(prefix)], entered.stderr
