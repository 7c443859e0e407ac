"""The report as JSON (schema "envbuild.report/1", see report.schema.json)."""

from __future__ import annotations

from pydantic import ValidationError

from envbuild.errors import InputError
from envbuild.report.model import REPORT_SCHEMA, Report
from envbuild.userfile import loads_json


def render_json(report: Report) -> str:
    """Indented JSON text of ``report``."""
    return report.to_json()


def parse_report(text: str, source: str = "report") -> Report:
    """Read a report JSON file back; another schema version is a clear error."""
    hint = "pass a file made by `envbuild report --format json`"
    data = loads_json(text, source, "report JSON file", hint)
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else None
        raise InputError(f"{source}: not an {REPORT_SCHEMA} document (schema {found!r})",
                         hint="pass a report JSON or a run directory")
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "<top>"
        raise InputError(f"{source}: damaged report: {field}: {err['msg']}", hint=hint) from None
