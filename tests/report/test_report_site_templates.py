"""A site's own report templates over envbuild's (envbuild.render.sitetemplates): a block
overridden in the HTML and Markdown reports, the rest as envbuild writes it; the HTML
template escapes what it prints; the CLI's --templates, and a broken template refused with
nothing written."""

from __future__ import annotations

from pathlib import Path

from envbuild.cli import main
from envbuild.render.sitetemplates import read_site
from envbuild.report import collect, render
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def _site(tmp_path: Path, **files: str) -> tuple:
    folder = tmp_path / "site"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".")).write_text(text)
    return read_site(folder)


def test_a_site_footer_in_both_reports_and_the_rest_unchanged(tmp_path) -> None:
    report = collect(SAMPLE)
    site = _site(tmp_path, report_html_j2='{% extends "envbuild/report.html.j2" %}'
                 "{% block footer %}<p>Reviewed at Example Lab</p>{{ super() }}{% endblock %}",
                 report_md_j2='{% extends "envbuild/report.md.j2" %}{% block footer %}Reviewed at Example Lab.'
                 "{% endblock %}{% block badges %}{% endblock %}")
    html, ours = render(report, "html", site), render(report, "html")
    assert html.replace("<p>Reviewed at Example Lab</p>", "", 1) == ours != html
    md, ours_md = render(report, "md", site), render(report, "md")
    badges = ours_md[ours_md.index("## ACM artifact badges"):ours_md.index("## ", ours_md.index("## ACM") + 3)]
    assert md == ours_md.replace(badges, "") + "\nReviewed at Example Lab.\n"  # one section out, one added


def test_the_html_template_escapes_what_it_prints(tmp_path) -> None:
    """A recipe name holding markup reaches the title and heading escaped, in envbuild's
    template and in a site's block that prints it."""
    report = collect(SAMPLE)
    hostile = report.model_copy(update={"run": report.run.model_copy(update={"recipe": "<script>alert(1)</script>"})})
    site = _site(tmp_path, report_html_j2='{% extends "envbuild/report.html.j2" %}'
                 "{% block footer %}<p>site: {{ recipe }}</p>{% endblock %}")
    for text in (render(hostile, "html"), render(hostile, "html", site)):
        assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<p>site: &lt;script&gt;" in render(hostile, "html", site)


def test_cli_report_templates(tmp_path, capsys) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "report.md.j2").write_text('{% extends "envbuild/report.md.j2" %}{% block footer %}Site footer.'
                                         "{% endblock %}")
    out = tmp_path / "r.md"
    assert main(["report", str(SAMPLE), "--templates", str(folder), "-o", str(out)]) in (0, 1, 5)
    assert out.read_text().endswith("\n\nSite footer.\n")
    out.unlink()
    (folder / "report.md.j2").write_text("{% block %}")
    assert main(["report", str(SAMPLE), "--templates", str(folder), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "site template report.md.j2" in err and "Traceback" not in err and not out.exists()
