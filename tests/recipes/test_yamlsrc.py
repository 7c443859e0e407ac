"""envbuild.yamlsrc: a process reads a document once (by its text) and hands each caller its own
copy; refused documents are refused every time; values PyYAML's constructors cannot read are
refused with the file and line, never a traceback."""

from __future__ import annotations

import copy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import ROOT

from envbuild import yamlsrc
from envbuild.errors import InputError


def read(text: str):
    """What load_yaml gives: (data, lines) or the InputError's (message, where, hint)."""
    try:
        data, loc = yamlsrc.load_yaml("f.yaml", text)
        return ("ok", data, loc.lines)
    except InputError as exc:
        return ("refused", str(exc), exc.where, exc.hint)


def read_anew(text: str, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as mp:
        mp.setattr(yamlsrc, "_READ", {})
        return read(text)


def test_a_document_is_composed_once_and_each_caller_gets_its_own_copy(monkeypatch):
    monkeypatch.setattr(yamlsrc, "_READ", {})
    recipe = next((ROOT / "envbuild" / "recipes").rglob("*.yaml"))
    first, loc = yamlsrc.load_yaml(recipe)
    snapshot = copy.deepcopy(first)  # shares nothing with what load_yaml keeps, however it copies
    assert yamlsrc._READ  # kept

    def refuse(text, path):
        raise AssertionError("composed again")

    monkeypatch.setattr(yamlsrc, "_compose", refuse)
    second, loc2 = yamlsrc.load_yaml(recipe)
    assert second == first and loc2.lines == loc.lines
    first.clear()
    loc.lines.clear()
    third, loc3 = yamlsrc.load_yaml(recipe)
    assert third == second and loc3.lines == loc2.lines and third  # the caller's changes stay the caller's
    nested = next(v for v in third.values() if isinstance(v, list) and v)  # a copy deep, not shallow
    nested.append("changed")
    assert yamlsrc.load_yaml(recipe)[0] == snapshot


def test_a_refused_document_is_refused_again_and_kept_nowhere(monkeypatch):
    monkeypatch.setattr(yamlsrc, "_READ", {})
    bad = "a: 1\na: 2\n"
    first = read(bad)
    assert first[0] == "refused" and "duplicate key 'a'" in first[1] and first[2] == "f.yaml:2"
    assert read(bad) == first
    assert not yamlsrc._READ


def test_the_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(yamlsrc, "_READ", {})
    monkeypatch.setattr(yamlsrc, "_READ_MAX", 3)
    for i in range(5):
        assert read(f"n: {i}\n")[1] == {"n": i}
    assert list(yamlsrc._READ) == ["n: 2\n", "n: 3\n", "n: 4\n"]  # the oldest went first
    monkeypatch.setattr(yamlsrc, "_READ_MAX_CHARS", 10)
    assert read("long: " + "x" * 20 + "\n")[0] == "ok"
    assert len(yamlsrc._READ) == 3 and not any(k.startswith("long") for k in yamlsrc._READ)


REFUSED = {
    "syntax": ("a: b: c\n", "YAML syntax error: mapping values are not allowed here", "f.yaml:1"),
    "duplicate": ("a: 1\nb: 2\na: 3\n", "duplicate key 'a'", "f.yaml:3"),
    "tag": ("a: !!python/object/apply:os.system [ls]\n", "unsupported YAML tag", "f.yaml:1"),
    # PyYAML's constructors raise IndexError, KeyError and AttributeError on these
    "empty int": ("a: 1\nb: !!int\n", "cannot read value '' as int", "f.yaml:2"),
    "bool": ("b: !!bool maybe\n", "cannot read value 'maybe' as bool", "f.yaml:1"),
    "timestamp": ("t: !!timestamp soon\n", "cannot read value 'soon' as timestamp", "f.yaml:1"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_the_line_twice_alike(name, monkeypatch):
    text, message, where = REFUSED[name]
    got = read_anew(text, monkeypatch)
    assert got[0] == "refused" and message in got[1] and got[2] == where, got
    assert read_anew(text, monkeypatch) == got


FRAGMENTS = st.sampled_from([
    "a", "b", "key", "- ", ": ", ":", "  ", "\n", "#c", "'", '"', "[", "]", "{", "}", ", ", "&x ", "*x",
    "!!str ", "!!int ", "!!bool ", "!!float ", "!!timestamp ", "!!binary ", "!!null ", "!t ", "? ", "|",
    "1", "-1.5", "0x1f", "null", "~", "yes", "2021-02-23", "é",
])


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FRAGMENTS, max_size=30).map("".join))
def test_any_text_reads_or_is_refused_and_reads_alike_again(text):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(yamlsrc, "_READ", {})
        first = read(text)  # an InputError or data: never another exception
        assert read(text) == first  # from memory (or refused again)
