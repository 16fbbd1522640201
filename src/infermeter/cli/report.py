"""`infermeter report`: render one or more results files as a console table, markdown, HTML or CSV; the HTML
report also shows an explain record given with `--explain`."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from infermeter.cli.common import stderr, stdout
from infermeter.cli.options import ALLOW_MIXED_PRECISION
from infermeter.core.errors import UsageError
from infermeter.core.files import write_text_atomically
from infermeter.report.merged import report_table
from infermeter.report.render import FORMATS, format_of, load_report, render
from infermeter.results.explain import read_explain


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="table (console), md, html or csv. Default: from the -o suffix, else table.",
)
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Write the report to this file.")
@click.option(
    "--explain",
    "explain_path",
    type=click.Path(path_type=Path),
    help="An `infermeter explain -o FILE.json` record: the HTML report shows it in an Explain section.",
)
@ALLOW_MIXED_PRECISION
def report(
    results: tuple[Path, ...],
    fmt: str | None,
    output: Path | None,
    explain_path: Path | None,
    allow_mixed_precision: bool,
) -> None:
    """Render results files (several are merged, their differences shown) as a table, markdown, HTML or CSV."""
    if fmt is None:
        fmt = format_of(output) if output is not None else "table"
    if fmt == "table" and output is not None:
        raise UsageError("--format table prints to the console; for a file use --format md, html or csv")
    if explain_path is not None and fmt != "html":
        raise UsageError(f"--explain adds a section to the HTML report; {fmt} has none (use -o report.html)")
    explain = read_explain(explain_path) if explain_path is not None else None
    merged = load_report(results)
    if fmt == "table":
        from infermeter.report.terminal import print_summary

        print_summary(report_table(merged, allow_mixed_precision))
        for name, diffs in merged.env_differences:
            stdout.print(f"[yellow]warning[/] environment of {escape(name)} differs: {escape('; '.join(diffs))}")
        return
    text = render(merged, fmt, allow_mixed_precision, explain)
    if output is None:
        click.echo(text, nl=False)
        return
    write_text_atomically(output, text)
    stderr.print(f"{fmt} report: {escape(str(output))} ({len(merged.cases)} cases)")
