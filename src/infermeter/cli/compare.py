"""`infermeter compare`: a regression gate between two results files (exit 1 only on a significant slowdown
beyond the threshold)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from infermeter.cli.options import ALLOW_MIXED_PRECISION, MeasureFlags, measure_options
from infermeter.compare.verdict import DEFAULT_ALPHA, METRICS, Comparison, compare_results
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.core.validation import check_gate
from infermeter.report.terminal import print_comparison

# --rerun re-measures both files pair by pair in rounds; 2 s per case keeps each round's bursts long enough.
RERUN_DEFAULTS = MeasureSettings(min_time_s=2.0)


@click.command("compare")
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--metric", type=click.Choice(METRICS), default="p50", show_default=True, help="What to compare.")
@click.option("--threshold", default="5%", show_default=True, help="Smallest slowdown that fails the gate.")
@click.option("--alpha", type=float, default=DEFAULT_ALPHA, show_default=True, help="Significance level.")
@ALLOW_MIXED_PRECISION
@click.option(
    "--rerun",
    is_flag=True,
    help="Re-measure both sides' cases now, each pair interleaved in one session (the mode for CI; p50 only); "
    "the measurement flags below apply to it.",
)
@measure_options(RERUN_DEFAULTS)
def compare(
    base: Path,
    new: Path,
    metric: str,
    threshold: str,
    alpha: float,
    allow_mixed_precision: bool,
    rerun: bool,
    measure: MeasureFlags,
) -> None:
    """Compare NEW against BASE case by case, on each file's per-round medians (not raw samples). Exit 1 only
    when a change is both significant and beyond the threshold. Files without rounds are compared unreplicated,
    with a warning. With --rerun, both sides' cases are measured again, interleaved, on this machine, and each
    change is judged on its per-round ratios: a change of the machine between the two files cannot fail it."""
    from infermeter.results.io import read_results

    limit = check_gate(threshold, alpha)
    if rerun:
        comparison = _rerun(base, new, metric, limit, alpha, measure)
    else:
        comparison = compare_results(read_results(base), read_results(new), metric, limit, alpha, allow_mixed_precision)
    if not comparison.changes and not comparison.remarks:
        raise UsageError(f"no case of {new} matches a case of {base}: nothing to compare")
    print_comparison(comparison)
    if comparison.regressions:
        raise SystemExit(1)


def _rerun(base: Path, new: Path, metric: str, limit: float, alpha: float, measure: MeasureFlags) -> Comparison:
    """`--rerun`: the flags checked, both files re-measured pair by pair (progress on stderr)."""
    from infermeter.cli.common import stderr
    from infermeter.compare.rerun import rerun_comparison, rerun_files

    if metric != "p50":
        raise UsageError("--rerun compares p50 (per-round medians); drop --metric or use --metric p50")
    settings = measure.settings()

    def progress(index: int, total: int, label: str) -> None:
        stderr.print(f"[dim]re-measuring {index + 1}/{total}: {escape(label)} (base and new interleaved)[/]")

    return rerun_comparison(*rerun_files((base, new)), settings, limit, alpha, progress)
