"""What every page of the HTML report shares: the style, the head (plotly.js inlined once, no network) and the
tables (the report's page and the explain page, `report.explain_section`)."""

from __future__ import annotations

from html import escape

from infermeter.figures.metric_registry import NUMERIC_COLUMNS

STYLE = """
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
#explain-engines td:last-child, #explain-blocks td:last-child { white-space: normal; min-width: 16em; }
"""


def html_table(
    columns: list[str], rows: list[list[str]], table_id: str, numeric: frozenset[str] = NUMERIC_COLUMNS
) -> str:
    """A table of text cells (the `numeric` columns right-aligned, failed rows marked), scrolling when too wide."""
    head = "".join(f'<th class="{"num" if c in numeric else ""}">{escape(c)}</th>' for c in columns)
    body = []
    for row in rows:
        failed = any(cell in ("FAILED", "CRASHED", "TIMEOUT", "UNAVAILABLE") for cell in row)
        cells = []
        for column, cell in zip(columns, row, strict=True):
            css = "num" if column in numeric else (cell if column == "parity" else "")
            cells.append(f'<td class="{css}">{escape(cell)}</td>')
        body.append(f'<tr class="{"failed" if failed else "case"}">{"".join(cells)}</tr>')
    # A table wider than the page (many columns, long backend labels) scrolls by itself, not the whole page.
    table = f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return f'<div class="wide">{table}</div>'


def page_head(title: str) -> list[str]:
    """The start of a self-contained page: its title, the report's style and plotly.js inlined (no network)."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{STYLE}</style>",
        f"<script>{_plotly_js()}</script>",
        "</head><body>",
    ]


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    # "</script" inside the library would end the tag early; plotly's bundle does not contain it, but be safe.
    return get_plotlyjs().replace("</script", "<\\/script")
