"""`infermeter history`: how each case moved over the recorded `bench` runs, with regressions flagged."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stdout
from infermeter.core.errors import UsageError
from infermeter.report.summary import format_ms

if TYPE_CHECKING:
    from infermeter.history import CaseTrend


@click.command("history")
@click.option("--model", "-m", help="Only this model (as recorded, e.g. tiny_cnn).")
@click.option("--backend", "-b", help="Only this backend.")
@click.option(
    "--db",
    type=click.Path(path_type=Path),
    help="History database (default: $INFERMETER_HISTORY or the user data dir).",
)
@click.option(
    "--threshold",
    default="10%",
    show_default=True,
    help="Smallest slowdown vs the median of previous runs that is flagged (it must also leave their band).",
)
@click.option("--last", type=int, default=20, show_default=True, help="Show at most this many runs per case.")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when a case's latest run lies above the band of its previous runs (>= 3 needed) and the threshold.",
)
def history(
    model: str | None, backend: str | None, db: Path | None, threshold: str, last: int, fail_on_regression: bool
) -> None:
    """Show the trend of each case over the recorded runs (P50/P99 per run, date, commit, environment) and flag
    regressions: a run whose P50 lies above the control band of the previous runs (mean + 3 sd of their log
    P50s; 3 previous runs needed) and beyond the threshold (exit 1 on one with --fail-on-regression)."""
    from infermeter.core.validation import parse_threshold
    from infermeter.history import MIN_PREVIOUS, case_trends
    from infermeter.history.store import HISTORY_ENV, history_path, load_history

    try:
        limit = parse_threshold(threshold)
    except ValueError:
        raise UsageError(f"--threshold {threshold!r} is not a percentage; write e.g. --threshold 10%") from None
    if last <= 0:
        raise UsageError(f"--last {last} must be positive")
    path = db or history_path()
    if path is None:
        raise UsageError(f"history is disabled ({HISTORY_ENV}=off); pass --db FILE to read a database")
    trends = case_trends(load_history(path, model, backend), limit)
    if not trends:
        what = " ".join(x for x in (model, backend) if x) or "any case"
        stdout.print(f"no recorded runs of {escape(what)} in {escape(str(path))}")
        return
    flagged = unjudged = 0
    for trend in trends:
        stdout.print(_trend_table(trend, last))
        flagged += trend.regressed
        unjudged += not trend.judged
    stdout.print(
        f"{len(trends)} case(s); {flagged} regressed in their latest run (P50 above the band of the previous runs, "
        f"mean + 3 sd of their log P50s, and more than {limit:.0%} above their median)"
    )
    if unjudged:
        stdout.print(
            f"[yellow]{unjudged} case(s) cannot be judged[/]: their latest run has fewer than {MIN_PREVIOUS} previous "
            "ok runs to show its run-to-run noise (or did not run)"
        )
    if fail_on_regression and flagged:
        raise SystemExit(1)


def _trend_table(trend: CaseTrend, last: int) -> Table:
    """One case's last `last` runs: P50/P99, the band of the previous runs, the change and its flags."""
    table = Table(title=escape(f"{trend.label}  ({trend.case_id})"), title_justify="left", header_style="bold")
    numeric = ("run", "P50 ms", "P99 ms", "band ms", "vs previous")
    for column in ("run", "date", "commit", "env", "status", "P50 ms", "P99 ms", "band ms", "vs previous", ""):
        table.add_column(column, justify="right" if column in numeric else "left")
    for item in trend.points[-last:]:
        p = item.point
        change = "—" if item.change is None else f"{item.change - 1:+.1%}"
        flag = "[red]REGRESSION[/]" if item.regression else ""
        band = "—" if item.band is None else f"{format_ms(item.band[0])}–{format_ms(item.band[1])}"
        if item.env_changed:
            flag += (" " if flag else "") + "[yellow]environment changed[/]"
        table.add_row(
            str(p.run_id),
            escape(p.created.replace("T", " ")[:16]),
            escape(p.git_commit or "—"),
            escape(p.env_fingerprint or "—"),
            escape(p.status),
            format_ms(p.p50_ms),
            format_ms(p.p99_ms),
            band,
            change,
            flag,
        )
    return table
