"""Reading a benchmark's log in linear time with bounded memory (issue 54, item 5): every
pattern the readers run is RE2's (no backtracking: a line shaped against ARG_RE, FIELD_RE or
ALPA_PRINTED_RE once stalled ``envbuild parse`` for minutes), every line is cut at one cap, and a
file is streamed, its text held up to a stated bound and refused past it, in ``envbuild parse``,
``envbuild report`` of committed results, a submitted job's judging and a node's fetched output.
No test here is timed (bench/parse_big.py measures): each checks the structure or the result."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from envbuild.recipes import load_recipe
from envbuild.recipes.linear import MAX_LINE, Linear, compile_linear, required_literal
from envbuild.smoke import completion, hardware, logfacts, native, pipeline_trace, readers
from envbuild.smoke.logread import ENV, LineReader, LogTooLarge, read_log
from support.paths import ROOT

LOGS = ROOT / "tests" / "data" / "native_logs"
COMPLETED = LOGS / "corpus" / "megatron-deepspeed-slurm" / "completed.log"
ALPA_COMPLETED = LOGS / "corpus" / "alpa-megatron-h100" / "completed.log"
# the modules that read a benchmark's output (and the GPU names it prints)
READERS = [native, completion, logfacts, pipeline_trace, hardware, readers]
KB50 = 50 * 1024


def _patterns(obj, seen=None):
    """Every compiled pattern reachable from ``obj``: module globals, lists, tuples, dicts, dataclasses."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (re.Pattern, Linear)):
        yield obj
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for item in obj:
            yield from _patterns(item, seen)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _patterns(item, seen)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _patterns(getattr(obj, f.name), seen)


def test_every_pattern_the_readers_hold_is_re2():
    found = [p for module in READERS for value in vars(module).values() for p in _patterns(value)]
    python_re = [p.pattern for p in found if isinstance(p, re.Pattern)]
    assert not python_re, f"backtracking patterns: {python_re}"
    names = {p.pattern for p in found}
    # the three the attacks were shaped against are among them
    assert {native.ARG_RE.pattern, native.ITER_RE.pattern, native.ALPA_PRINTED_RE.pattern} <= names
    assert len(names) >= 30
    # one cap on a line for every reader: the declared rules' and the built-in ones'
    from envbuild.recipes import logspec
    assert logfacts.LINE_CAP == logspec.MAX_LINE == MAX_LINE


@pytest.mark.parametrize("module", READERS, ids=lambda m: m.__name__)
def test_no_reader_calls_python_re(module):
    """No pattern is compiled or run by ``re`` inside a function either (``re.escape`` builds one)."""
    tree = ast.parse(Path(module.__file__).read_text())
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "re"}
    assert used <= {"escape"}, f"{module.__name__} calls re.{sorted(used - {'escape'})}"


def test_a_pattern_re2_refuses_is_refused():
    with pytest.raises(ValueError, match="not a linear-time pattern"):
        compile_linear(r"(a+)\1")
    with pytest.raises(ValueError, match="not a linear-time pattern"):
        compile_linear(r"x(?!y)")


# the two shapes read by functions, as the patterns were before they became functions (the oracle)
OLD_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _()/\-]*?)\s*:\s*(" + native.NUMBER + r"|nan|inf)\s*$")
OLD_LABEL = re.compile(r"^\s*\d+: ")


def test_field_and_label_read_what_the_patterns_read():
    rng = random.Random(54)
    chars = list("aZz09 _()/-:.eE+\t\u00a0\u0661xnif|\u212a")
    for _ in range(40000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 12)))
        m = OLD_FIELD.match(text)
        try:
            old = (m.group(1).strip(), float(m.group(2))) if m else None
        except ValueError:  # "1.2.3": the old reader raised here; a field that is no number is left out now
            old = None
        assert repr(native.field(text)) == repr(old), text
        lm = OLD_LABEL.match(text)
        assert native.label_end(text) == (lm.end() if lm else 0), text


