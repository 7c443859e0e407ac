"""Bad input of every kind through the real CLI: exit 2, a message naming the file (and line and
field where there is one), no traceback, nothing written; never exit 70 ("internal error").

What is tried (1494 inputs in all):
  * CASES: 63 malformed inputs, each run through ``envbuild.cli.main`` (the console entry
    point) in-process: binary, latin-1 and NUL-byte files, directories, control characters,
    deep YAML and JSON, YAML alias bombs, alias cycles and too many aliases, unsafe tags, a
    5000-digit integer, garbage lockfiles, version pins that are not PEP 440, names with
    ``../`` (in files and on the command line), environment variable names such as
    ``X=1; touch pwned; Y``, a patch file outside its tree, facts with a list where a string
    belongs, an inventory with a list of hosts, damaged run.json (report and verify),
    damaged report JSON (diff), out-of-range ports, an empty ``--hosts ''``.
    Plus one lock of a foreign schema version (still exit 1: a check saying no, on purpose).
  * SUBPROCESS: 4 of them again as a separate ``python -m envbuild`` process (no traceback on
    stderr; the alias bomb refused in well under a second, not the 87 s it took to run out of
    memory before).
  * the helpers directly: ``lock_path`` (6 names leaving the lock folder), ``validate_port``
    (6 bad values, 4 good), ``hosts_option`` (4 empty values), ``validate_text`` (5 values that
    are not one value, such as ``ansible_host: [a, b]``).
  * FUZZ: hypothesis, 200 generated inputs for each of 7 loaders (recipe, target, facts,
    lockfile, the report's lockfile reader, run.json, report JSON): 1400 files of random
    bytes, random text, random JSON/YAML documents over the real field names, and mutated
    real files. Each loads or raises InputError; any other exception fails the test.
Last recorded run (88 tests, about 12-20 s on 2 shared cores): 0 tracebacks, 0 exit 70;
exit codes seen: 2 for all 63 + 4 CLI cases, 1 for the foreign lock schema; the fuzz ended
in InputError 1274 times and loaded 126 times, no other exception.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envbuild.cli import main
from envbuild.errors import CheckFailed, InputError
from support.paths import ROOT

RECIPE = ROOT / "envbuild" / "recipes" / "data" / "cpu-reference.yaml"
TARGET = ROOT / "envbuild" / "targets" / "data" / "h100.yaml"
FACTS = ROOT / "tests" / "data" / "facts" / "h100-node.json"
LOCK = ROOT / "lockfiles" / "cpu-reference" / "local.lock"
RUN = ROOT / "tests" / "data" / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404" / "run.json"

BOMB = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]) + "\n"
SOURCE = """sources:
  - name: {name}
    url: https://github.com/acme/widget
    ref: main
    sha: 0123456789abcdef0123456789abcdef01234567
    install: none
    why: test
