"""MegatronApp's per-micro-batch trace read into the pipeline's computation order
(envbuild.smoke.pipeline_trace) and drawn in the HTML report (envbuild.report.pipeline_svg),
on the real trace of megatronapp-h100's 4 x H200 run (docs/results/h200x4-run8/mapp-run1)."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter

from envbuild.report import collect, render
from envbuild.report.pipeline_svg import pipeline_svg, tick_step
from envbuild.smoke.pipeline_trace import computation_order
from support.paths import ROOT

TRACE = ROOT / "docs" / "results" / "h200x4-run8" / "mapp-run1" / "native.out"
HUNG = ROOT / "tests" / "data" / "native_logs" / "megatronapp-h100" / "hung-4xh200-2026-11-26.txt"
SAMPLE = ROOT / "tests" / "data" / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def test_the_last_training_iteration_of_the_real_trace():
    order = computation_order(TRACE.read_text(errors="replace"))
    assert (order.iteration, order.iterations, order.ranks, order.chunks, order.microbatches) == (20, 20, 4, 4, 16)
    # every rank computes every micro-batch on each of its 4 chunks, forward and backward, once
    per = Counter((s.rank, s.kind) for s in order.steps)
    assert set(per.values()) == {64} and len(per) == 8
    for rank in range(4):
        for kind in ("forward", "backward"):
            seen = {(s.microbatch, s.chunk) for s in order.steps if s.rank == rank and s.kind == kind}
            assert seen == {(m, c) for m in range(16) for c in range(4)}
    assert all(0 <= s.start_ms < s.end_ms <= order.duration_ms for s in order.steps)
    # the schedule's order: rank 0 starts with micro-batches 0-3 of chunk 0 (slots 0-3), and a
    # micro-batch's forward on chunk c reaches rank r after rank r-1 computed it
    first = [(s.microbatch, s.chunk) for s in order.steps if s.rank == 0 and s.kind == "forward"][:4]
    assert first == [(0, 0), (1, 0), (2, 0), (3, 0)]
    start = {(s.rank, s.kind, s.microbatch, s.chunk): s for s in order.steps}
    for r in range(1, 4):
        assert start[(r, "forward", 0, 0)].start_ms >= start[(r - 1, "forward", 0, 0)].end_ms


def test_another_iteration_and_a_trace_without_records():
    text = TRACE.read_text(errors="replace")
    assert computation_order(text, iteration=2).iteration == 2
    assert computation_order(text, iteration=99) is None
    assert computation_order("no trace here") is None


def test_the_hung_trace_stops_at_its_last_computation():
    order = computation_order(HUNG.read_text())
    assert order is not None and order.iteration == 1
    assert order.duration_ms == max(s.end_ms for s in order.steps)


def test_svg_has_a_box_and_tooltip_per_computation():
    order = computation_order(TRACE.read_text(errors="replace"))
    svg = pipeline_svg(order)
    assert svg.count("<title>rank ") == len(order.steps) == 512
    assert not re.search(r"<script|href=|url\(", svg)
    assert [tick_step(d) for d in (2047.0, 95.0, 0.5)] == [500.0, 20.0, 0.1]


def test_the_html_report_draws_the_trace_of_a_megatronapp_run(tmp_path):
    run = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, run)
    recipe = json.loads((run / "recipe.json").read_text())
    recipe["benchmark"]["parser"] = "megatronapp"
    (run / "recipe.json").write_text(json.dumps(recipe))
    (run / "nodes" / "gpu-a" / "smoke").mkdir()
    shutil.copy(TRACE, run / "nodes" / "gpu-a" / "smoke" / "native.out")
    report = collect(run)
    a, b = report.nodes
    assert a.pipeline is not None and a.pipeline.iteration == 20 and len(a.pipeline.steps) == 512
    assert b.pipeline is None  # no trace on gpu-b
    html = render(report, "html")
    assert html.count("<h2>Pipeline computation order</h2>") == 1
    assert "gpu-a: iteration 20 of 20, 4 pipeline ranks x 4 model chunks, 16 micro-batches" in html
    assert json.loads(render(report, "json"))["nodes"][0]["pipeline"]["record"] == "smoke/native.out"


def test_no_section_for_another_parser():
    assert all(n.pipeline is None for n in collect(SAMPLE).nodes)
    assert "Pipeline computation order" not in render(collect(SAMPLE), "html")
