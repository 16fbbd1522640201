"""`infermeter tune-batching`: the batching policy (max-batch × max-delay × workers) with the highest throughput
whose P99 meets the SLO, each policy served here and measured at rising concurrency."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import parse_positive_ints, require_positive, split_values, stderr, stdout
from infermeter.cli.load_table import print_summaries
from infermeter.cli.optimize_serve import joined
from infermeter.cli.serve_group import ServedModel, serving_options
from infermeter.core.errors import UsageError
from infermeter.core.extras import SERVE_MODULES, require_extra
from infermeter.results.schema import now_iso
from infermeter.serve import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_BATCHES,
    DEFAULT_MAX_DELAYS_MS,
    DEFAULT_POINT_DURATION_S,
    DEFAULT_WORKERS,
)

if TYPE_CHECKING:
    from infermeter.load.tune import BatchPolicy, PolicyResult
    from infermeter.load.tune_race import PickRace
    from infermeter.load.verdict import LoadSummary


def _grid(max_batches: tuple[str, ...], max_delays: tuple[str, ...], workers: tuple[str, ...]) -> list[BatchPolicy]:
    """The policies of the flags' lists, each value checked."""
    from infermeter.load.tune import policies

    delays = []
    for item in split_values(max_delays):
        try:
            delays.append(float(item))
        except ValueError:
            raise UsageError(f"--max-delay-ms {item!r} is not a number") from None
        require_positive(delays[-1], "--max-delay-ms", allow_zero=True)
    return policies(parse_positive_ints(max_batches, "--max-batch"), delays, parse_positive_ints(workers, "--workers"))


def _on_point(policy: BatchPolicy, summary: LoadSummary) -> None:
    stats = summary.stats
    p99 = f"P99 {stats.p99:.2f} ms" if stats else "no answers"
    stderr.print(f"  {policy.label()} x{summary.run.concurrency}: {summary.throughput:.1f}/s, {p99}")


def _table(results: list[PolicyResult], pick: PolicyResult | None, title: str) -> Table:
    """One row per policy: its curve, its best throughput within the SLO and that point's latency; the pick marked."""
    table = Table(title=title, header_style="bold", title_justify="left")
    for header in ("policy", "curve (concurrency: samples/s @ P99 ms)", "best samples/s", "P50 ms", "P99 ms"):
        table.add_column(header, justify="left" if header.startswith(("policy", "curve")) else "right")
    for result in results:
        curve = ", ".join(
            f"{s.run.concurrency}: {s.throughput:.0f} @ {s.stats.p99:.1f}" if s.stats else f"{s.run.concurrency}: -"
            for s in result.curve
        )
        best = result.best
        cells = [
            result.policy.label() + (" ← pick" if result is pick else ""),
            curve,
            f"{best.throughput:.1f}" if best else "-",
            f"{best.stats.p50:.2f}" if best and best.stats else "-",
            f"{best.stats.p99:.2f}" if best and best.stats else "-",
        ]
        table.add_row(*(escape(c) for c in cells))
    return table


def _race(
    results: list[PolicyResult], pick: PolicyResult, model_args: list[str], slo_p99_ms: float, duration: float
) -> PickRace | None:
    """The pick raced against its runner-up on paired rounds of half a point's duration (`load.tune_race`)."""
    from infermeter.load.tune_race import race_pick, runner_up

    other = runner_up(results, pick)
    if other is None or pick.best is None:
        return None
    stderr.print(f"race: {pick.policy.label()} against the runner-up {other.policy.label()}, in paired rounds")
    return race_pick(results, pick, model_args, slo_p99_ms, max(duration / 2, 0.5), on_round=_on_round)


def _on_round(index: int, log_ratio: float) -> None:
    ratio = f"{math.exp(log_ratio):.3f}" if math.isfinite(log_ratio) else "set aside (a run failed)"
    stderr.print(f"  round {index}: pick/runner-up throughput {ratio}")


