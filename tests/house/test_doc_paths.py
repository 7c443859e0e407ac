"""Every repository path the documentation names exists, and every anchor it links to.

The Markdown front door and its docs (README.md, docs/*.md, and the READMEs of bench/, tests/
and containers/): each relative link (``[text](path#anchor)``) must reach a file or folder of
this repository and, into a Markdown file, one of its headings (GitHub's anchors); each
backticked path of this repository (`envbuild/plan/enter.py`, `docs/results/`, and a module
named from inside the package, `plan/params.py`) must exist. Paths that are not the
checkout's are left alone: a node's or an image's (`/opt/...`, `<prefix>/...`), a path with a
placeholder (`<recipe>`, `*`, `$HOME`), and the folders the wheel maps the checkout's
``playbooks/`` and ``lockfiles/`` to (setup.py's ``package_dir``, ``WHEEL_ONLY``).

The code's pointers into the documentation: a ``docs/....md`` path written in a module,
test, bench script or pyproject.toml (its docstrings and comments) must exist in the repository;
the house's shared notes outside it (``../shared/docs/...``) are not this repository's. A
recipe's ``envbuild:README.md#anchor`` reaches a heading, and the README stays a front door
(at most 10 KB, linking every document of docs/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "bench" / "README.md", ROOT / "tests" / "README.md", ROOT / "containers" / "README.md"]
TOP = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name == ".ci"} - {".venv"}
PACKAGES = {p.name for p in (ROOT / "envbuild").iterdir() if p.is_dir()}
# the wheel's layout, not the checkout's (setup.py maps playbooks/ and lockfiles/ into the package)
WHEEL_ONLY = ("envbuild/playbooks", "envbuild/lockfiles")

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
PATHLIKE = re.compile(r"^\.?[\w-]+(?:\.[\w-]+)*(?:/[\w.-]+)*/?$")
PLACEHOLDER = re.compile(r"[<>*${}|]|\.\.\.")
# the test code: tests/ and its layer folders, not the files tests read (data/, fixtures/, golden/)
TEST_CODE = [p for p in sorted((ROOT / "tests").rglob("*.py"))
             if p.relative_to(ROOT / "tests").parts[0] not in ("data", "fixtures", "golden")]
CODE_FILES = [*sorted((ROOT / "envbuild").rglob("*.py")), *TEST_CODE,
              *sorted((ROOT / "bench").glob("*.py")), *sorted((ROOT / "bench").glob("*.sh")),
              ROOT / "pyproject.toml", ROOT / "setup.py"]
# a ``sha:docs/...`` or ``repo@sha:docs/...`` names another repository's file, not ours
DOC_POINTER = re.compile(r"(?<![\w/.:-])(docs/[\w./-]*\.md)\b")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def prose(path: Path) -> str:
    """The Markdown outside fenced blocks (commands and their output are not paths to check)."""
    return re.sub(r"```.*?```", "", path.read_text(), flags=re.S)


def links(path: Path) -> list[str]:
    """The relative links of ``path`` that are broken, with why."""
    bad = []
    for target in LINK.findall(prose(path)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(f"{target}: no {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest}")
    return bad


def repo_path(token: str) -> Path | None:
    """Where a backticked ``token`` lies in the checkout when it names a path of it, else None."""
    token = token.strip()
    if not PATHLIKE.match(token) or PLACEHOLDER.search(token) or token.startswith(WHEEL_ONLY):
        return None
    first = token.split("/", 1)[0]
    if "/" not in token and first not in TOP:
        return None  # one word: a file only when the top of the checkout has that name
    if first in TOP:
        return ROOT / token
    if first in PACKAGES and "/" in token:  # a module named from inside the package: plan/params.py
        return ROOT / "envbuild" / token
    return None


def missing_paths(path: Path) -> list[str]:
    out = []
    for token in CODE.findall(prose(path)):
        where = repo_path(token)
        if where is not None and not where.exists():
            out.append(token)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_link_and_path_a_doc_names_exists(doc: Path) -> None:
    assert doc.exists()
    assert not links(doc), links(doc)
    assert not missing_paths(doc), missing_paths(doc)


def test_the_checks_see_a_broken_link_a_missing_anchor_and_a_missing_path(tmp_path) -> None:
    """The rules above, on a page written to fail each of them (and to pass the others)."""
    page = ROOT / "docs" / "provision.md"
    assert "entering-the-environment" in anchors(page)
    bad = tmp_path / "bad.md"
    bad.write_text("# Title\n\n[a](nowhere.md) [b](#title) [c](#gone) [d](https://example.org/x)\n"
                   "`envbuild/plan/enter.py` `envbuild/plan/gone.py` `plan/model.py` `docs/nothing.md`\n"
                   "`/opt/envbuild/x` `<prefix>/.envbuild/env.sh` `envbuild/playbooks/provision.yml`\n"
                   "```bash\ncat envbuild/not/here.py `docs/fenced.md`\n```\n")
    assert [b.split(":")[0] for b in links(bad)] == ["nowhere.md", "#gone"]
    assert missing_paths(bad) == ["envbuild/plan/gone.py", "docs/nothing.md"]


def test_the_code_points_only_at_docs_that_exist() -> None:
    """Docstrings and comments name docs of this repository that exist (the house's notes
    outside it are named as ``../shared/docs/...`` or ``shared/docs/...``)."""
    missing = {}
    for path in CODE_FILES:
        if path == Path(__file__).resolve():  # this module's examples of a missing doc
            continue
        for m in DOC_POINTER.finditer(path.read_text()):
            if not (ROOT / m.group(1)).exists():
                missing.setdefault(m.group(1), []).append(str(path.relative_to(ROOT)))
    assert not missing, missing


def test_envbuild_references_in_recipes_reach_a_heading() -> None:
    """A recipe whose published source is envbuild itself names it as ``envbuild:PATH#anchor``
    (cpu-reference: the README's quick start; the images carry it as io.envbuild.published):
    the file and its heading exist."""
    refs = [(path.name, m.group(1), m.group(2))
            for path in sorted((ROOT / "envbuild" / "recipes" / "data").glob("*.yaml"))
            for m in re.finditer(r"envbuild:([\w./-]+\.md)(?:#([\w-]+))?", path.read_text())]
    assert ("cpu-reference.yaml", "README.md", "quick-start") in refs
    for recipe, file, anchor in refs:
        assert (ROOT / file).is_file(), (recipe, file)
        assert anchor is None or anchor in anchors(ROOT / file), (recipe, file, anchor)


def test_the_readme_is_a_front_door() -> None:
    """README.md stays a few screens (issue 39: at most 10 KB) and links to every document in
    docs/, where the reference lives."""
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= 10 * 1024, f"README.md is {readme.stat().st_size} bytes: move detail into docs/"
    linked = {(readme.parent / t.partition("#")[0]).resolve() for t in LINK.findall(readme.read_text())}
    assert not [d.name for d in (ROOT / "docs").glob("*.md") if d.resolve() not in linked]
