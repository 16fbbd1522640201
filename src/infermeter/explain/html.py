"""The HTML form of an explain record (`infermeter explain -o explain.html`): one self-contained page in the
report's style, with each block's time per engine as bars side by side (blocks sorted by difference), the
engines' rows and the findings. Pure: record in, text out."""

from __future__ import annotations

from html import escape
from typing import Any

from infermeter.explain.console import ENGINE_COLUMNS, engine_cells, microseconds
from infermeter.explain.records import ExplainRecord
from infermeter.report.html import _STYLE, _plotly_js, _table

# Blocks drawn as bars; the rest are summed into one bar.
CHART_BLOCKS = 20


def blocks_figure(record: ExplainRecord) -> Any:
    """Horizontal bars: one group per block (largest difference on top), one bar per profiled engine."""
    import plotly.graph_objects as go

    shown, rest = record.blocks[:CHART_BLOCKS], record.blocks[CHART_BLOCKS:]
    labels = [f"{b.label} ({'+'.join(b.op_types)})"[:60] for b in shown] + (
        [f"{len(rest)} more blocks"] if rest else []
    )
    figure = go.Figure()
    for engine in record.profiled_engines():
        times = [b.time_us.get(engine, 0.0) for b in shown] + (
            [sum(b.time_us.get(engine, 0.0) for b in rest)] if rest else []
        )
        figure.add_trace(go.Bar(name=engine, y=labels, x=times, orientation="h"))
    figure.update_layout(
        template="plotly_white",
        barmode="group",
        height=max(320, 36 * len(labels) * max(1, len(record.engines)) // 2),
        margin={"l": 260, "r": 20, "t": 30, "b": 60},
        xaxis_title="µs per run (median over the profiled runs)",
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": -0.12},
    )
    return figure


def _engine_rows(record: ExplainRecord) -> list[list[str]]:
    return [[*engine_cells(e), e.error or "; ".join(e.notes)] for e in record.engines]


def _blocks_table(record: ExplainRecord) -> str:
    engines = record.profiled_engines()
    rows = [
        [
            b.label,
            "+".join(b.op_types),
            *(f"{b.time_us.get(e, 0.0):,.1f}" for e in engines),
            microseconds(b.difference_us),
            f"{b.difference_share:.0%}",
            " | ".join(f"{e}: {k}" for e, k in b.kernels.items() if k),
        ]
        for b in record.blocks
    ]
    columns = ["block", "ops", *(f"{e} µs" for e in engines), "diff µs", "diff share", "kernels"]
    return _table(columns, rows, "explain-blocks")


def render_explain_html(record: ExplainRecord) -> str:
    """The whole page as text (UTF-8 when written)."""
    from infermeter.core.extras import require_extra

    require_extra("html", ["plotly"], "the HTML form of explain")
    import plotly.io as pio

    title = f"infermeter explain: {record.model}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{_STYLE}</style>",
        f"<script>{_plotly_js()}</script>",
        "</head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">batch {record.batch} · {record.threads} thread(s) · {escape(record.precision)} · '
        f"{record.node_count} nodes · {record.iterations} iterations per run</p>",
        '<section class="chart" id="section-explain-blocks"><h2>Time per block, engine by engine</h2>',
        '<p class="caption">Each block is a union of whole units on every engine, sorted by the difference '
        "between the engines.</p>",
    ]
    if record.profiled_engines():
        parts.append(
            pio.to_html(
                blocks_figure(record),
                full_html=False,
                include_plotlyjs=False,
                div_id="chart-explain-blocks",
                config={"displaylogo": False},
            )
        )
    columns = [*ENGINE_COLUMNS, "notes"]
    parts += ["</section><h2>Engines</h2>", _table(columns, _engine_rows(record), "explain-engines")]
    parts += ["<h2>Blocks</h2>", _blocks_table(record)]
    if record.findings:
        parts.append('<h2>Findings</h2><ul class="notes" id="explain-findings">')
        parts += [f"<li><strong>{escape(f.code)}</strong> {escape(f.text)}</li>" for f in record.findings]
        parts.append("</ul>")
    parts += [f'<p class="caption">note: {escape(n)}</p>' for n in record.notes]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
