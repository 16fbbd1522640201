"""The console side of a sweep: the progress display while it runs, the tables and warnings after. The Python
API uses the same display and tables (rendered to text), so a notebook sees what the terminal sees."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.status import Status
from rich.table import Table

from infermeter.cli.common import stderr, stdout
from infermeter.interrupts import Terminated
from infermeter.report.coldstart import COLD_START_PHASE_COLUMNS
from infermeter.report.summary import (
    NUMERIC_COLUMNS,
    PER_SHAPE_COLUMNS,
    SummaryTable,
    group_warnings,
    per_shape_rows,
)
from infermeter.results.schema import CaseResult, CaseWarning

if TYPE_CHECKING:
    from infermeter.measure.sweep import SweepEvent

# The summary's numeric columns plus those of the per-shape and cold-start tables.
CONSOLE_NUMERIC_COLUMNS = NUMERIC_COLUMNS | {
    "streams",
    "runs",
    "process s",
    *COLD_START_PHASE_COLUMNS,
    "first ms",
    "to first result s",
}
# The width of piped output (see cli.common.stdout): a table rendered to text is as wide as the CLI prints it.
TEXT_WIDTH = 200


def print_table(compact: SummaryTable, title: str | None = None, console: Console = stdout) -> None:
    """A summary-style table on `console` (stdout), its constant columns moved to the caption."""
    columns, rows, caption = compact.compact()
    rich_table = Table(header_style="bold", title=title, caption=escape(caption) or None, caption_justify="left")
    for column in columns:
        rich_table.add_column(column, justify="right" if column in CONSOLE_NUMERIC_COLUMNS else "left", no_wrap=True)
    for row in rows:
        rich_table.add_row(*(escape(cell) for cell in row))
    console.print(rich_table)


def print_summary(table: SummaryTable, cases: Sequence[CaseResult] = (), console: Console = stdout) -> None:
    """The summary table on `console` (stdout; constant columns moved to the caption), per-shape statistics of
    dynamic runs, grouped warnings and footnotes."""
    print_table(table, console=console)
    shape_rows = per_shape_rows(cases)
    if shape_rows:
        title = "dynamic shapes: per-shape latency"
        print_table(SummaryTable(PER_SHAPE_COLUMNS, shape_rows), title=title, console=console)
    print_warnings(table.warnings, console)
    for note in table.footnotes:
        console.print(escape(note), soft_wrap=True)


def print_warnings(warnings: Sequence[tuple[str, CaseWarning]], console: Console = stdout) -> None:
    """(case label, warning) pairs grouped by code: one line naming the cases, one with the remedy."""
    for group in group_warnings(warnings):
        where = ", ".join(f"{label} ({detail})" if detail else label for label, detail in group.cases)
        console.print(f"[yellow]warning[/] {escape(f'{group.code}: {group.title}: {where}')}", soft_wrap=True)
        console.print(f"  [dim]→ {escape(group.remedy)}[/]", soft_wrap=True)


def render_text(draw: Callable[[Console], None], width: int = TEXT_WIDTH) -> str:
    """What `draw` prints, as plain text (no colour codes, even in a notebook) at most `width` columns wide."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, highlight=False, soft_wrap=False, force_jupyter=False)
    draw(console)
    return buffer.getvalue()


class ConsoleDisplay:
    """The bench run's BenchDisplay on the terminal (stderr): dim notes, spinners and a progress bar. With
    `exit_on_interrupt` (the CLI) an interrupted sweep exits 130 (Ctrl-C) or 143 (SIGTERM) after saying where
    its finished cases are; without it (the Python API) the KeyboardInterrupt goes on to the caller."""

    def __init__(self, exit_on_interrupt: bool = True) -> None:
        self.exit_on_interrupt = exit_on_interrupt

    def note(self, text: str) -> None:
        """A dim line on stderr."""
        stderr.print(f"[dim]{escape(text)}[/]", soft_wrap=True)

    def warn(self, text: str) -> None:
        """A line on stderr."""
        stderr.print(escape(text), soft_wrap=True)

    def status(self, text: str) -> Status:
        """A spinner on stderr."""
        return stderr.status(escape(text))

    @contextlib.contextmanager
    def progress(self, total: int) -> Iterator[Callable[[SweepEvent], None]]:
        """A progress bar of the sweep's plan items, naming the case in flight and printing each failure."""
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
        task = progress.add_task("starting", total=total)

        def on_event(event: SweepEvent) -> None:
            label = event.case.label
            if event.kind in ("done", "skipped"):
                progress.advance(task)
                if event.result is not None and event.result.status != "ok":
                    text = f"{label}: {event.result.error}"
                    progress.console.print(f"[red]{event.result.status}[/] {escape(text)}", soft_wrap=True)
            else:
                progress.update(task, description=escape(f"{label}: {event.phase or 'starting'}"))

        with progress:
            yield on_event

    def interrupted(self, exc: KeyboardInterrupt, finished: int, path: Path | None) -> None:
        """Where the finished cases are, then (with exit_on_interrupt) the exit."""
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        if path is None:
            stderr.print(f"{how}: {finished} finished case(s) are lost (no results file: pass output= to keep them)")
        else:
            resume = "--resume" if self.exit_on_interrupt else "`infermeter bench --resume`"
            where = escape(str(path))
            stderr.print(
                f"{how}: {finished} finished case(s) are saved in {where}; continue with {resume} {where}",
                soft_wrap=True,
            )
        if self.exit_on_interrupt:
            raise SystemExit(143 if isinstance(exc, Terminated) else 130) from None
