"""An inline SVG chart of benchmark results against their references (no scripts, no URLs).

One block per metric, one row per host, one scale per metric (hosts of a metric compare;
different metrics never share an axis). A row gets a bar only when there is something to
compare it with: a threshold (black tick) or the published figure (blue dashed tick); the
scale runs from 0 to the largest of the values and references (+10 %). The bar is green when
it passes its threshold, red when it misses, grey without a threshold. Repeated measurements
draw the bar to the median and a whisker from min to max. A number with nothing to compare
against is written out, without a bar.
"""

from __future__ import annotations

from html import escape

from envbuild.report.model import Benchmark
from envbuild.report.render_md import fmt_num

COLORS = {True: "#2e8540", False: "#c62828", None: "#8a8f98"}
THRESHOLD, PUBLISHED = "#111111", "#1f5fbf"
LABEL_W, VALUE_W, ROW_H, HEAD_H = 230, 300, 26, 22


def compared(b: Benchmark) -> bool:
    """A row is drawn as a bar only when it has a reference to be read against."""
    return b.value is not None and (b.threshold is not None or b.published is not None)


def metric_scale(rows: list[Benchmark]) -> float:
    """The top of one metric's axis: the largest value or reference, plus 10 %."""
    top = 0.0
    for b in rows:
        for v in (b.value, b.threshold, b.published, b.spread.max if b.spread else None):
            if v is not None:
                top = max(top, abs(v))
    return top * 1.1 or 1.0


def value_text(b: Benchmark) -> str:
    text = f"{fmt_num(b.value)} {b.unit}".strip()
    if b.spread:
        text += f" (median of {b.spread.n}, {fmt_num(b.spread.min)}-{fmt_num(b.spread.max)})"
    refs = []
    if b.threshold is not None:
        refs.append(f"{'min' if b.higher_is_better else 'max'} {fmt_num(b.threshold)}")
    if b.published is not None:
        refs.append(f"published {fmt_num(b.published)}")
    return text + (f" [{', '.join(refs)}]" if refs else "")


def bar_chart(rows: list[tuple[str, Benchmark]], width: int = 960) -> str:
    """HTML for ``rows`` of (host, benchmark): an SVG of the metrics that have a reference, then
    the numbers of those that have none (no bar); '' when nothing was measured."""
    rows = [(h, b) for h, b in rows if b.value is not None]
    if not rows:
        return ""
    metrics: dict[str, list[tuple[str, Benchmark]]] = {}
    for host, b in rows:
        metrics.setdefault(b.name, []).append((host, b))
    drawn = {m: g for m, g in metrics.items() if any(compared(b) for _, b in g)}
    rest = {m: g for m, g in metrics.items() if m not in drawn}
    parts = [_svg(drawn, width)] if drawn else []
    if rest:
        items = "; ".join(f"{name}: " + ", ".join(f"{host} {value_text(b)}" for host, b in group)
                          for name, group in rest.items())
        parts.append(f'<p class="uncompared">No threshold or published figure to compare with, so no bar: '
                     f"{escape(items)}</p>")
    return "\n".join(parts)


def _svg(metrics: dict[str, list[tuple[str, Benchmark]]], width: int) -> str:
    bar_w = width - LABEL_W - VALUE_W
    n_rows = sum(len(g) for g in metrics.values())
    height = HEAD_H * len(metrics) + ROW_H * n_rows + 44
    out = [f'<svg role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="sans-serif" font-size="12" class="bench-chart">',
           "<title>benchmark results against thresholds and published figures</title>"]
    y = 6
    for name, group in metrics.items():
        scale = metric_scale([b for _, b in group if compared(b)])
        unit = next((b.unit for _, b in group if b.unit), "")
        out.append(f'<text x="4" y="{y + 15}" font-weight="bold">{escape(name)}'
                   f'{escape(f" ({unit})" if unit else "")}</text>')
        y += HEAD_H
        for host, b in group:
            out += _row(host, b, y, bar_w, scale)
            y += ROW_H
    out.append(f'<text x="4" y="{height - 24}" fill="#555">bar: measured, from 0 (median when repeated, whisker: '
               "min to max); one scale per metric; no bar: nothing to compare with</text>")
    out.append(f'<text x="4" y="{height - 8}"><tspan fill="{THRESHOLD}">black tick: threshold</tspan>; '
               f'<tspan fill="{PUBLISHED}">blue dashed tick: published figure</tspan></text>')
    out.append("</svg>")
    return "\n".join(out)


def _row(host: str, b: Benchmark, y: int, bar_w: int, scale: float) -> list[str]:
    out = [f'<text x="{LABEL_W - 8}" y="{y + 16}" text-anchor="end">{escape(host)}</text>']
    if not compared(b):
        text = value_text(b) + "  (nothing to compare with)"
        out.append(f'<text x="{LABEL_W}" y="{y + 16}" class="value-only">{escape(text)}</text>')
        return out

    def x(v: float) -> float:
        return LABEL_W + bar_w * max(0.0, v) / scale

    assert b.value is not None
    out.append(f'<rect x="{LABEL_W}" y="{y + 5}" width="{bar_w}" height="16" fill="#eef0f3"/>')
    out.append(f'<rect x="{LABEL_W}" y="{y + 5}" width="{max(1.0, x(b.value) - LABEL_W):.1f}" height="16" '
               f'fill="{COLORS[b.passed]}" class="bar"><title>{escape(value_text(b))}</title></rect>')
    if b.spread:
        lo, hi, mid = x(b.spread.min), x(b.spread.max), y + 13
        out.append(f'<path d="M{lo:.1f} {mid - 4}V{mid + 4}M{lo:.1f} {mid}H{hi:.1f}M{hi:.1f} {mid - 4}V{mid + 4}" '
                   f'stroke="#333" stroke-width="1.5" fill="none" class="spread"><title>'
                   f'{escape(f"min {fmt_num(b.spread.min)}, max {fmt_num(b.spread.max)} over {b.spread.n} runs")}'
                   "</title></path>")
    if b.threshold is not None:
        tx = x(b.threshold)
        out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y + 1}" y2="{y + 25}" stroke="{THRESHOLD}" '
                   f'stroke-width="2.5" class="threshold"><title>threshold {fmt_num(b.threshold)}</title></line>')
    if b.published is not None:
        px = x(b.published)
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y + 1}" y2="{y + 25}" stroke="{PUBLISHED}" '
                   f'stroke-width="2.5" stroke-dasharray="4 2" class="published"><title>published '
                   f'{escape(fmt_num(b.published))}{escape(f" ({b.published_source})" if b.published_source else "")}'
                   "</title></line>")
    out.append(f'<text x="{LABEL_W + bar_w + 8}" y="{y + 16}">{escape(value_text(b))}</text>')
    return out
