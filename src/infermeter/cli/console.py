"""The console side of a sweep: the progress display while it runs, the tables and warnings after."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from infermeter.cli.common import stderr, stdout
from infermeter.interrupts import Terminated, terminate_as_interrupt
from infermeter.measure.plan import PlanItem
from infermeter.measure.speedprobe import SpeedTrace
from infermeter.report.summary import NUMERIC_COLUMNS, PER_SHAPE_COLUMNS, SummaryTable, group_warnings, per_shape_rows
from infermeter.results.io import write_results
from infermeter.results.schema import CaseResult, ResultsFile

# The summary's numeric columns plus those of the per-shape and cold-start tables.
CONSOLE_NUMERIC_COLUMNS = NUMERIC_COLUMNS | {
    "streams",
    "runs",
    "process s",
    "import s",
    "convert s",
    "compile s",
    "session s",
    "first ms",
    "to first result s",
}


def print_table(compact: SummaryTable, title: str | None = None) -> None:
    """A summary-style table on stdout, its constant columns moved to the caption."""
    columns, rows, caption = compact.compact()
    rich_table = Table(header_style="bold", title=title, caption=escape(caption) or None, caption_justify="left")
    for column in columns:
        rich_table.add_column(column, justify="right" if column in CONSOLE_NUMERIC_COLUMNS else "left", no_wrap=True)
    for row in rows:
        rich_table.add_row(*(escape(cell) for cell in row))
    stdout.print(rich_table)


def print_summary(table: SummaryTable, cases: Sequence[CaseResult] = ()) -> None:
    """The summary table on stdout (constant columns moved to the caption), per-shape statistics of dynamic
    runs, grouped warnings and footnotes."""
    print_table(table)
    shape_rows = per_shape_rows(cases)
    if shape_rows:
        print_table(SummaryTable(PER_SHAPE_COLUMNS, shape_rows), title="dynamic shapes: per-shape latency")
    for group in group_warnings(table.warnings):
        where = ", ".join(f"{label} ({detail})" if detail else label for label, detail in group.cases)
        stdout.print(f"[yellow]warning[/] {escape(f'{group.code}: {group.title}: {where}')}", soft_wrap=True)
        stdout.print(f"  [dim]→ {escape(group.remedy)}[/]", soft_wrap=True)
    for note in table.footnotes:
        stdout.print(escape(note), soft_wrap=True)


def run_plan_with_progress(plan: list[PlanItem], results: ResultsFile, path: Path, isolate: bool) -> SpeedTrace:
    """Run the sweep under a progress display, with the machine-speed probe read before, between rounds and
    after (kept in the results file as `machine_speed`)."""
    from infermeter.measure.sweep import SweepEvent, run_sweep

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        # Every redraw takes CPU from the case being timed (on a 2-core machine, from one of its threads):
        # twice a second is enough for a person to follow.
        refresh_per_second=2,
    )
    task = progress.add_task("starting", total=len(plan))

    def on_event(event: SweepEvent) -> None:
        case = event.case
        label = f"{case.model} · {case.backend} {case.precision} b{case.batch} {case.shape_mode}"
        if event.kind in ("done", "skipped"):
            progress.advance(task)
            if event.result is not None and event.result.status != "ok":
                text = f"{label}: {event.result.error}"
                progress.console.print(f"[red]{event.result.status}[/] {escape(text)}", soft_wrap=True)
        else:
            progress.update(task, description=escape(f"{label}: {event.phase or 'starting'}"))

    trace = SpeedTrace()
    trace.read()
    try:
        with terminate_as_interrupt(), progress:
            run_sweep(plan, results, path, isolate=isolate, on_event=on_event, trace=trace)
        trace.read()
        results.extra["machine_speed"] = trace.to_dict()
        write_results(path, results)
    except KeyboardInterrupt as exc:
        finished = len(results.cases)
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        stderr.print(f"{how}: {finished} finished case(s) are saved in {path}; continue with --resume {path}")
        raise SystemExit(143 if isinstance(exc, Terminated) else 130) from None
    return trace
