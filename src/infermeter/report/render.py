"""A report file from results files: reading and merging them, the format an output path asks for, and the
rendering in that format (the CLI's `report` and the API's `Results.report` share it)."""

from __future__ import annotations

from pathlib import Path

from infermeter.core.errors import UsageError
from infermeter.report.merged import MergedReport, SourceFile, merge_results
from infermeter.results.explain import ExplainRecord

FORMATS = ("table", "md", "html", "csv")
_SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".csv": "csv"}


def load_report(paths: tuple[Path, ...]) -> MergedReport:
    """Read and merge the results files (ResultsError on an unreadable one)."""
    from infermeter.results.io import read_results

    return merge_results([SourceFile(str(path), read_results(path)) for path in paths])


def render(
    report: MergedReport, fmt: str, allow_mixed_precision: bool = False, explain: ExplainRecord | None = None
) -> str:
    """The report in a file format (md, html, csv); an explain record has its section in the HTML report only
    (UsageError for another format)."""
    if explain is not None and fmt != "html":
        raise UsageError(f"--explain adds a section to the HTML report; {fmt} has none (use --format html)")
    if fmt == "md":
        from infermeter.report.markdown import render_markdown

        return render_markdown(report, allow_mixed_precision)
    if fmt == "html":
        from infermeter.report.html import render_html

        return render_html(report, allow_mixed_precision, explain)
    from infermeter.report.csv import render_csv

    return render_csv(report)


def format_of(output: Path) -> str:
    """The report format an output file's suffix asks for (md, html, csv); UsageError when it says none."""
    fmt = _SUFFIXES.get(output.suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format from {output}; add --format md, html or csv")
    return fmt
