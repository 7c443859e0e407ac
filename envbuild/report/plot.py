"""An inline SVG bar chart of benchmark results against thresholds (no scripts, no URLs).

Each row is one (host, metric). Rows of the same metric share a scale (so hosts compare);
different metrics never share an axis. A dark tick marks the threshold; the bar is green when it
passes, red when it misses, grey without a threshold.
"""

from __future__ import annotations

from html import escape

from envbuild.report.model import Benchmark
from envbuild.report.render_md import fmt_num

COLORS = {True: "#2e8540", False: "#c62828", None: "#8a8f98"}


def bar_chart(rows: list[tuple[str, Benchmark]], width: int = 760) -> str:
    """SVG text for ``rows`` of (host, benchmark); '' when nothing was measured."""
    rows = [(h, b) for h, b in rows if b.value is not None]
    if not rows:
        return ""
    label_w, value_w, row_h = 300, 120, 26
    bar_w = width - label_w - value_w
    height = row_h * len(rows) + 30
    out = [f'<svg role="img" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           "<title>benchmark results vs thresholds</title>"]
    scales: dict[str, float] = {}
    for _, b in rows:
        scales[b.name] = max(scales.get(b.name, 0.0), abs(b.value), abs(b.threshold or 0.0))
    for i, (host, b) in enumerate(rows):
        y = 10 + i * row_h
        scale = scales[b.name] * 1.15 or 1.0
        w = max(1.0, bar_w * b.value / scale)
        label = escape(f"{host}  {b.name}")
        out.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">{label}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 4}" width="{bar_w}" height="16" fill="#eef0f3"/>')
        out.append(f'<rect x="{label_w}" y="{y + 4}" width="{w:.1f}" height="16" fill="{COLORS[b.passed]}">'
                   f"<title>{escape(f'{fmt_num(b.value)} {b.unit}')}</title></rect>")
        if b.threshold is not None:
            tx = label_w + bar_w * b.threshold / scale
            out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y}" y2="{y + 24}" stroke="#111" stroke-width="2">'
                       f"<title>threshold {b.threshold:g}</title></line>")
        text = f"{fmt_num(b.value)} {b.unit}".strip()
        if b.threshold is not None:
            text += f" ({'min' if b.higher_is_better else 'max'} {fmt_num(b.threshold)})"
        out.append(f'<text x="{label_w + bar_w + 6}" y="{y + 16}">{escape(text)}</text>')
    legend_y = height - 8
    out.append(f'<text x="{label_w}" y="{legend_y}" fill="#555">bar: measured (one scale per metric); '
               "black tick: threshold</text>")
    out.append("</svg>")
    return "\n".join(out)
