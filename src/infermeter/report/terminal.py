"""The terminal: its consoles, the progress display while a sweep runs, the tables and warnings after, and the
comparison table. The CLI prints through it, and the Python API renders the same tables to text, so a notebook
sees what the terminal sees (the library never imports `cli`)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.status import Status
from rich.table import Table

from infermeter.compare.verdict import CaseChange, Comparison
from infermeter.core.interrupts import Terminated
from infermeter.figures.metric_registry import gate_metric
from infermeter.report.coldstart import COLD_START_PHASE_COLUMNS
from infermeter.report.summary import (
    NUMERIC_COLUMNS,
    PER_SHAPE_COLUMNS,
    SummaryTable,
    format_ms,
    group_warnings,
    per_shape_rows,
)
from infermeter.results.schema import CaseResult, CaseWarning

if TYPE_CHECKING:
    from infermeter.measure.sweep import SweepEvent

# Piped output (a file, CI logs) gets a wide console so that tables are never cut to 80 columns.
stdout = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)
stderr = Console(stderr=True, highlight=False)

# The summary's numeric columns plus those of the per-shape and cold-start tables.
CONSOLE_NUMERIC_COLUMNS = NUMERIC_COLUMNS | {
    "streams",
    "runs",
    "process s",
    *COLD_START_PHASE_COLUMNS,
    "first ms",
    "to first result s",
}
# The width of piped output (see `stdout`): a table rendered to text is as wide as the CLI prints it.
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


_STYLES = {
    "slower": "red",
    "faster": "green",
    "not significant": "dim",
    "same": "dim",
    "unknown": "yellow",
    "unreplicated": "yellow",
    "precision differs": "yellow",
}


def _value(change: CaseChange, value: float | None) -> str:
    if value is None:
        return "—"
    metric = gate_metric(change.metric)  # the registry's unit: ms figures as every table writes them
    return f"{format_ms(value)}{metric.suffix}" if metric.unit == "ms" else f"{value:,.1f}{metric.suffix}"


def print_comparison(comparison: Comparison, console: Console = stdout) -> None:
    """The comparison table, the environment caveat and the unpaired cases, on `console` (stdout)."""
    if comparison.env_differences:
        console.print(
            f"[yellow]warning[/] the environments differ: {escape('; '.join(comparison.env_differences))}; "
            "a change may come from the machine or the versions, not from the code",
            soft_wrap=True,
        )
    table = Table(header_style="bold", caption=f"metric {comparison.metric} · threshold {comparison.threshold:.0%} · "
                  f"alpha {comparison.alpha:g}", caption_justify="left")  # fmt: skip
    for column in ("case", "base", "new", "new/base [95% CI]", "p", "verdict"):
        # Figures never wrap; the case and the verdict's notes do, so a long note cannot squeeze the figures out.
        wraps = column in ("case", "verdict")
        table.add_column(column, justify="right" if column in ("base", "new", "p") else "left", no_wrap=not wraps,
                         overflow="fold" if wraps else "ellipsis", ratio=1 if wraps else None)  # fmt: skip
    for change in comparison.changes:
        ratio = "—" if change.ratio is None else f"{change.ratio:.3f}x"
        if change.ratio_ci95 is not None:
            low, high = change.ratio_ci95
            ratio += f" [{low:.3f}, {high:.3f}]"
        verdict = change.verdict + (" REGRESSION" if change.regression else "")
        if change.notes:
            verdict += f" ({'; '.join(change.notes)})"
        style = _STYLES.get(change.verdict, "")
        table.add_row(
            escape(change.label),
            _value(change, change.base_value),
            _value(change, change.new_value),
            ratio,
            "—" if change.p_value is None else f"{change.p_value:.2g}",
            f"[{style}]{escape(verdict)}[/]" if style else escape(verdict),
        )
    console.print(table)
    for warning in comparison.warnings:
        console.print(f"[yellow]warning[/] {escape(warning)}", soft_wrap=True)
    if comparison.method:
        console.print(escape(comparison.method), soft_wrap=True)
    for remark in comparison.remarks:
        console.print(escape(remark), soft_wrap=True)
    for side, cases in (("only in BASE", comparison.only_base), ("only in NEW", comparison.only_new)):
        for case in cases:
            console.print(
                f"{side}: {escape(f'{case.model} {case.backend} {case.precision} b{case.batch} ({case.id})')}"
            )
    _print_gate(comparison, console)


def _print_gate(comparison: Comparison, console: Console) -> None:
    """The gate's last line: the regressions (decided or judged), the undecided changes, or neither."""
    regressions, undecided = comparison.regressions, comparison.undecided
    if regressions and all(c.decision is not None for c in regressions):
        console.print(f"[red]{len(regressions)} regression(s)[/]: decided slower by {comparison.threshold:.0%}")
    elif regressions:
        console.print(
            f"[red]{len(regressions)} regression(s)[/]: more than {comparison.threshold:.0%} slower, and significant "
            "(unreplicated: beyond the known noise)"
        )
    if undecided:
        console.print(
            f"[yellow]{len(undecided)} undecided[/] (unknown: the budget of rounds ran out), which fails the gate: "
            "raise --budget-rounds or quiet the machine (docs/regression-gate.md)"
        )
    if not regressions and not undecided:
        console.print("no significant regression beyond the threshold")


def serving_tables(cases: list[CaseResult], title: str) -> list[Table]:
    """One console table per serving sweep in `cases`, titled `title` and the sweep (the same rows as the markdown
    report)."""
    from infermeter.llm.serving_verdict import verdicts
    from infermeter.report.serving import SERVING_COLUMNS, level_row, sweep_title

    tables = []
    for verdict in verdicts(cases):
        table = Table(title=escape(f"{title}: {sweep_title(verdict)}"), title_justify="left", header_style="bold")
        for column in SERVING_COLUMNS:
            table.add_column(column, justify="left" if column in ("level", "status") else "right")
        for point in verdict.points:
            cells = level_row(point, verdict)
            cells[1] = cells[1][:160]
            table.add_row(*(escape(cell) for cell in cells))
        tables.append(table)
    return tables
