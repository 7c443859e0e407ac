"""A site template is bounded in time, memory and output (issue 54, item 6): one that loops,
allocates or prints without end is an InputError naming it, in seconds, and the controller
goes on; the declared jinja2 floor is above the release with a known sandbox escape
(CVE-2025-27516: 3.1.5 and older)."""

from __future__ import annotations

import time
import tomllib

import pytest
from packaging.requirements import Requirement

from envbuild.errors import InputError
from envbuild.render import sitetemplates
from support.paths import ROOT

EXTENDS = '{% extends "envbuild/report.md.j2" %}'
CONTEXT = {k: "" for k in ("verdict", "run", "badges", "launch", "import_cost", "deviations", "fleet", "nodes",
                           "diffs")}


def _render(block: str) -> str:
    return sitetemplates.render("report.md.j2", CONTEXT, (("report.md.j2", EXTENDS + block),))


@pytest.mark.process
def test_a_site_template_that_loops_without_end_is_stopped(monkeypatch):
    monkeypatch.setattr(sitetemplates, "SITE_TIME_S", 4)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="the site template report.md.j2 ran longer than 4 s"):
        _render("{% block footer %}{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}"
                "{% endfor %}{% endblock %}")
    assert time.monotonic() - t0 < 15


@pytest.mark.process
def test_a_site_template_that_allocates_without_bound_is_refused():
    t0 = time.monotonic()
    with pytest.raises(InputError, match="needed more than 1024 MiB of memory"):
        _render("{% block footer %}{% set x = 'x' * 4000000000 %}{{ x|length }}{% endblock %}")
    assert time.monotonic() - t0 < 15


@pytest.mark.process
def test_a_site_templates_output_is_cut():
    with pytest.raises(InputError, match="its output passed 32 MiB"):
        _render("{% block footer %}{% for a in range(100000) %}{{ 'y' * 1000 }}\n{% endfor %}{% endblock %}")


@pytest.mark.process
def test_a_bounded_site_template_still_renders_and_keeps_errors_named():
    text = _render("{% block footer %}Reviewed at Example Lab: {{ range(3)|list|length }}{% endblock %}")
    assert text.rstrip().endswith("Reviewed at Example Lab: 3")
    with pytest.raises(InputError, match="unsafe"):
        _render("{% block footer %}{{ ''.__class__.__mro__[1].__subclasses__() }}{% endblock %}")


def test_the_declared_jinja2_floor_excludes_the_sandbox_escape():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    jinja = next(Requirement(d) for d in deps if Requirement(d).name.lower() == "jinja2")
    assert not jinja.specifier.contains("3.1.5") and jinja.specifier.contains("3.1.6")
    assert not sitetemplates.sandbox_safe("3.1.5") and sitetemplates.sandbox_safe("3.1.6")
    for lock in (ROOT / "requirements").glob("*.lock"):
        pinned = [line.split("==")[1].split()[0] for line in lock.read_text().splitlines()
                  if line.lower().startswith("jinja2==")]
        assert all(sitetemplates.sandbox_safe(v) for v in pinned), (lock, pinned)
