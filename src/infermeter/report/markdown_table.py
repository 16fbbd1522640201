"""A GitHub-flavoured markdown table and its cells: what every markdown section of the report is written with."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.figures.metric_registry import NUMERIC_COLUMNS


def markdown_cell(text: str) -> str:
    # A pipe would end the cell; a newline would end the row.
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table, numeric columns right-aligned."""
    header = "| " + " | ".join(markdown_cell(c) for c in columns) + " |"
    rule = "|" + "|".join("---:" if c in NUMERIC_COLUMNS else "---" for c in columns) + "|"
    body = ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return "\n".join([header, rule, *body])
