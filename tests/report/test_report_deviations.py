"""The report shows each deviation's state from the recipe: handled (with the code named), open
("not handled yet") or unverified (a claim that names no code)."""

from __future__ import annotations

import json
import shutil

from envbuild.report import collect, render
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def test_open_and_handled_deviations_are_shown_as_such(tmp_path) -> None:
    run = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, run)
    recipe = json.loads((run / "recipe.json").read_text())
    devs = recipe["deviations"]
    devs[0].update(status="open", instead="Not handled yet: the lock does not record it.")
    devs[1].update(handled_by=["envbuild.actions.steps:_install_source"],
                   test=["tests/recipes/test_deviation_behaviour.py::test_alpa_megatron_goes_on_sys_path_and_its_deleted_requirements_are_pinned"])
    (run / "recipe.json").write_text(json.dumps(recipe))
    report = collect(run)
    assert [d.status for d in report.deviations] == ["open", "handled"]
    md = render(report, "md")
    assert "| OPEN: not handled yet |" in md
    assert "| handled (envbuild.actions.steps:_install_source) |" in md
    html = render(report, "html")
    assert '<td class="bad">OPEN: not handled yet</td>' in html
    assert json.loads(render(report, "json"))["deviations"][0]["status"] == "open"


def test_a_deviation_that_names_no_code_is_unverified() -> None:
    report = collect(SAMPLE)
    assert {d.status for d in report.deviations} == {"unverified"}
    assert "unverified: names no code" in render(report, "md")
