"""`infermeter compare`: a regression gate between two results files (exit 1 only on a significant slowdown
beyond the threshold)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from infermeter.checks import check_gate
from infermeter.compare import DEFAULT_ALPHA, METRICS, Comparison, compare_results
from infermeter.errors import UsageError
from infermeter.terminal import print_comparison


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