def test_the_required_characters_are_required():
    assert required_literal(r"\biteration\s+(\d+)") == "iteration"
    assert required_literal(r"(?:at iteration|after) x") == " x"  # Python's parser: "a" then a branch
    assert required_literal(r"a(?:bcd)?e") == "a"
    assert required_literal(r"-{3} x") == "--- x"
    assert required_literal(r"(?i)iteration") == "" and required_literal(r"a(?i:bcd)") == "a"
    assert required_literal(r"\Qa.b\E") == ""  # RE2's syntax Python does not read: no test


def _corpus_lines():
    for path in sorted(LOGS.rglob("*")):
        if path.is_file() and path.suffix in (".log", ".out", ".tsv", ".txt"):
            yield from path.read_text(errors="replace").splitlines()


def test_the_test_before_re2_loses_no_line_of_the_corpus():
    """Each built-in pattern with its test of required characters finds what RE2 alone finds,
    on every line of the native-log corpus."""
    rxs = {p.pattern: p for module in READERS for value in vars(module).values() for p in _patterns(value)}
    lines = list(_corpus_lines())
    assert len(lines) > 1000
    for pattern, rx in rxs.items():
        if not rx.required:
            continue
        bare = compile_linear(pattern)
        for line in lines:
            got, want = rx.search(line), bare.search(line)
            assert (got and got.span()) == (want and want.span()), (pattern, line)


def _with_line(line: str) -> str:
    text = COMPLETED.read_text()
    cut = text.index("0: -------------------- end of arguments")
    return text[:cut] + line + text[cut:]


