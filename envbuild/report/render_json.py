"""The report as JSON (schema "envbuild.report/1", see report.schema.json)."""

from __future__ import annotations

import json

from envbuild.errors import InputError
from envbuild.report.model import REPORT_SCHEMA, Report


def render_json(report: Report) -> str:
    """Indented JSON text of ``report``."""
    return report.to_json()


def parse_report(text: str, source: str = "report") -> Report:
    """Read a report JSON file back; another schema version is a clear error."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not JSON ({exc.msg})", hint="pass a file made by `envbuild report --format json`") from None
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else None
        raise InputError(f"{source}: not an {REPORT_SCHEMA} document (schema {found!r})",
                         hint="pass a report JSON or a run directory")
    return Report.model_validate(data)