"""


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def recipe(old: str = "", new: str = "", extra: str = "") -> str:
    text = RECIPE.read_text()
    return (_edit(text, old, new) if old else text) + extra


def target(old: str = "", new: str = "", extra: str = "") -> str:
    text = TARGET.read_text()
    return (_edit(text, old, new) if old else text) + extra


def run_json(**changes) -> str:
    data = json.loads(RUN.read_text())
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not ...})


# (id, how the file is made, where it goes, command with FILE / DIR, expected in message, line)
# where: "file" (FILE is the path), "dir" (FILE is a folder), "run" (DIR/run.json), "runlock"
# (DIR/lock.lock beside a valid run.json). line: the line the message must name, or a needle
# whose line it is, or None.
SHOW = ["show", "{FILE}"]
CHECK_RECIPE = ["check", "{FILE}", "--target", "h100"]
CHECK_TARGET = ["check", "cpu-reference", "--target", "{FILE}"]
CHECK_FACTS = ["check", "cpu-reference", "--target", "h100", "--facts", "{FILE}"]
LOCK_CHECK = ["lock", "cpu-reference", "--target", "local", "--check", "-o", "{FILE}"]
REPORT = ["report", "{DIR}", "-o", "{OUT}"]

CASES = [
    # unreadable as text
    ("recipe-binary", bytes(range(256)) * 4, "file", SHOW, "binary data", 1),
    ("recipe-latin1", "schema: 1\nname: caf\xe9\n".encode("latin-1"), "file", SHOW, "not UTF-8", 2),
    ("recipe-nul", b"schema: 1\nname: x\x00y\n", "file", SHOW, "NUL byte", 2),
    ("recipe-dir", None, "dir", SHOW, "is a directory", None),
    ("recipe-dir-check", None, "dir", CHECK_RECIPE, "is a directory", None),
    ("recipe-control-char", "schema: 1\nname: a\x01b\n", "file", SHOW, "U+0001", 2),
    ("target-binary", b"\x89PNG\r\n\x1a\n\x00\x00", "file", CHECK_TARGET, "binary data", 3),
    # hostile structure
    ("recipe-deep-flow", "a: " + "[" * 5000 + "]" * 5000 + "\n", "file", SHOW, "nested more than", 1),
    ("recipe-deep-block", "".join(f"{'  ' * i}k{i}:\n" for i in range(200)) + "  " * 200 + "v\n",
     "file", SHOW, "nested more than", 65),
    ("recipe-alias-bomb", BOMB, "file", SHOW, "aliases expand to more than", None),
    ("recipe-alias-many", "a: &x 1\nb: [" + ", ".join(["*x"] * 150) + "]\n", "file", SHOW,
     "more than 100 YAML aliases", 2),
    ("recipe-alias-cycle", "a: &a [1, *a]\n", "file", SHOW, "cycle", 1),
    ("recipe-unsafe-tag", "schema: 1\nname: !!python/object/apply:os.system [ls]\n", "file", SHOW,
     "unsupported YAML tag", 2),
    ("recipe-unsafe-scalar-tag", "schema: 1\nname: !!python/name:os.system x\n", "file", SHOW,
     "cannot read value", 2),
    ("recipe-huge-int", "schema: " + "9" * 5000 + "\n", "file", SHOW, "cannot read value", 1),
    ("recipe-list-key", "? [a, b]\n: 1\n", "file", SHOW, "mapping key", 1),
    ("target-deep", "a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n", "file", CHECK_TARGET,
     "nested more than", 1),
    ("target-bomb", BOMB, "file", CHECK_TARGET, "aliases expand", None),
    # schema: versions, names, environment variable names
    ("version-not-pep440", recipe('version: "2.13.0"', 'version: "not a version!!"'), "file", SHOW,
     "packages[0].version", "not a version!!"),
    ("version-not-pep440-check", recipe('version: "2.13.0"', 'version: "not a version!!"'), "file",
     CHECK_RECIPE, "packages[0].version", "not a version!!"),
    ("recipe-name-dotdot", recipe("name: cpu-reference", "name: ../../evil"), "file", SHOW,
     "name", "name: ../../evil"),
    ("recipe-name-dotdot-lock", recipe("name: cpu-reference", "name: ../../evil"), "file",
     ["lock", "{FILE}", "--target", "local", "--lockdir", "{OUT}"], "is not a valid name",
     "name: ../../evil"),
    ("recipe-name-slash", recipe("name: cpu-reference", "name: a/b"), "file", SHOW, "name", "name: a/b"),
    ("recipe-target-dotdot", recipe("targets: [local]", "targets: [local, ../x]"), "file", SHOW,
     "targets[1]", "targets: [local"),
    ("source-name-dotdot", recipe(extra=SOURCE.format(name="../../etc")), "file", SHOW,
     "sources[0].name", "- name: ../../etc"),
    ("recipe-env-injection", recipe(extra='env:\n  OK: "1"\n  "X=1; touch pwned; Y": "2"\n'), "file",
     SHOW, "env.X=1; touch pwned; Y", "touch pwned"),
    ("package-env-injection", recipe("    cuda: cpu\n", '    cuda: cpu\n    env: {"A B": "1"}\n'),
     "file", SHOW, "packages[0].env.A B", "A B"),
    ("source-env-injection", recipe(extra=SOURCE.format(name="widget") + '    env: {"1X": "1"}\n'),
     "file", SHOW, "sources[0].env.1X", "1X"),
    ("benchmark-env-injection", recipe("  needs_gpus: 0\n", '  needs_gpus: 0\n  env: {"$(id)": "1"}\n'),
     "file", SHOW, "benchmark.env.$(id)", "$(id)"),
    ("benchmark-target-env", recipe("  needs_gpus: 0\n", "  needs_gpus: 0\n  target_env: [NCCL_X, 'a;b']\n"),
     "file", SHOW, "benchmark.target_env[1]", "target_env"),
    ("target-env-injection", target(extra='env:\n  NCCL_DEBUG: INFO\n  "X=1; touch pwned; Y": "2"\n'),
     "file", CHECK_TARGET, "env.X=1; touch pwned; Y", "touch pwned"),
    ("target-name-dotdot", target("name: h100", "name: ../h100"), "file", CHECK_TARGET, "name",
     "name: ../h100"),
    ("patch-file-escapes", recipe(extra=SOURCE.format(name="widget") + "patches:\n  - id: p\n"
                                  "    kind: expect\n    component: widget\n    file: ../../etc/passwd\n"
                                  "    new: x\n    why: test\n"), "file", SHOW, "patches[0].file",
     "file: ../../etc/passwd"),
    # names on the command line
    ("recipe-arg-dotdot-dir", None, "arg:../", SHOW, "is a directory", None),
    ("recipe-arg-not-a-name", None, "arg:Cpu_Reference", SHOW, "not a valid recipe name", None),
    ("recipe-arg-dotdot-path", None, "arg:cpu-reference/../../nope", SHOW, "does not exist", None),
    # lockfiles
    ("lock-no-schema", "foo: bar\n", "file", LOCK_CHECK, "not an envbuild lockfile", 1),
    ("lock-schema-int", "schema: 7\nrecipe: x\n", "file", LOCK_CHECK, "not an envbuild lockfile", 1),
    ("lock-list", "- a\n- b\n", "file", LOCK_CHECK, "must be a mapping", 1),
    ("lock-prose", "hello world\nthis is: not: a lock\n", "file", LOCK_CHECK, "YAML syntax error", 2),
    ("lock-binary", b"\x1f\x8b\x08\x00" + bytes(64), "file", LOCK_CHECK, "binary data", 1),
    ("lock-bomb", BOMB, "file", LOCK_CHECK, "aliases expand", None),
    # facts files
    ("facts-deep-json", "[" * 100000 + "]" * 100000, "file", CHECK_FACTS, "more than 64 levels", None),
    ("facts-latin1", '{"host": "caf\xe9"}'.encode("latin-1"), "file", CHECK_FACTS, "not UTF-8", 1),
    ("facts-dir", None, "dir", CHECK_FACTS, "is a directory", None),  # click's own check
    ("facts-host-list", json.dumps({**json.loads(FACTS.read_text()), "host": ["a", "b"]}), "file",
     CHECK_FACTS, "host", None),
    ("facts-yaml", "schema: envbuild.facts/1\nhost: [a, b]\n", "file", CHECK_FACTS, "not a facts file", None),
    # inventories
    ("inventory-host-list", "all:\n  hosts: [node1, node2]\n", "file", ["facts", "--inventory", "{FILE}"],
     "", None),
    # run directories
    ("run-empty-object", "{}", "run", REPORT, "run_id", None),
    ("run-list", "[1, 2]", "run", REPORT, "not a run record", None),
    ("run-hosts-string", run_json(hosts="gpu-a"), "run", REPORT, "hosts", None),
    ("run-binary", bytes(range(256)), "run", REPORT, "binary data", 1),
    ("run-deep", "[" * 5000 + "]" * 5000, "run", REPORT, "more than 64 levels", None),
    ("run-lock-binary", b"\x00\x01garbage", "runlock", REPORT, "binary data", 1),
    ("verify-run-list", "[1, 2]", "run", ["verify", "--run", "{DIR}"], "not a run record", None),
    ("verify-run-empty", "{}", "run", ["verify", "--run", "{DIR}", "--local"], "run_id", None),
    # report JSON files given to diff
    ("diff-binary", bytes(range(256)), "file", ["diff", "{FILE}", "{FILE}"], "binary data", 1),
    ("diff-deep", "[" * 5000 + "]" * 5000, "file", ["diff", "{FILE}", "{FILE}"], "more than 64 levels", None),
    ("diff-damaged", '{"schema": "envbuild.report/1", "verdict": 3}', "file", ["diff", "{FILE}", "{FILE}"],
     "damaged report: verdict", None),
    # ports
    ("port-too-big", None, "none", ["facts", "--hosts", "node1:99999"], "99999", None),
    ("port-zero", None, "none", ["facts", "--hosts", "node1:0"], "node1:0", None),
    ("hosts-empty-facts", None, "none", ["facts", "--hosts", ""], "--hosts: no host given", None),
    ("hosts-empty-verify", None, "none", ["verify", "--hosts", " , "], "--hosts: no host given", None),
]


def _materialize(tmp_path: Path, content, where: str) -> tuple[Path, Path]:
    """Write the case; returns (FILE or the path the message must name, DIR)."""
    run_dir = tmp_path / "run"
    if where == "dir":
        path = tmp_path / "input.yaml"
        path.mkdir()
        return path, run_dir
    if where in ("run", "runlock"):
        run_dir.mkdir()
        name = "run.json" if where == "run" else "lock.lock"
        if where == "runlock":
            (run_dir / "run.json").write_text(run_json())
        path = run_dir / name
    else:
        path = tmp_path / "input.yaml"
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path, run_dir


def _line(path: Path, line) -> int | None:
    if line is None or isinstance(line, int):
        return line
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if line in text:
            return n
    raise AssertionError(f"{line!r} not in {path}")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_naming_the_file(case, tmp_path, capsys):
    name, content, where, command, expected, line = case
    path, run_dir = _materialize(tmp_path, content, where)
    out = tmp_path / "out"
    arg = where.removeprefix("arg:") if where.startswith("arg:") else str(path)
    argv = [a.replace("{FILE}", arg).replace("{DIR}", str(run_dir)).replace("{OUT}", str(out))
            for a in command]
    started = time.monotonic()
    rc = main(argv)
    elapsed = time.monotonic() - started
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert rc == 2, f"{name}: exit {rc}\n{text}"
    assert "Traceback" not in text and "internal error" not in text, text
    errors = [ln for ln in captured.err.splitlines() if ln.startswith("error: ")]
    if not errors:  # an option click checks itself (--facts PATH, dir_okay=False): its usage error
        errors = [ln for ln in captured.err.splitlines() if ln.startswith("Error: Invalid value")]
    else:
        assert any(ln.startswith("hint: ") for ln in captured.err.splitlines()), captured.err
    assert len(errors) == 1, captured.err
    assert expected in errors[0], errors[0]
    if where not in ("none",) and not where.startswith("arg:"):
        assert str(path) in errors[0], errors[0]  # the file is named
    want_line = _line(path, line) if content is not None else line
    if want_line is not None:
        assert f"{path}:{want_line}:" in errors[0], errors[0]  # ... and its line
    assert not out.exists(), "a refused command wrote its output"
    assert elapsed < 10, f"{name} took {elapsed:.1f}s"


def test_foreign_lock_schema_is_still_a_check_that_says_no(tmp_path, capsys):
    path = tmp_path / "x.lock"
    path.write_text(LOCK.read_text().replace("envbuild.lock/1", "envbuild.lock/9"))
    assert main(LOCK_CHECK[:-1] + [str(path)]) == 1
    assert "unknown lock schema 'envbuild.lock/9'" in capsys.readouterr().err


SUBPROCESS = ["recipe-binary", "recipe-deep-flow", "recipe-alias-bomb", "facts-deep-json"]


@pytest.mark.process
@pytest.mark.parametrize("name", SUBPROCESS)
def test_separate_process_prints_no_traceback(name, tmp_path):
    _, content, where, command, expected, _ = next(c for c in CASES if c[0] == name)
    path, _ = _materialize(tmp_path, content, where)
    argv = [a.replace("{FILE}", str(path)) for a in command]
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envbuild", *argv], cwd=ROOT, text=True,
                          capture_output=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert expected in proc.stderr and str(path) in proc.stderr
    assert time.monotonic() - started < 20


def test_lock_path_refuses_names_that_leave_the_lock_folder(tmp_path):
    from envbuild.lock.location import lock_path

    assert lock_path("cpu-reference", "local", tmp_path) == tmp_path / "cpu-reference" / "local.lock"
    for recipe_name, target_name in (("../x", "local"), ("cpu-reference", "../../t"), ("a/b", "t"),
                                     ("..", "t"), ("r", ""), ("/abs", "t")):
        with pytest.raises(InputError, match="not a valid"):
            lock_path(recipe_name, target_name, tmp_path)


@pytest.mark.parametrize("value,ok", [("22", 22), (2222, 2222), ("65535", 65535), (1, 1), ("0", None),
                                      (0, None), (99999, None), ("-1", None), ("x", None), (True, None)])
def test_validate_port(value, ok):
    from envbuild.connect.nodes import validate_port

    if ok is not None:
        assert validate_port(value, "--hosts h") == ok
    else:
        with pytest.raises(InputError, match=r"--hosts h: port .* is not a TCP port \(1-65535\)"):
            validate_port(value, "--hosts h")


def test_validate_text_refuses_a_list_where_one_value_belongs():
    from envbuild.connect.nodes import validate_text

    assert validate_text("10.0.0.1", "inv.yaml: host n1: ansible_host") == "10.0.0.1"
    for bad in (["a", "b"], {"a": 1}, None, "", True):
        with pytest.raises(InputError, match="inv.yaml: host n1: ansible_host: expected one value"):
            validate_text(bad, "inv.yaml: host n1: ansible_host")


def test_hosts_option_refuses_an_empty_value():
    from types import SimpleNamespace

    from envbuild.cli.options import hosts_option

    param = SimpleNamespace(name="hosts")
    assert hosts_option(None, param, None) is None
    assert hosts_option(None, param, "a,b") == "a,b"
    for empty in ("", " ", ",", " , "):
        with pytest.raises(InputError, match="--hosts: no host given"):
            hosts_option(None, param, empty)


# --- fuzz: every loader either loads or raises InputError ----------------------------------

def _loaders():
    from envbuild.facts.load import load_facts
    from envbuild.lock.serialize import read_lock
    from envbuild.observe.expected import read_lock as read_lock_dict
    from envbuild.recipes import load_recipe
    from envbuild.report.collect import collect
    from envbuild.report.diff import load_report
    from envbuild.targets import load_target

    def lock(path: Path):
        try:
            return read_lock(path)
        except CheckFailed as exc:  # another envbuild.lock/N: a check saying no, on purpose
            assert "unknown lock schema 'envbuild.lock/" in exc.message, exc
            return None

    return {
        "recipe": ("input.yaml", RECIPE, load_recipe),
        "target": ("input.yaml", TARGET, load_target),
        "facts": ("facts.json", FACTS, load_facts),
        "lock": ("x.lock", LOCK, lock),
        "report-lock": ("lock.lock", LOCK, read_lock_dict),
        "run.json": ("run.json", RUN, lambda path: collect(path.parent)),
        "report.json": ("report.json", None, load_report),  # seed: the sample run's report
    }


FIELDS = ["schema", "name", "title", "description", "published", "url", "python", "targets",
          "packages", "version", "why", "env", "sources", "sha", "ref", "patches", "benchmark",
          "host", "gpus", "run_id", "recipe", "target", "status", "hosts", "argv", "digest",
          "platform", "git", "verified", "envbuild.lock/1", "envbuild.facts/1", "envbuild.run/1"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.sampled_from(FIELDS), st.text(max_size=20))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=6)),
    max_leaves=30)


@st.composite
def mutated(draw, seed: Path) -> bytes:
    """A real file with a few random bytes inserted, deleted or replaced."""
    data = bytearray(seed.read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = draw(st.binary(min_size=1, max_size=8) | st.sampled_from(
            [b"\x00", b"\xff", b"[", b"{", b":", b"- ", b"&a ", b"*a", b"\n  ", b"!!python/x ", b"\t"]))
        if op == "insert":
            data[at:at] = chunk
        elif op == "delete":
            del data[at:at + len(chunk)]
        else:
            data[at:at + len(chunk)] = chunk
    return bytes(data)


def inputs(seed: Path):
    return st.one_of(
        st.binary(max_size=600),
        st.text(max_size=600).map(lambda t: t.encode("utf-8", "surrogatepass")),
        documents.map(lambda d: yaml.safe_dump(d).encode()),
        documents.map(lambda d: json.dumps(d).encode()),
        mutated(seed),
    )


FUZZ_EXAMPLES = 200


@pytest.mark.parametrize("kind", list(_loaders()))
def test_fuzz_loaders_load_or_raise_input_error(kind, tmp_path_factory):
    filename, seed, load = _loaders()[kind]
    folder = tmp_path_factory.mktemp(f"fuzz-{kind}")
    path = folder / filename
    if seed is None:
        from envbuild.report import collect, render

        seed = folder / "seed.json"
        seed.write_text(render(collect(RUN.parent), "json"))
    seen = {"ok": 0, "input_error": 0}

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(inputs(seed))
    def check(raw: bytes) -> None:
        path.write_bytes(raw)
        try:
            load(path)
            seen["ok"] += 1
        except InputError as exc:
            assert exc.exit_code == 2
            assert str(path.name) in str(exc) or str(path.parent) in str(exc), str(exc)
            seen["input_error"] += 1

    check()
    assert seen["input_error"] > 0  # the generator does reach the refusals
