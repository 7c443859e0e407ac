"""Golden files: report.md and the report JSON Schema, from the sample run in tests/data/runs/.

Regenerate after an intended change with ``ENVBUILD_UPDATE_GOLDEN=1 pytest tests/report/test_report_golden.py``
and review the diff.
"""

from __future__ import annotations

import json
import os

import jsonschema

from envbuild.report import collect, json_schema, render
from envbuild.report.model import SCHEMA_FILE
from support.paths import DATA, GOLDEN

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"
UPDATE = os.environ.get("ENVBUILD_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with ENVBUILD_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from the golden file; review and update with ENVBUILD_UPDATE_GOLDEN=1"


def test_report_md_matches_golden():
    check_golden("report.md", render(collect(SAMPLE), "md"))


def test_report_schema_matches_golden_and_shipped_copy():
    text = json_schema()
    check_golden("report.schema.json", text)
    if UPDATE:
        SCHEMA_FILE.write_text(text)
    assert SCHEMA_FILE.read_text() == text, ("envbuild/report/report.schema.json is stale: "
                                             "python -c 'from envbuild.report import write_schema; write_schema()'")


def test_report_json_validates_against_schema():
    report = collect(SAMPLE)
    data = json.loads(render(report, "json"))
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text()))
    assert data["schema"] == "envbuild.report/1"
    assert data["verdict"]["status"] == "FAIL"
    assert [r["kind"] for r in data["verdict"]["reasons"]] == ["drift", "benchmark"]
    assert all(r["host"] == "gpu-b" for r in data["verdict"]["reasons"])


def test_markdown_puts_verdict_first():
    lines = render(collect(SAMPLE), "md").splitlines()
    assert lines[0].startswith("# envbuild report: alpa-megatron on h100-ubuntu2404")
    assert lines[2] == "## Verdict: FAIL"
