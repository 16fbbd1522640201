"""`infermeter advise`: the best measured configuration under constraints, explained (exit 3 when none fits)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from infermeter.advise.pick import OBJECTIVES, Advice, Constraints, advise, describe
from infermeter.advise.tradeoff import cost_note, format_cost
from infermeter.cli.common import (
    MEMORY_BUDGET,
    PRICE_PER_HOUR,
    check_price_per_hour,
    memory_budget_mb,
    require_positive,
    stdout,
)
from infermeter.report.summary import case_label


def print_advice(advice: Advice) -> None:
    """The ranked candidates (Pareto members starred; their cost per million inferences with a price), the
    explanation and the exclusions."""
    priced = advice.price_per_hour is not None
    if advice.ranked:
        table = Table(header_style="bold", caption="* on the Pareto front (P50, throughput, memory)",
                      caption_justify="left")  # fmt: skip
        columns = ("#", "case", "measured", *((f"cost per million ({advice.price_per_hour:g}/h)",) if priced else ()))
        for column in (*columns, ""):
            table.add_column(
                column, no_wrap=column != "measured", justify="right" if column.startswith("cost") else "left"
            )
        for rank, case in enumerate(advice.ranked, 1):
            cost = (format_cost(advice.cost_of(case)),) if priced else ()
            pareto = "*" if case in advice.pareto else ""
            table.add_row(str(rank), escape(case_label(case)), escape(describe(case)), *cost, pareto)
        stdout.print(table)
    for line in advice.explanation:
        stdout.print(escape(line), soft_wrap=True)
    if advice.excluded:
        stdout.print("[bold]excluded[/]")
        for exclusion in advice.excluded:
            reasons = "; ".join(exclusion.reasons) + cost_note(advice.cost_of(exclusion.case))
            text = f"  {case_label(exclusion.case)}: {reasons}"
            stdout.print(escape(text), soft_wrap=True)


@click.command("advise")
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--max-p99-ms", type=float, help="Largest acceptable P99 latency (ms).")
@click.option("--max-memory-mb", type=float, help="Largest acceptable peak memory (MB).")
@MEMORY_BUDGET
@click.option("--max-load-s", type=float, help="Largest acceptable load time (s).")
@click.option("--min-throughput", type=float, help="Smallest acceptable throughput (inferences/s).")
@click.option("--max-accuracy-drop", type=float, help="Largest acceptable accuracy drop (percent).")
@PRICE_PER_HOUR
@click.option(
    "--objective", type=click.Choice(OBJECTIVES), default="latency", show_default=True, help="What to optimize."
)
def advise_cmd(
    results: Path,
    max_p99_ms: float | None,
    max_memory_mb: float | None,
    memory_budget: str | None,
    max_load_s: float | None,
    min_throughput: float | None,
    max_accuracy_drop: float | None,
    price_per_hour: float | None,
    objective: str,
) -> None:
    """Recommend a configuration from RESULTS.json under constraints, with the reasons in numbers."""
    from infermeter.results.io import read_results

    max_memory_mb = memory_budget_mb(max_memory_mb, memory_budget)
    for value, flag in ((max_p99_ms, "--max-p99-ms"), (max_memory_mb, "--max-memory-mb"), (max_load_s, "--max-load-s"),
                        (min_throughput, "--min-throughput"), (max_accuracy_drop, "--max-accuracy-drop")):  # fmt: skip
        if value is not None:
            require_positive(value, flag, allow_zero=flag == "--max-accuracy-drop")
    check_price_per_hour(price_per_hour)
    constraints = Constraints(max_p99_ms, max_memory_mb, max_load_s, min_throughput, max_accuracy_drop)
    advice = advise(read_results(results).cases, constraints, objective, price_per_hour)
    print_advice(advice)
    if advice.pick is None:
        raise SystemExit(3)
