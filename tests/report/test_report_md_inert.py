"""The Markdown report escapes every value as the HTML report does (issue 54, item 7): a recipe
title, a host, a failed command or a log tail holding ``<script>``, a ``javascript:`` link, an
autolink or a code fence stays text when a renderer that does not sanitise (CommonMark with raw
HTML on, GFM tables) reads the report; the sample run's report is unchanged (the golden test)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from markdown_it import MarkdownIt

from envbuild.report.render_md import cell, code, fence, md
from support.paths import ROOT

RUN = ROOT / "tests" / "data" / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"
EVIL = ('Demo <script>alert(1)</script> [click](javascript:alert(1)) <javascript:alert(2)> '
        '![img](javascript:alert(3)) <img src=x onerror=alert(4)> ` <b>in</b> ` \\[x](javascript:alert(5))')


def html_of(markdown: str) -> str:
    """What a renderer that passes raw HTML makes of it (markdown-it: CommonMark + GFM tables)."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def live(html: str) -> list[str]:
    lowered = html.lower()
    return [bad for bad in ("<script", "<img", "<b>", 'href="javascript:', 'src="javascript:') if bad in lowered]


def test_values_stay_text_in_running_text_cells_spans_and_fences():
    assert live(html_of(EVIL + "\n")) , "the attack is live when printed raw"
    assert not live(html_of(f"# report: {md(EVIL)}\n\n- {md(EVIL)}\n"))
    assert not live(html_of(f"| a | b |\n|---|---|\n| {cell(EVIL)} | {cell('`' + EVIL + '`')} |\n"))
    assert not live(html_of(f"run {code(EVIL)} and {code('x`` <script>`')}\n"))
    assert not live(html_of("\n".join(fence("```\n<script>alert(1)</script>\n````", "diff")) + "\n"))
    # the text reads back as it was written
    assert "[click](javascript:alert(1))" in html_of(md(EVIL)) and "&lt;script&gt;alert(1)" in html_of(md(EVIL))


def test_a_hostile_recipe_title_and_failed_command_stay_text_in_the_report(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    recipe = json.loads((run / "recipe.json").read_text())
    recipe["title"] = EVIL
    (run / "recipe.json").write_text(json.dumps(recipe))
    result = json.loads((run / "nodes" / "gpu-a" / "result.json").read_text())
    result.update(status="failed", failed_step="pip`` <script>x", rc=1, command="pip install ``` " + EVIL)
    (run / "nodes" / "gpu-a" / "result.json").write_text(json.dumps(result))
    got = subprocess.run([sys.executable, "-m", "envbuild", "report", str(run), "--format", "md"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ENVBUILD_HOME": str(tmp_path / ".home")})
    assert got.stdout.startswith("# envbuild report"), got.stderr
    assert "Demo &lt;script>" in got.stdout  # the title is in it, escaped
    rendered = html_of(got.stdout)
    assert not live(rendered), live(rendered)
    assert "[click](javascript:alert(1))" in rendered  # shown as written
