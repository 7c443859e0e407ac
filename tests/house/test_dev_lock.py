"""requirements/dev.lock, the hashed lock of envbuild's own development environment (.ci/venv
installs from it with --require-hashes), covers what pyproject.toml asks for.

Cheap: no resolution. Every dependency and every test extra of pyproject.toml is pinned in the
lock at a version its specifier allows, every pin carries a sha256, and the header names the
command that regenerates it (run it after changing the dependencies).
"""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.paths import ROOT

LOCK = ROOT / "requirements" / "dev.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def pins() -> dict[str, set[str]]:
    """{name: versions} (a universal lock may pin one name twice, under different markers)."""
    out: dict[str, set[str]] = {}
    for line in LOCK.read_text().splitlines():
        if m := PIN.match(line):
            out.setdefault(canonicalize_name(m.group(1)), set()).add(m.group(2))
    return out


def wanted() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]


def test_every_dependency_and_test_extra_is_pinned_within_its_specifier():
    locked = pins()
    problems = []
    for req in wanted():
        versions = locked.get(canonicalize_name(req.name))
        if not versions:
            problems.append(f"{req.name}: not in the lock")
        elif not any(req.specifier.contains(v, prereleases=True) for v in versions):
            problems.append(f"{req}: locked at {sorted(versions)}")
    header = LOCK.read_text().splitlines()[1].strip("# ")
    assert not problems, f"requirements/dev.lock is out of date; regenerate: {header}\n" + "\n".join(problems)


def test_every_pin_has_a_hash_and_the_header_regenerates_it():
    text = LOCK.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    unhashed = [b.split()[0] for b in blocks if PIN.match(b) and "--hash=sha256:" not in b]
    assert pins() and unhashed == []
    assert "uv pip compile pyproject.toml --extra test --generate-hashes" in text.splitlines()[1]
