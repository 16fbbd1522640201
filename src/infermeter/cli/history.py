"""`infermeter history`: how each case moved over the recorded `bench` runs, with regressions flagged."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stdout
from infermeter.errors import UsageError
from infermeter.report.summary import format_ms


@click.command("history")
@click.option("--model", "-m", help="Only this model (as recorded, e.g. tiny_cnn).")
@click.option("--backend", "-b", help="Only this backend.")
@click.option(
    "--db",
    type=click.Path(path_type=Path),
    help="History database (default: $INFERMETER_HISTORY or the user data dir).",
)
@click.option(
    "--threshold", default="10%", show_default=True, help="Slowdown vs the median of previous runs that is flagged."
)
@click.option("--last", type=int, default=20, show_default=True, help="Show at most this many runs per case.")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when a case regressed in its latest run (a CI gate, like `infermeter compare`).",
)
def history(
    model: str | None, backend: str | None, db: Path | None, threshold: str, last: int, fail_on_regression: bool
) -> None:
    """Show the trend of each case over the recorded runs (P50/P99 per run, date, commit, environment) and flag
    regressions (exit 1 on one with --fail-on-regression)."""
    from infermeter.compare import parse_threshold
    from infermeter.history import case_trends
    from infermeter.results.store import HISTORY_ENV, history_path, load_history

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
    flagged = 0
    for trend in trends:
        table = Table(title=escape(f"{trend.label}  ({trend.case_id})"), title_justify="left", header_style="bold")
        for column in ("run", "date", "commit", "env", "status", "P50 ms", "P99 ms", "vs previous", ""):
            table.add_column(
                column, justify="right" if column in ("run", "P50 ms", "P99 ms", "vs previous") else "left"
            )
        for item in trend.points[-last:]:
            p = item.point
            change = "—" if item.change is None else f"{item.change - 1:+.1%}"
            flag = "[red]REGRESSION[/]" if item.regression else ""
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
                change,
                flag,
            )
        stdout.print(table)
        flagged += trend.regressed
    stdout.print(
        f"{len(trends)} case(s); {flagged} regressed in their latest run "
        f"(P50 more than {limit:.0%} above the median of previous runs, and significant)"
    )
    if fail_on_regression and flagged:
        raise SystemExit(1)
