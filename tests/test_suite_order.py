"""The order the suite hands its modules to the xdist workers in (tests/conftest.py): longest
measured first, unmeasured modules before them, pytest's order inside a module; and the README's
command keeps that order (xdist's default re-sorts modules by their number of tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from conftest import longest_first, measured_module_times

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Item:
    nodeid: str


def ids(items) -> list[str]:
    return [i.nodeid for i in items]


def test_modules_go_longest_first_and_keep_their_own_order():
    items = [Item("tests/test_a.py::one"), Item("tests/test_b.py::one"), Item("tests/test_a.py::two"),
             Item("tests/test_c.py::one"), Item("tests/test_b.py::two")]
    got = longest_first(items, {"tests/test_a.py": 1.0, "tests/test_b.py": 90.0, "tests/test_c.py": 5.0})
    assert ids(got) == ["tests/test_b.py::one", "tests/test_b.py::two", "tests/test_c.py::one",
                        "tests/test_a.py::one", "tests/test_a.py::two"]


def test_an_unmeasured_module_goes_first_and_ties_keep_file_order():
    items = [Item("tests/test_a.py::x"), Item("tests/test_b.py::x"), Item("tests/test_new.py::x")]
    got = longest_first(items, {"tests/test_a.py": 3.0, "tests/test_b.py": 3.0})
    assert ids(got) == ["tests/test_new.py::x", "tests/test_a.py::x", "tests/test_b.py::x"]


def test_times_come_from_the_newest_row_that_has_them(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"runs": [{"modules": {"tests/test_a.py": 1.0}},
                                         {"modules": {"tests/test_a.py": 7.0}}, {"wall_s": 1}]}))
    assert measured_module_times(path) == {"tests/test_a.py": 7.0}
    path.write_text("not json")
    assert measured_module_times(path) == {}
    assert measured_module_times(tmp_path / "missing.json") == {}


def test_the_shipped_results_name_real_modules():
    times = measured_module_times()
    assert times, "bench/results/suite.json has no row with module times"
    missing = [m for m in times if not (ROOT / m).is_file()]
    # a module renamed or removed since the row is harmless (its tests go first as unmeasured),
    # but most names must be real, or the order is guesswork
    assert len(missing) <= len(times) // 10, missing


def test_the_suite_command_keeps_the_order():
    command = (ROOT / ".ci" / "test").read_text()  # what the README's command (.ci/run) runs last
    assert "--dist loadfile" in command and "--no-loadscope-reorder" in command
