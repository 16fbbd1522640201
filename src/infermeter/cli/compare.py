"""`infermeter compare`: a regression gate between two results files (exit 1 only on a significant slowdown
beyond the threshold)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from infermeter.cli.options import (
    ALLOW_MIXED_PRECISION,
    DecisionFlags,
    MeasureFlags,
    decision_options,
    measure_options,
)
from infermeter.compare.decision import DEFAULT_MIN_ROUNDS
from infermeter.compare.verdict import DEFAULT_ALPHA, METRICS, Comparison, compare_results
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.core.validation import check_gate
from infermeter.report.terminal import print_comparison

# --rerun re-measures both files pair by pair in rounds; 2 s per case keeps each round's bursts long enough. Its
# rounds are the sequential decision's: at least DEFAULT_MIN_ROUNDS, then only until it has decided.
RERUN_DEFAULTS = MeasureSettings(min_time_s=2.0, rounds=DEFAULT_MIN_ROUNDS)


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
    help="Re-measure both sides' cases now, each pair interleaved in one session, until a sequential decision "
    "(the mode for CI; p50; docs/regression-gate.md); the flags below apply to it.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the comparison as JSON: each change's verdict and figures, and its decision's record.",
)
@decision_options()
@measure_options(RERUN_DEFAULTS)
def compare(
    base: Path,
    new: Path,
    metric: str,
    threshold: str,
    alpha: float,
    allow_mixed_precision: bool,
    rerun: bool,
    output: Path | None,
    decision: DecisionFlags,
    measure: MeasureFlags,
) -> None:
    """Compare NEW against BASE case by case, on each file's per-round medians (not raw samples). Exit 1 only
    when a change is both significant and beyond the threshold. Files without rounds are compared unreplicated,
    with a warning. With --rerun, both sides' cases are measured again, interleaved, on this machine, and each
    change is judged on its per-round ratios by a sequential test (GSPRT, stated --alpha and --beta at
    --threshold) that stops once it has decided: a change of the machine between the two files cannot fail it, and
    a pair left undecided by --budget-rounds (unknown) exits 1 too."""
    from infermeter.results.io import read_results

    limit = check_gate(threshold, alpha)
    if rerun:
        comparison = _rerun(base, new, metric, limit, alpha, decision, measure)
    else:
        comparison = compare_results(read_results(base), read_results(new), metric, limit, alpha, allow_mixed_precision)
    if not comparison.changes and not comparison.remarks:
        raise UsageError(f"no case of {new} matches a case of {base}: nothing to compare")
    print_comparison(comparison)
    if output is not None:
        _write_json(comparison, output)
    if comparison.regressions or comparison.undecided:
        raise SystemExit(1)


def _rerun(
    base: Path, new: Path, metric: str, limit: float, alpha: float, decision: DecisionFlags, measure: MeasureFlags
) -> Comparison:
    """`--rerun`: the flags checked, both files re-measured pair by pair (progress on stderr)."""
    from infermeter.cli.common import stderr
    from infermeter.compare.rerun import rerun_comparison, rerun_files

    if metric not in ("p50", "p99"):
        raise UsageError("--rerun compares p50 (per-round medians); drop --metric or use --metric p50")
    settings = measure.settings()
    params = decision.params(alpha, limit, settings.rounds)

    def progress(index: int, total: int, label: str) -> None:
        stderr.print(f"[dim]re-measuring {index + 1}/{total}: {escape(label)} (base and new interleaved)[/]")

    # --metric p99: the decision gates the median and its record says why (decision.gated_metric).
    return rerun_comparison(*rerun_files((base, new)), settings, limit, alpha, progress, params, metric)


def _write_json(comparison: Comparison, path: Path) -> None:
    """The comparison as JSON at `path`: per change its label, verdict, figures and decision record (or null)."""
    import json

    from infermeter.core.files import write_text_atomically

    changes = [
        {
            "label": c.label,
            "verdict": c.verdict,
            "regression": c.regression,
            "ratio": c.ratio,
            "ratio_ci95": c.ratio_ci95,
            "p_value": c.p_value,
            "replication": c.replication,
            "notes": c.notes,
            "decision": c.decision.to_dict() if c.decision is not None else None,
        }
        for c in comparison.changes
    ]
    payload = {
        "metric": comparison.metric,
        "threshold": comparison.threshold,
        "alpha": comparison.alpha,
        "changes": changes,
        "remarks": comparison.remarks,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(payload, indent=2) + "\n")
