"""`infermeter compare`: a regression gate between two results files (exit 1 only on a significant slowdown
beyond the threshold)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infermeter.checks import check_gate
from infermeter.cli.common import stdout
from infermeter.compare import DEFAULT_ALPHA, METRICS, CaseChange, Comparison, compare_results
from infermeter.errors import UsageError
from infermeter.report.summary import format_ms

_STYLES = {
    "slower": "red",
    "faster": "green",
    "not significant": "dim",
    "unreplicated": "yellow",
    "precision differs": "yellow",
}


def _value(change: CaseChange, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f}/s" if change.metric == "throughput" else f"{format_ms(value)} ms"


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
    regressions = comparison.regressions
    if regressions:
        console.print(
            f"[red]{len(regressions)} regression(s)[/]: more than {comparison.threshold:.0%} slower, and significant "
            "(unreplicated: beyond the known noise)"
        )
    else:
        console.print("no significant regression beyond the threshold")


@click.command("compare")
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--metric", type=click.Choice(METRICS), default="p50", show_default=True, help="What to compare.")
@click.option("--threshold", default="5%", show_default=True, help="Smallest slowdown that fails the gate.")
@click.option("--alpha", type=float, default=DEFAULT_ALPHA, show_default=True, help="Significance level.")
@click.option("--allow-mixed-precision", is_flag=True, help="Compare pairs whose effective precisions differ.")
@click.option(
    "--rerun",
    is_flag=True,
    help="Re-measure both sides' cases now, each pair interleaved in one session (the mode for CI; p50 only).",
)
@click.option("--rounds", type=int, default=10, show_default=True, help="--rerun: at least this many rounds.")
@click.option("--min-time", type=float, default=2.0, show_default=True, help="--rerun: timed seconds per case.")
@click.option("--max-time", type=float, default=60.0, show_default=True, help="--rerun: at most seconds per case.")
@click.option(
    "--target-ci", default="1%", show_default=True, help="--rerun: rounds go on until the ratio is known to ±this."
)
def compare(
    base: Path,
    new: Path,
    metric: str,
    threshold: str,
    alpha: float,
    allow_mixed_precision: bool,
    rerun: bool,
    rounds: int,
    min_time: float,
    max_time: float,
    target_ci: str,
) -> None:
    """Compare NEW against BASE case by case, on each file's per-round medians (not raw samples). Exit 1 only
    when a change is both significant and beyond the threshold. Files without rounds are compared unreplicated,
    with a warning. With --rerun, both sides' cases are measured again, interleaved, on this machine, and each
    change is judged on its per-round ratios: a change of the machine between the two files cannot fail it."""
    from infermeter.results.io import read_results

    limit = check_gate(threshold, alpha)
    if rerun:
        comparison = _rerun(base, new, metric, limit, alpha, rounds, min_time, max_time, target_ci)
    else:
        comparison = compare_results(read_results(base), read_results(new), metric, limit, alpha, allow_mixed_precision)
    if not comparison.changes and not comparison.remarks:
        raise UsageError(f"no case of {new} matches a case of {base}: nothing to compare")
    print_comparison(comparison)
    if comparison.regressions:
        raise SystemExit(1)


def _rerun(
    base: Path,
    new: Path,
    metric: str,
    limit: float,
    alpha: float,
    rounds: int,
    min_time: float,
    max_time: float,
    target_ci: str,
) -> Comparison:
    """`--rerun`: the flags checked, both files re-measured pair by pair (progress on stderr)."""
    from infermeter.case import MeasureSettings
    from infermeter.cli.common import parse_fraction, require_positive, stderr
    from infermeter.compare_rerun import rerun_comparison, rerun_files

    if metric != "p50":
        raise UsageError("--rerun compares p50 (per-round medians); drop --metric or use --metric p50")
    require_positive(rounds, "--rounds")
    require_positive(min_time, "--min-time", allow_zero=True)
    require_positive(max_time, "--max-time")
    target = parse_fraction(target_ci, "--target-ci")
    settings = MeasureSettings(min_time_s=min_time, max_time_s=max_time, target_ci=target, rounds=rounds)

    def progress(index: int, total: int, label: str) -> None:
        stderr.print(f"[dim]re-measuring {index + 1}/{total}: {escape(label)} (base and new interleaved)[/]")

    return rerun_comparison(*rerun_files((base, new)), settings, limit, alpha, progress)
