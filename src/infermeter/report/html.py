"""HTML report: one self-contained page (plotly.js inlined once, no network) with the summary table, the charts of
`report.charts`, warnings and the environment. Pure: results in, text out; deterministic for the same input."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from infermeter.report.chart_list import report_charts
from infermeter.report.html_page import html_table, page_head
from infermeter.report.markdown import fastest_lines
from infermeter.report.merged import MergedReport, environment_summary, report_table
from infermeter.report.summary import group_warnings
from infermeter.results.explain import ExplainRecord
from infermeter.results.schema import CaseWarning


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


def render_html(report: MergedReport, allow_mixed_precision: bool = False, explain: ExplainRecord | None = None) -> str:
    """The whole page as text (UTF-8 when written); with an explain record, its Explain section after the charts."""
    from infermeter.core.extras import require_extra
    from infermeter.report.explain_section import explain_section

    require_extra("html", ["plotly"], "the HTML report")
    table = report_table(report, allow_mixed_precision)
    columns, rows, caption = table.compact()
    parts = [*page_head("infermeter report"), "<h1>infermeter report</h1>"]
    parts += _sources_lines(report)
    parts.append("<h2>Results</h2>")
    if caption:
        parts.append(f'<p class="caption">{escape(caption)}</p>')
    parts.append(html_table(columns, rows, "summary") if rows else "<p>No cases.</p>")
    if table.footnotes:
        parts.append('<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in table.footnotes) + "</ul>")
    fastest = fastest_lines(report.cases, allow_mixed_precision)
    if fastest:
        parts.append('<ul class="notes" id="speedups">' + "".join(f"<li>{escape(x)}</li>" for x in fastest) + "</ul>")
    parts += _chart_sections(report)
    if explain is not None:
        parts += explain_section(explain)
    parts += _warning_lines(table.warnings)
    parts.append("<h2>Environment</h2>")
    env_rows = [[label, value] for label, value in environment_summary(report.environment)]
    parts.append(html_table(["", "value"], env_rows, "environment"))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _speed_note(block: object) -> str:
    """` · machine speed moved 42% during the run`, from the results file's machine-speed probe, when recorded."""
    moved = block.get("moved") if isinstance(block, dict) else None
    return f" · machine speed moved {moved:.0%} during the run" if isinstance(moved, int | float) else ""
