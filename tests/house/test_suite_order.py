"""The order the suite hands its modules to the xdist workers in (tests/conftest.py): longest
measured first, unmeasured modules before them, pytest's order inside a module; and the README's
command keeps that order (xdist's default re-sorts modules by their number of tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from conftest import by_current_path, longest_first, measured_module_times, ordering_times
from support.paths import ROOT



@dataclass
class Item:
    nodeid: str


def ids(items) -> list[str]:
    return [i.nodeid for i in items]


def test_modules_go_longest_first_and_keep_their_own_order():
    items = [Item("tests/x/test_a.py::one"), Item("tests/x/test_b.py::one"), Item("tests/x/test_a.py::two"),
             Item("tests/x/test_c.py::one"), Item("tests/x/test_b.py::two")]
    got = longest_first(items, {"tests/x/test_a.py": 1.0, "tests/x/test_b.py": 90.0, "tests/x/test_c.py": 5.0})
    assert ids(got) == ["tests/x/test_b.py::one", "tests/x/test_b.py::two", "tests/x/test_c.py::one",
                        "tests/x/test_a.py::one", "tests/x/test_a.py::two"]


def test_an_unmeasured_module_goes_first_and_ties_keep_file_order():
    items = [Item("tests/x/test_a.py::x"), Item("tests/x/test_b.py::x"), Item("tests/x/test_new.py::x")]
    got = longest_first(items, {"tests/x/test_a.py": 3.0, "tests/x/test_b.py": 3.0})
    assert ids(got) == ["tests/x/test_new.py::x", "tests/x/test_a.py::x", "tests/x/test_b.py::x"]


def test_times_come_from_the_newest_row_that_has_them(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"runs": [{"modules": {"tests/x/test_a.py": 1.0}},
                                         {"modules": {"tests/x/test_a.py": 7.0}, "exit": 0}, {"wall_s": 1},
                                         {"modules": {"tests/x/test_a.py": 0.5}, "exit": 1}]}))
    assert measured_module_times(path) == {"tests/x/test_a.py": 7.0}  # not the failed run's
    path.write_text("not json")
    assert measured_module_times(path) == {}
    assert measured_module_times(tmp_path / "missing.json") == {}


def test_a_moved_module_is_timed_by_its_file_name_where_the_row_names_its_old_path():
    """A row recorded before the modules went into folders by layer names ``tests/test_x.py``;
    the module collected as ``tests/<layer>/test_x.py`` is found by its file name. A module
    timed under its own path keeps that time, and a file name recorded twice names neither."""
    recorded = {"tests/test_a.py": 7.0, "tests/test_b.py": 1.0, "tests/lock/test_b.py": 4.0,
                "tests/test_c.py": 2.0, "tests/old/test_c.py": 9.0}
    items = [Item("tests/plan/test_b.py::x"), Item("tests/lock/test_a.py::x"), Item("tests/lock/test_b.py::x"),
             Item("tests/plan/test_c.py::x"), Item("tests/plan/test_new.py::x")]
    times = ordering_times(items, lambda: 1 / 0, recorded)
    assert times == {**recorded, "tests/lock/test_a.py": 7.0}
    assert ids(longest_first(items, times)) == [
        "tests/plan/test_b.py::x", "tests/plan/test_c.py::x", "tests/plan/test_new.py::x",
        "tests/lock/test_a.py::x", "tests/lock/test_b.py::x"]
    assert by_current_path({"tests/test_a.py": 7.0}, ["tests/lock/test_a.py"]) == {
        "tests/test_a.py": 7.0, "tests/lock/test_a.py": 7.0}


def test_the_shipped_results_name_real_modules():
    times = measured_module_times()
    assert times, "bench/results/suite.json has no row with module times"
    modules = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*/test_*.py")]
    timed = by_current_path(times, modules)  # a row of before the layer folders: by file name
    located = {m.rsplit("/", 1)[-1] for m in modules if m in timed}
    missing = [m for m in times if not (ROOT / m).is_file() and m.rsplit("/", 1)[-1] not in located]
    # a module renamed or removed since the row is harmless (its tests go first as unmeasured),
    # but most names must be real, or the order is guesswork
    assert len(missing) <= len(times) // 10, missing


def test_the_suite_command_keeps_the_order():
    command = (ROOT / ".ci" / "test").read_text()  # what the README's command (.ci/run) runs last
    assert "--dist loadfile" in command and "--no-loadscope-reorder" in command


def test_each_proof_is_a_unit_of_its_own_timed_by_its_record():
    """An import proof is handed out alone (every other test with its module), with the time
    its record gives where this run carries it out and 0 where it skips; a run that collects no
    proof never computes the selection (it reads every recipe)."""
    import conftest
    from envbuild.testbed.proofrecord import Selection

    proof = f"{conftest.PROOF_MODULE}::test_entry_script_imports_on_cpu"
    assert conftest.scope_of(f"{proof}[a]") == f"{proof}[a]"
    assert conftest.scope_of("tests/x/test_a.py::test_x[a]") == "tests/x/test_a.py"
    record = {"a": {"build_s": 243.7}, "b": {"build_s": 24.3}, "c": {}}
    run = Selection(run={"a": "rotation", "c": "no recorded proof"}, skip={"b": "unchanged"})
    ids_ = [f"{proof}[a]", f"{proof}[b]", f"{proof}[c]"]
    assert conftest.proof_times(ids_, run, record) == {ids_[0]: 243.7, ids_[1]: 0.0, ids_[2]: 0.0}
    items = [Item("tests/x/test_a.py::x"), *(Item(i) for i in ids_), Item("tests/x/test_a.py::y")]
    measured = {"tests/x/test_a.py": 90.0, conftest.PROOF_MODULE: 12.0}
    times = conftest.ordering_times(items, lambda: run, measured)
    assert {k: times[k] for k in ids_} == conftest.proof_times(ids_, run)  # the shipped record's
    got = ids(longest_first(items, {**measured, **conftest.proof_times(ids_, run, record)}))
    assert got == [ids_[0], "tests/x/test_a.py::x", "tests/x/test_a.py::y", ids_[1], ids_[2]]
    assert conftest.ordering_times(items[:1], lambda: 1 / 0, measured) == measured


@pytest.mark.process
def test_the_proofs_go_to_both_workers(tmp_path):
    """Under the suite's own command (two workers, --dist loadfile), four proofs this run skips
    (so none builds anything) are shared out between both workers, not one module's worker."""
    import subprocess
    import sys

    import conftest
    from envbuild.testbed.proofrecord import proof_pairs, select

    skipped = sorted(select(proof_pairs(), run_all=False).skip)[:4]
    assert len(skipped) == 4
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
            "--no-loadscope-reorder", "-v", conftest.PROOF_MODULE, "-k", " or ".join(f"[{r}]" for r in skipped)]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300).stdout
    workers = {line.split("]", 1)[0].lstrip("[") for line in out.splitlines()
               if line.startswith("[gw") and "test_entry_script_imports_on_cpu" in line and "SKIPPED" in line}
    assert workers == {"gw0", "gw1"}, out[-3000:]


def test_the_bench_records_a_module_of_a_layer_folder_by_its_path():
    """bench/suite_bench.py keys each module's time by its path, from JUnit's classname, as the
    lookup above reads it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_bench", ROOT / "bench" / "suite_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.module_of("tests.lock.test_lock_cli") == "tests/lock/test_lock_cli.py"
    assert bench.module_of("tests.lock.test_lock_cli.TestCheck") == "tests/lock/test_lock_cli.py"