@click.command("tune-batching")
@click.argument("model")
@serving_options("model", "Backend to serve with (see `infermeter backends`).", backend_required=True)
@click.option("--slo-p99-ms", type=float, required=True, help="Latency SLO the recommendation must meet.")
@click.option("--max-batch", "max_batches", multiple=True, default=[joined(DEFAULT_MAX_BATCHES)], show_default=True)
@click.option("--max-delay-ms", "max_delays", multiple=True, default=[joined(DEFAULT_MAX_DELAYS_MS)], show_default=True)
@click.option("--workers", "workers_list", multiple=True, default=[joined(DEFAULT_WORKERS)], show_default=True)
@click.option("--duration", type=float, default=DEFAULT_POINT_DURATION_S, show_default=True,
              help="Seconds per load point.")  # fmt: skip
@click.option("--concurrency", type=int, default=DEFAULT_CONCURRENCY, show_default=True,
              help="Most requests in flight.")  # fmt: skip
@click.option("--no-check", is_flag=True, help="Skip the Poisson check of the recommendation.")
@click.option("--no-race", is_flag=True,
              help="Skip the paired rounds that decide the pick against its runner-up.")  # fmt: skip
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), help="Results file of every point (for deploy --load)."
)
def tune_batching(
    served: ServedModel,
    slo_p99_ms: float,
    max_batches: tuple[str, ...],
    max_delays: tuple[str, ...],
    workers_list: tuple[str, ...],
    duration: float,
    concurrency: int,
    no_check: bool,
    no_race: bool,
    output: Path | None,
) -> None:
    """Find the batching policy (max-batch × max-delay × workers) with the highest throughput whose P99 meets
    --slo-p99-ms: each policy is served on 127.0.0.1 and measured at rising concurrency; the pick is then
    checked under Poisson arrivals."""
    require_extra("serve", SERVE_MODULES, "`infermeter tune-batching`")
    from infermeter.load.tune import CHECK_MIN_DURATION_S, check_pick, measure_policy, recommend

    require_positive(slo_p99_ms, "--slo-p99-ms")
    require_positive(duration, "--duration")
    require_positive(concurrency, "--concurrency")
    grid = _grid(max_batches, max_delays, workers_list)
    model_args = served.serve_args()
    results = []
    started = now_iso()
    for policy in grid:
        stderr.print(f"policy {policy.label()}")
        results.append(measure_policy(policy, model_args, slo_p99_ms, duration, concurrency, _on_point))
    backend = served.backend or ""
    pick = recommend(results)
    race = None if no_race or pick is None else _race(results, pick, model_args, slo_p99_ms, duration)
    if race is not None:
        pick = race.pick
    if output is not None:
        from infermeter.load.tune import tuning_results
        from infermeter.models.resolve import resolve_model
        from infermeter.results.io import write_results

        precision = served.precision or resolve_model(served.model).default_precision  # what the servers ran
        write_results(output, tuning_results(results, pick, served.model, backend, precision, started, race))
        stdout.print(f"results: {escape(str(output))} (the pick is marked for `infermeter deploy --load`)")
    title = f"tune-batching {escape(served.model)} ({escape(backend)}), SLO P99 ≤ {slo_p99_ms:g} ms"
    stdout.print(_table(results, pick, title))
    if race is not None:
        stdout.print(escape(race.line()))
    if pick is None or pick.best is None:
        stdout.print(f"[red]no policy met the SLO[/] of {slo_p99_ms:g} ms even at concurrency 1; relax the SLO")
        raise SystemExit(1)
    best = pick.best
    assert best.stats is not None
    stdout.print(
        f"recommendation: [bold]{escape(' '.join(pick.policy.serve_args()))}[/] — {best.throughput:.1f} samples/s "
        f"at concurrency {best.run.concurrency}, P50 {best.stats.p50:.2f} ms, P99 {best.stats.p99:.2f} ms"
    )
    if not no_check:
        check = check_pick(pick, model_args, slo_p99_ms, max(duration, CHECK_MIN_DURATION_S))
        print_summaries([check], "check of the pick under Poisson arrivals (90% of its throughput)")
