"""An inline SVG of a pipeline's computation order (no scripts, no URLs): one row per rank, one
box per forward or backward pass of a micro-batch on a model chunk, placed at its measured start
and end (``envbuild.smoke.pipeline_trace.Order``). Forward boxes are the chunk's colour, light;
backward boxes the same colour, dark; a box wide enough carries its micro-batch number, and
every box a tooltip. What MegatronApp's visualize_trace.py draws from the same trace."""

from __future__ import annotations

import math
from html import escape

from envbuild.report.model import PipelineOrder
from envbuild.smoke.pipeline_trace import Order

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"]
LABEL_W, ROW_H, TOP, AXIS_H, LEGEND_H = 70, 30, 8, 24, 26


def tick_step(duration_ms: float, ticks: int = 8) -> float:
    """A round step (1, 2 or 5 x 10^n ms) giving about ``ticks`` ticks over the duration."""
    raw = max(duration_ms / ticks, 1e-3)
    base = 10.0 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw)


def pipeline_svg(order: Order | PipelineOrder, width: int = 960) -> str:
    plot_w = width - LABEL_W - 10
    scale = plot_w / order.duration_ms if order.duration_ms > 0 else 0.0
    height = TOP + order.ranks * ROW_H + AXIS_H + LEGEND_H
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="computation order of iteration {order.iteration}" font-family="sans-serif" font-size="11">']
    for rank in range(order.ranks):
        y = TOP + rank * ROW_H
        parts.append(f'<text x="4" y="{y + ROW_H / 2 + 4:.1f}">rank {rank}</text>'
                     f'<rect x="{LABEL_W}" y="{y}" width="{plot_w}" height="{ROW_H - 4}" fill="#f3f4f6"/>')
    for s in order.steps:
        x, w = LABEL_W + s.start_ms * scale, max((s.end_ms - s.start_ms) * scale, 0.5)
        y = TOP + s.rank * ROW_H
        color = PALETTE[s.chunk % len(PALETTE)]
        tip = (f"rank {s.rank}: {s.kind} of micro-batch {s.microbatch}, chunk {s.chunk} (slot {s.slot}), "
               f"{s.start_ms:.1f}-{s.end_ms:.1f} ms")
        parts.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{ROW_H - 4}" fill="{color}" '
                     f'fill-opacity="{0.45 if s.kind == "forward" else 1.0}" stroke="#ffffff" stroke-width="0.5">'
                     f'<title>{escape(tip)}</title></rect>')
        if w >= 12:
            parts.append(f'<text x="{x + w / 2:.2f}" y="{y + ROW_H / 2 + 2:.1f}" text-anchor="middle" '
                         f'font-size="9">{s.microbatch}</text>')
    axis_y = TOP + order.ranks * ROW_H
    step = tick_step(order.duration_ms)
    t = 0.0
    while t <= order.duration_ms + 1e-9:
        x = LABEL_W + t * scale
        parts.append(f'<line x1="{x:.2f}" y1="{axis_y - 2}" x2="{x:.2f}" y2="{axis_y + 4}" stroke="#111"/>'
                     f'<text x="{x:.2f}" y="{axis_y + 16}" text-anchor="middle">{t:g}</text>')
        t += step
    parts.append(f'<text x="4" y="{axis_y + 16}">ms</text>')
    ly = axis_y + AXIS_H + 4
    x = LABEL_W
    for chunk in range(order.chunks):
        color = PALETTE[chunk % len(PALETTE)]
        parts.append(f'<rect x="{x}" y="{ly}" width="14" height="12" fill="{color}" fill-opacity="0.45"/>'
                     f'<rect x="{x + 15}" y="{ly}" width="14" height="12" fill="{color}"/>'
                     f'<text x="{x + 34}" y="{ly + 10}">chunk {chunk}</text>')
        x += 100
    parts.append(f'<text x="{x + 10}" y="{ly + 10}">light: forward, dark: backward; the number is the '
                 'micro-batch</text></svg>')
    return "".join(parts)


def pipeline_section(host: str, order: Order | PipelineOrder) -> str:
    """The report's block for one node: a heading line, the picture, where it was read."""
    head = (f"{escape(host)}: iteration {order.iteration} of {order.iterations}, {order.ranks} pipeline ranks x "
            f"{order.chunks} model chunks, {order.microbatches} micro-batches, {order.duration_ms:.0f} ms")
    return (f'<p>{head}</p><div class="pipeline">{pipeline_svg(order)}</div>'
            f'<p style="color:#6b7280;font-size:12px">read from the trace the run printed: {escape(order.source)}</p>')