def test_lines_shaped_against_the_patterns_are_read():
    """50 KB lines shaped against ARG_RE, FIELD_RE and ALPA_PRINTED_RE (each took Python's re
    minutes) are read, and the values around them are what they are without them."""
    clean = native.parse("megatron-deepspeed", COMPLETED.read_text())
    arg = _with_line("0:   a .. x" + " " * KB50 + "y\n")
    assert native.megatron_arguments(native.last_run("megatron-deepspeed", arg)[0])["a"] == "x" + " " * KB50 + "y"
    text = COMPLETED.read_text()
    end = text.index(" |\n", text.index("iteration        1/")) + 2
    field = text[:end] + " a" + " " * KB50 + "! |" + text[end:]
    rows = native.iteration_lines(field)
    assert rows[0]["iteration"] == 1 and not any(k.startswith("a ") or k == "a" for k in rows[0])
    for shaped in (arg, field):
        got = native.parse("megatron-deepspeed", shaped)
        assert got["samples_per_s"] == clean["samples_per_s"] and got["window"] == clean["window"]
    alpa = ALPA_COMPLETED.read_text() + "method: x value: {} " * (KB50 // 20) + "\n"
    assert native.parse("alpa-benchmark", alpa)["tflops_per_gpu"] == \
        native.parse("alpa-benchmark", ALPA_COMPLETED.read_text())["tflops_per_gpu"]


def test_parse_judges_a_file_with_shaped_and_overlong_lines_as_without(tmp_path):
    def parsed(path: Path) -> dict:
        got = subprocess.run([sys.executable, "-m", "envbuild", "parse", "megatron-deepspeed-slurm", str(path),
                              "--json", "--gpu", "NVIDIA A100-SXM4-80GB"], capture_output=True, text=True,
                             timeout=120, cwd=ROOT)
        assert "Traceback" not in got.stderr, got.stderr
        return json.loads(got.stdout)

    shaped = tmp_path / "shaped.log"
    shaped.write_text(_with_line("0:   a .. x" + " " * KB50 + "y\n" + "0: " + "z" * (4 * MAX_LINE) + "\n"))
    want, got = parsed(COMPLETED), parsed(shaped)
    assert got["verdict"] == want["verdict"] and got["value"] == want["value"] and got["window"] == want["window"]


def test_the_reader_holds_one_block_and_one_cut_line(tmp_path):
    """A file far larger than what the reader holds, one line of it 10 MiB: read line by line,
    that line cut, the next lines whole, every byte digested."""
    path = tmp_path / "big.log"
    with path.open("wb") as fh:
        for i in range(2000):
            fh.write(b"line %d\n" % i)
        fh.write(b"x" * (10 << 20) + b"\n")
        fh.write(b"after\n" * 1000 + b"last")
    chunk = 64 * 1024
    with path.open("rb") as fh:
        reader = LineReader(fh, chunk=chunk)
        lines = list(reader)
    assert reader.held_max <= chunk + 4 * MAX_LINE < path.stat().st_size // 10
    assert len(lines) == 2000 + 1 + 1000 + 1
    assert lines[2000] == (b"x" * MAX_LINE, True) and lines[2001] == (b"after", False) and lines[-1] == (b"last", False)
    assert reader.size == path.stat().st_size
    assert reader.digest.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_log_is_read_as_it_was_when_no_line_is_cut():
    for path in sorted(LOGS.rglob("*.log")):
        log = read_log(path)
        assert log.text == path.read_bytes().decode("utf-8", errors="replace") and log.cut == 0, path
        assert log.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_log_past_the_bound_is_refused_not_read_whole(tmp_path):
    path = tmp_path / "huge.log"
    path.write_text(("0:  iteration        1/      20 | a: 1 |\n" * 40000))
    with pytest.raises(LogTooLarge, match=r"huge\.log: the benchmark output holds more than"):
        read_log(path, limit=100_000)
    got = subprocess.run([sys.executable, "-m", "envbuild", "parse", "megatron-deepspeed-slurm", str(path)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, ENV: "0.5"})
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert "huge.log" in got.stderr and "0.5 MiB" in got.stderr and ENV in got.stderr


def test_a_committed_record_past_the_bound_is_not_judged(tmp_path, monkeypatch):
    from envbuild.report import rejudge

    run = tmp_path / "run1"
    run.mkdir()
    (run / "native.out").write_text(COMPLETED.read_text() * 4)
    (run / "run.json").write_text(json.dumps({"recipe": "megatron-deepspeed-slurm"}))
    recipe = load_recipe("megatron-deepspeed-slurm")
    records = rejudge.find(tmp_path)
    (fits,) = rejudge.judge_all(tmp_path, records, {recipe.name: recipe})
    assert fits.now is not None
    monkeypatch.setenv(ENV, str(len(COMPLETED.read_text()) * 2 / 2**20))
    (judged,) = rejudge.judge_all(tmp_path, records, {recipe.name: recipe})
    assert judged.now is None and "run1/native.out: the native record holds more than" in judged.why_not
    assert rejudge.exit_code([judged]) == 1


def test_a_job_output_past_the_bound_fails_unjudged(tmp_path, monkeypatch):
    from envbuild.launch import submit

    out = tmp_path / "job.out"
    out.write_text(COMPLETED.read_text() * 4)
    text, why = submit._read(out)
    assert text == out.read_text() and why == ""
    monkeypatch.setenv(ENV, str(len(COMPLETED.read_text()) * 2 / 2**20))
    tail, why = submit._read(out)
    assert "job.out: the job output holds more than" in why and out.read_text().endswith(tail)
    result = submit.JobResult("local", "local", "COMPLETED", "0", "", "here", str(out), "", tail, "", unread=why)
    job = SimpleNamespace(options=None, replaced=None)  # a job that ran the recipe's own command
    native_section = submit.results(job, load_recipe("megatron-deepspeed-slurm"), result)["native"]
    assert native_section["error"].startswith("the job's output was not judged: ") and "verdict" not in native_section


def test_a_node_output_past_the_bound_is_not_judged(tmp_path, monkeypatch):
    from envbuild.smoke.onnode import collect_node

    (tmp_path / "native.out").write_text(COMPLETED.read_text() * 4)
    (tmp_path / "native.rc").write_text("0\n")
    recipe = load_recipe("megatron-deepspeed-slurm")
    assert collect_node(tmp_path, ["native"], recipe.name, recipe.benchmark)["native"]["verdict"]["verdict"]
    monkeypatch.setenv(ENV, str(len(COMPLETED.read_text()) * 2 / 2**20))
    section = collect_node(tmp_path, ["native"], recipe.name, recipe.benchmark)["native"]
    assert "verdict" not in section and "the native output holds more than" in section["error"]
