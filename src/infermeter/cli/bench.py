"""`infermeter bench`: measure a matrix of cases and print the summary table."""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from infermeter.cli.bench_flags import LoopFlags, MatrixFlags, RunFlags, loop_options, matrix_options, run_options
from infermeter.cli.cluster import check_cluster_flags, check_plan_machines, cluster_connection
from infermeter.cli.common import split_values, stderr, stdout
from infermeter.cli.options import ALLOW_MIXED_PRECISION, MeasureFlags, measure_options
from infermeter.cli.resume import check_resume_flags, given_plan_flags
from infermeter.cli.soak import allocators, print_soak, soak_options, soak_settings
from infermeter.core.errors import UsageError
from infermeter.measure.plan import Matrix
from infermeter.measure.request import build_matrix, cli_flag
from infermeter.measure.scenarios import COLD_START_TABLE, SUMMARY_TABLE
from infermeter.models.resolve import resolve_model
from infermeter.report.coldstart import COLD_START_COLUMNS, cold_start_rows
from infermeter.report.summary import SummaryTable, summary_table
from infermeter.report.terminal import ConsoleDisplay, print_summary, print_table

if TYPE_CHECKING:
    from infermeter.measure.benchrun import BenchRun, ClusterRunner
    from infermeter.results.schema import CaseResult


def _default_output() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"bench-{stamp}.json"


def _refuse_generation_file(resume: Path) -> None:
    """UsageError, before anything runs or is written, when the results file to resume holds a generation plan:
    `llm bench --resume` finishes those (the mirror of `llm bench`'s refusal of an inference file)."""
    from infermeter.llm.sweep import TASK, plan_task
    from infermeter.results.io import read_results

    if plan_task(read_results(resume)) == TASK:
        raise UsageError(f"{resume} holds a generation plan: resume it with `infermeter llm bench --resume {resume}`")


@click.command("bench")
@click.argument("models", nargs=-1)
@matrix_options
@measure_options()
@loop_options
@run_options
@ALLOW_MIXED_PRECISION
@soak_options
@click.pass_context
def bench(
    ctx: click.Context,
    models: tuple[str, ...],
    matrix: MatrixFlags,
    measure: MeasureFlags,
    loop: LoopFlags,
    run: RunFlags,
    allow_mixed_precision: bool,
    **soak_flags: Any,
) -> None:
    """Benchmark models on backends: P50/P99 latency, throughput, peak memory, load time.

    LLM generation (TTFT, TPOT, tokens/s) is `infermeter llm bench`.
    """
    if run.resume is not None:
        _refuse_generation_file(run.resume)
    check_resume_flags(run.resume, run.resume_extend, given_plan_flags(ctx))
    if run.scenario.isolated_only and run.no_isolation:
        raise UsageError(f"{run.scenario.flag} needs a fresh process per run; drop --no-isolation")
    check_cluster_flags(run.cluster, tuple(split_values(run.machines)), matrix.threads if run.plans else None)
    display = ConsoleDisplay()
    plan: Matrix | None = None
    if run.plans:  # a bare --resume takes every one of these from the file's plan
        settings = soak_settings(measure.settings(**loop.settings_fields()), soak_flags, not run.no_isolation)
        plan = build_matrix(matrix.request(models, settings, allocators(soak_flags)), display.note, cli_flag)
    done = _run_sweep(plan, run, display)
    _print_run(done, allow_mixed_precision)


def _run_sweep(matrix: Matrix | None, run: RunFlags, display: ConsoleDisplay) -> BenchRun:
    """The new or resumed sweep run (on the cluster when --cluster is given), its results file written."""
    from infermeter.machine.environment import collect_environment
    from infermeter.measure.benchrun import new_sweep, resumed_sweep, run_bench

    command = ["infermeter", *sys.argv[1:]]
    isolation = not run.no_isolation
    machine_names = tuple(split_values(run.machines))
    with cluster_connection(run.cluster):
        if matrix is not None and machine_names:
            from infermeter.cluster.session import resolve_machines

            matrix = replace(matrix, machines=resolve_machines(machine_names))
        if run.resume is not None:
            sweep = resumed_sweep(run.resume, run.output, matrix, run.scenario, isolation, command, resolve_model)
            stderr.print(
                f"resuming {run.resume}: {len(sweep.todo)} of {len(sweep.items)} planned case(s) remain",
                soft_wrap=True,
            )
        else:
            assert matrix is not None
            output = run.output or _default_output()
            sweep = new_sweep(output, matrix, run.scenario, isolation, command, collect_environment())
        check_plan_machines(sweep.todo, run.cluster)
        return run_bench(
            sweep, display, not run.no_roofline, not run.no_history, _cluster_runner() if run.cluster else None
        )


def _cluster_runner() -> ClusterRunner:
    from infermeter.cluster.driver import run_on_cluster

    return run_on_cluster


def _print_summary(shown: list[CaseResult], allow_mixed_precision: bool) -> None:
    print_summary(summary_table(shown, allow_mixed_precision), shown)
    print_soak(shown)


def _print_cold_start(shown: list[CaseResult], _allow_mixed_precision: bool) -> None:
    print_table(
        SummaryTable(COLD_START_COLUMNS, cold_start_rows(shown)), title="cold start: fresh process to first result"
    )


# The table each scenario asks for (`Scenario.table`).
_TABLES = {SUMMARY_TABLE: _print_summary, COLD_START_TABLE: _print_cold_start}


def _print_run(run: BenchRun, allow_mixed_precision: bool) -> None:
    """The scenario's table (the summary and the soak's, or the cold start's), the machine's speed drift and the
    results path."""
    shown = run.cases
    _TABLES[run.scenario.table](shown, allow_mixed_precision)
    if run.trace.moved is not None:
        paired = any(case.timing.paired is not None for case in shown)
        stdout.print(
            f"machine speed: moved {run.trace.moved:.0%} during the run ({len(run.trace.readings)} probe readings"
            + ("; speedups are paired per round, so a move hits both sides)" if paired else ")")
        )
    stdout.print(f"results: {run.path}")
