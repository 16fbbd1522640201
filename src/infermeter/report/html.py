"""HTML report: one self-contained page (plotly.js inlined once, no network) with the summary table, the charts of
`report.charts`, warnings and the environment. Pure: results in, text out; deterministic for the same input."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from infermeter.figures.metric_registry import NUMERIC_COLUMNS
from infermeter.report.chart_list import report_charts
from infermeter.report.markdown import fastest_lines
from infermeter.report.merged import MergedReport, environment_summary, report_table
from infermeter.report.summary import group_warnings
from infermeter.results.schema import CaseWarning

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #1d2330; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #dde1e8; }
.meta, .caption { color: #5b6475; font-size: 0.92em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.93em; }
th, td { padding: 0.3em 0.8em; border-bottom: 1px solid #e6e9ef; text-align: left; white-space: nowrap; }
th { background: #f4f6f9; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { color: #b42318; } td.FAIL { color: #b42318; font-weight: 600; } td.pass { color: #067647; }
.warning { background: #fff8e6; border-left: 4px solid #f5a524; padding: 0.5em 0.8em; margin: 0.5em 0; }
.envdiff { background: #fdecea; border-left: 4px solid #d92d20; padding: 0.5em 0.8em; margin: 0.5em 0; }
.chart { margin: 1em 0 2em 0; } ul.notes li { margin: 0.2em 0; }
.wide { overflow-x: auto; }
"""


def _table(columns: list[str], rows: list[list[str]], table_id: str) -> str:
    head = "".join(f'<th class="{"num" if c in NUMERIC_COLUMNS else ""}">{escape(c)}</th>' for c in columns)
    body = []
    for row in rows:
        failed = any(cell in ("FAILED", "CRASHED", "TIMEOUT", "UNAVAILABLE") for cell in row)
        cells = []
        for column, cell in zip(columns, row, strict=True):
            css = "num" if column in NUMERIC_COLUMNS else (cell if column == "parity" else "")
            cells.append(f'<td class="{css}">{escape(cell)}</td>')
        body.append(f'<tr class="{"failed" if failed else "case"}">{"".join(cells)}</tr>')
    # A table wider than the page (many columns, long backend labels) scrolls by itself, not the whole page.
    table = f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return f'<div class="wide">{table}</div>'


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    # "</script" inside the library would end the tag early; plotly's bundle does not contain it, but be safe.
    return get_plotlyjs().replace("</script", "<\\/script")


def _sources_lines(report: MergedReport) -> list[str]:
    """One line per results file (name, date, cases, command, speed drift), then a warning per differing environment."""
    lines: list[str] = []
    for source in report.files:
        command = " ".join(source.results.command)
        lines.append(
            f'<p class="meta"><code>{escape(source.name)}</code> · created {escape(source.results.created)} · '
            f"{len(source.results.cases)} cases" + (f" · <code>{escape(command)}</code>" if command else "")
            + _speed_note(source.results.extra.get("machine_speed")) + "</p>"
        )  # fmt: skip
    for name, diffs in report.env_differences:
        lines.append(
            f'<div class="envdiff"><strong>Environment of {escape(name)} differs from the first file:</strong> '
            f"{escape('; '.join(diffs))}. Figures across these files are not like-for-like.</div>"
        )
    return lines


def _chart_sections(report: MergedReport) -> list[str]:
    """A titled, captioned section per chart, plotly.js left out (the page inlines it once)."""
    import plotly.io as pio

    lines: list[str] = []
    for chart in report_charts(report):
        figure_html = pio.to_html(
            chart.figure,
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{chart.key}",
            config={"displaylogo": False, "responsive": True},
        )
        lines.append(f'<section class="chart" id="section-{chart.key}"><h2>{escape(chart.title)}</h2>')
        if chart.caption:
            lines.append(f'<p class="caption">{escape(chart.caption)}</p>')
        lines.append(figure_html + "</section>")
    return lines


def _warning_lines(warnings: Sequence[tuple[str, CaseWarning]]) -> list[str]:
    """The Warnings section, one block per warning code with its cases and remedy; nothing when there is none."""
    lines: list[str] = []
    groups = group_warnings(warnings)
    if groups:
        lines.append('<h2>Warnings</h2><div id="warnings">')
        for group in groups:
            where = ", ".join(f"{label} ({detail})" if detail else label for label, detail in group.cases)
            lines.append(
                f'<div class="warning"><strong>{escape(group.code)}</strong>: {escape(group.title)}: {escape(where)}'
                f"<br>→ {escape(group.remedy)}</div>"
            )
        lines.append("</div>")
    return lines


def render_html(report: MergedReport, allow_mixed_precision: bool = False) -> str:
    """The whole page as text (UTF-8 when written)."""
    from infermeter.core.extras import require_extra

    require_extra("html", ["plotly"], "the HTML report")
    table = report_table(report, allow_mixed_precision)
    columns, rows, caption = table.compact()
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>infermeter report</title>",
        f"<style>{_STYLE}</style>",
        f"<script>{_plotly_js()}</script>",
        "</head><body>",
        "<h1>infermeter report</h1>",
    ]
    parts += _sources_lines(report)
    parts.append("<h2>Results</h2>")
    if caption:
        parts.append(f'<p class="caption">{escape(caption)}</p>')
    parts.append(_table(columns, rows, "summary") if rows else "<p>No cases.</p>")
    if table.footnotes:
        parts.append('<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in table.footnotes) + "</ul>")
    fastest = fastest_lines(report.cases, allow_mixed_precision)
    if fastest:
        parts.append('<ul class="notes" id="speedups">' + "".join(f"<li>{escape(x)}</li>" for x in fastest) + "</ul>")
    parts += _chart_sections(report)
    parts += _warning_lines(table.warnings)
    parts.append("<h2>Environment</h2>")
    env_rows = [[label, value] for label, value in environment_summary(report.environment)]
    parts.append(_table(["", "value"], env_rows, "environment"))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _speed_note(block: object) -> str:
    """` · machine speed moved 42% during the run`, from the results file's machine-speed probe, when recorded."""
    moved = block.get("moved") if isinstance(block, dict) else None
    return f" · machine speed moved {moved:.0%} during the run" if isinstance(moved, int | float) else ""
