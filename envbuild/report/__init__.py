"""Verification reports: a run directory judged (PASS/FAIL) and rendered for a reviewer.

>>> report = collect("~/.envbuild/runs/latest")          # doctest: +SKIP
>>> print(render(report, "md"))                          # doctest: +SKIP

Formats: ``md`` (Markdown), ``html`` (one self-contained file), ``json`` ("envbuild.report/1").
"""

from __future__ import annotations

from envbuild.errors import InputError
from envbuild.report.collect import collect
from envbuild.report.model import REPORT_SCHEMA, Report, json_schema, write_schema

FORMATS = ("html", "md", "json")

__all__ = ["FORMATS", "REPORT_SCHEMA", "Report", "collect", "json_schema", "render", "write_schema"]


def render(report: Report, fmt: str, site: tuple[tuple[str, str], ...] = ()) -> str:
    """The report as text in ``fmt`` (html, md or json); Markdown and HTML with their control
    bytes made visible (``envbuild.display``: a log tail or a recipe field cannot carry terminal
    escapes into a reviewer's terminal or file); JSON escapes them itself. ``site``: a site's
    report templates over envbuild's (``envbuild.render.sitetemplates.read_site``)."""
    from envbuild.display import visible

    if fmt == "md":
        from envbuild.report.render_md import render_md

        return visible(render_md(report, site))
    if fmt == "html":
        from envbuild.report.render_html import render_html

        return visible(render_html(report, site))
    if fmt == "json":
        from envbuild.report.render_json import render_json

        return render_json(report)
    raise InputError(f"unknown report format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
