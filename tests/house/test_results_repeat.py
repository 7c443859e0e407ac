"""Every GPU results page says how to repeat its run with the scripts that exist today.

A GPU results page is a ``docs/results/*.md`` page that names a folder of records made on a GPU
machine (a folder under docs/results/ holding a ``native.out``, ``*-native.out``, or the
built-in smoke's ``gpt*.out`` / ``collective*.out``), or whose own folder is one. Its "## How to repeat" section
names ``bench/gpu_prepare.sh`` and ``bench/gpu_session.sh`` (the page's run used another script
that still exists: ``OTHER_SCRIPT``), says what to do when the machine is lost, and every path of
this repository it names exists, as tests/house/test_doc_paths.py asks of docs/. Each plan a section
names parses as bench/gpu_session.sh reads it (``bench/gpu_carry.py``'s ``plan_jobs``), and the
facts file given with it is a run's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.bench import gpu_carry
from support.paths import ROOT

RESULTS = ROOT / "docs" / "results"
RECORDS = ("*native.out", "*gpt*.out", "*collective*.out")
# pages whose run used a script other than gpu_prepare.sh + gpu_session.sh, which still exists
OTHER_SCRIPT = {"gpu-smoke.md": ("bench/gpu_smoke_sweep.sh",)}
# a repository path in a section, prose or code: a top folder of the checkout, then a path
PATH = re.compile(r"(?<![\w./$-])((?:bench|docs|envbuild|tests|playbooks|lockfiles|containers)/[\w.@/-]*[\w/])")
# the floor the derivation below must reach (issue 53's list): a page left out fails here
KNOWN = {"alpa-megatron.md", "gpu-smoke.md", "h100-offline.md", "h100x4-run9.md", "h200x4-run7.md",
         "h200x4-run8.md", "h200x4-run10.md", "h200x4-run11.md", "megatronapp-h100.md", "judged-runs.md"}


def record_folders() -> set[str]:
    """The top folders under docs/results/ that hold records of a run on a GPU machine."""
    return {p.relative_to(RESULTS).parts[0] for pattern in RECORDS for p in RESULTS.rglob(pattern)
            if len(p.relative_to(RESULTS).parts) > 1}


def gpu_pages() -> list[Path]:
    folders = record_folders()
    out = []
    for page in sorted(RESULTS.glob("*.md")):
        text = page.read_text()
        if page.stem in folders or any(re.search(rf"(?<![\w-]){re.escape(f)}/", text) for f in folders):
            out.append(page)
    return out


def section(text: str, title: str = "How to repeat") -> str | None:
    """The text of the ``## title`` section (to the next heading of level 2 or less), or None."""
    m = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^#{{1,2}} |\Z)", text, re.M | re.S)
    return m.group(1) if m else None


PAGES = gpu_pages()


def test_the_gpu_pages_are_found() -> None:
    assert {p.name for p in PAGES} >= KNOWN
    assert "image-proofs.md" not in {p.name for p in PAGES}  # CPU records: no GPU page


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_gpu_page_says_how_to_repeat_it(page: Path) -> None:
    body = section(page.read_text())
    assert body is not None, f"{page.name}: no '## How to repeat' section"
    for script in OTHER_SCRIPT.get(page.name, ("bench/gpu_prepare.sh", "bench/gpu_session.sh")):
        assert script in body, f"{page.name}: How to repeat does not name {script}"
    assert "machine is lost" in body, f"{page.name}: How to repeat does not say what to do when the machine is lost"
    missing = [p for p in PATH.findall(body) if not (ROOT / p).exists()]
    assert not missing, f"{page.name}: How to repeat names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_the_plans_a_page_names_are_plans_gpu_session_reads(page: Path) -> None:
    """Each ``gpu_prepare.sh PLAN MIRRORS [FACTS]`` of a section: the plan parses, installs at
    least one job, and FACTS is a node's facts record."""
    carry = gpu_carry()
    calls = re.findall(r"bench/gpu_prepare\.sh (\S+) \S+(?: (docs/\S+\.json))?", section(page.read_text()) or "")
    if page.name in OTHER_SCRIPT:
        assert not calls
        return
    assert calls, f"{page.name}: no `bash bench/gpu_prepare.sh PLAN MIRRORS` command"
    for plan, facts in calls:
        assert carry.plan_jobs((ROOT / plan).read_text(), plan)
        assert not facts or '"gpus"' in (ROOT / facts).read_text(), facts


def test_the_checks_see_a_missing_section_script_and_path(tmp_path) -> None:
    """The rules above on pages written to fail each of them."""
    ok = ("## How to repeat\n\n`bash bench/gpu_prepare.sh docs/results/h200x4-run11/session/plan.txt M`, "
          "then bench/gpu_session.sh. If the machine is lost, start again.\n\n## Next\n`bench/nothing.sh`\n")
    body = section(ok)
    assert "gpu_prepare.sh" in body and "bench/nothing.sh" not in body
    assert PATH.findall(body) == ["bench/gpu_prepare.sh", "docs/results/h200x4-run11/session/plan.txt",
                                  "bench/gpu_session.sh"]
    assert section("# Title\n\n## Reproduce\n\nbench/gpu_session.sh\n") is None
    bad = section(ok.replace("h200x4-run11", "h200x4-run99"))
    assert [p for p in PATH.findall(bad) if not (ROOT / p).exists()] == ["docs/results/h200x4-run99/session/plan.txt"]
