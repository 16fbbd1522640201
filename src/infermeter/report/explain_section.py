"""The HTML form of an explain record, one renderer for both places it appears: the Explain section of the report
(`infermeter report results.json --explain explain.json`) and the page of its own (`infermeter explain -o
explain.html`). Each block's time per engine as bars side by side (blocks sorted by difference), the engines'
rows (P50, attributed, data movement, unattributed), the blocks table and the findings. The engines table's cells
are the console's too (`engine_cells`). Pure: record in, text out."""

from __future__ import annotations

from html import escape
from typing import Any

from infermeter.figures.number_format import format_number
from infermeter.report.html_page import html_table, page_head
from infermeter.results.explain import Block, EngineSummary, ExplainRecord

# Blocks drawn as bars; the rest are summed into one bar.
CHART_BLOCKS = 20
# The engines table's columns, for the console and the HTML (which adds the engine's notes).
ENGINE_COLUMNS = (
    "engine",
    "precision",
    "P50 µs",
    "attributed µs",
    "data movement µs",
    "unattributed µs",
    "nodes aligned",
)
_NUMERIC = frozenset({*ENGINE_COLUMNS[2:], "diff µs", "diff share"})


def microseconds(value: float | None) -> str:
    """A time in µs as every explain table shows it (one decimal, "—" when unknown)."""
    return format_number(value, ",.1f")


def engine_cells(engine: EngineSummary) -> list[str]:
    """An engine's row of the engines table (ENGINE_COLUMNS), as plain text."""
    coverage = format_number(engine.coverage, ".0%")
    figures = (engine.p50_us, engine.attributed_us, engine.data_movement_us, engine.unattributed_us)
    return [engine.engine, engine.precision or "—", *(microseconds(value) for value in figures), coverage]


def block_label(block: Block) -> str:
    """A block as the chart's axis names it: its label and its operator types, cut to fit."""
    return f"{block.label} ({'+'.join(block.op_types)})"[:60]


def by_difference(record: ExplainRecord) -> list[Block]:
    """The record's blocks, largest difference between the engines first (a record made by explain is already
    in that order; one edited by hand may not be)."""
    return sorted(record.blocks, key=lambda block: -block.difference_us)


def blocks_figure(record: ExplainRecord) -> Any:
    """Horizontal bars: one group per block (largest difference on top), one bar per profiled engine."""
    import plotly.graph_objects as go

    blocks = by_difference(record)
    shown, rest = blocks[:CHART_BLOCKS], blocks[CHART_BLOCKS:]
    labels = [block_label(b) for b in shown] + ([f"{len(rest)} more blocks"] if rest else [])
    figure = go.Figure()
    engines = record.profiled_engines()
    for engine in engines:
        times = [b.time_us.get(engine, 0.0) for b in shown] + (
            [sum(b.time_us.get(engine, 0.0) for b in rest)] if rest else []
        )
        figure.add_trace(go.Bar(name=engine, y=labels, x=times, orientation="h"))
    figure.update_layout(
        template="plotly_white",
        barmode="group",
        height=max(320, 100 + 16 * len(labels) * max(2, len(engines))),
        margin={"l": 20, "r": 20, "t": 30, "b": 60},
        xaxis_title="µs per run (median over the profiled runs)",
        yaxis={"autorange": "reversed", "automargin": True},
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
            *(microseconds(b.time_us.get(e)) for e in engines),
            microseconds(b.difference_us),
            f"{b.difference_share:.0%}",
            " | ".join(f"{e}: {k}" for e, k in b.kernels.items() if k),
        ]
        for b in by_difference(record)
    ]
    columns = ["block", "ops", *(f"{e} µs" for e in engines), "diff µs", "diff share", "kernels"]
    return html_table(columns, rows, "explain-blocks", _NUMERIC | {f"{e} µs" for e in engines})


def explain_section(record: ExplainRecord) -> list[str]:
    """The Explain section: what was explained, the bars per block, the engines, the blocks and the findings."""
    import plotly.io as pio

    profiled = bool(record.profiled_engines())
    parts = [
        # "chart" only with the chart in it: the page holds one plot per section.chart.
        f'<section class="{"chart" if profiled else "explain"}" id="section-explain">',
        f"<h2>Explain: where each engine spends its time on {escape(record.model)}</h2>",
        f'<p class="meta">batch {record.batch} · {record.threads} thread(s) · {escape(record.precision)} · '
        f"{record.node_count} nodes · {record.iterations} iterations per run</p>",
        '<h3>Time per block, engine by engine</h3><p class="caption">Each block is a union of whole units on every '
        "engine (kernels, primitives, modules), sorted by the difference between the engines.</p>",
    ]
    if profiled:
        figure = blocks_figure(record)
        parts.append(
            pio.to_html(
                figure,
                full_html=False,
                include_plotlyjs=False,
                div_id="chart-explain-blocks",
                config={"displaylogo": False},
            )
        )
    columns = [*ENGINE_COLUMNS, "notes"]
    parts += [
        '<h3>Engines</h3><p class="caption">Attributed: the sum of the engine\'s units (data movement included); '
        "unattributed: P50 minus attributed.</p>",
        html_table(columns, _engine_rows(record), "explain-engines", _NUMERIC),
    ]
    if record.findings:
        parts.append('<h3>Findings</h3><ul class="notes" id="explain-findings">')
        parts += [
            f"<li><strong>{escape(f.code)}</strong>{escape(f' (block {f.block})' if f.block else '')}: "
            f"{escape(f.text)}</li>"
            for f in record.findings
        ]
        parts.append("</ul>")
    parts += ["<h3>Blocks</h3>", _blocks_table(record)]
    parts += [f'<p class="caption">note: {escape(n)}</p>' for n in record.notes]
    parts.append("</section>")
    return parts


def render_explain_page(record: ExplainRecord) -> str:
    """The explain record as a page of its own (UTF-8 when written): the report's head, then its Explain section."""
    from infermeter.core.extras import require_extra

    require_extra("html", ["plotly"], "the HTML form of explain")
    title = f"infermeter explain: {record.model}"
    parts = [*page_head(title), f"<h1>{escape(title)}</h1>", *explain_section(record), "</body></html>"]
    return "\n".join(parts) + "\n"
