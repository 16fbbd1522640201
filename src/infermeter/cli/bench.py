"""`infermeter bench`: measure a matrix of cases and print the summary table."""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from infermeter.cli.bench_flags import (
    GenerateFlags,
    LoopFlags,
    MatrixFlags,
    RunFlags,
    generate_options,
    loop_options,
    matrix_options,
    run_options,
)
from infermeter.cli.cluster import check_cluster_flags, check_plan_machines, cluster_connection
from infermeter.cli.common import split_values, stderr, stdout
from infermeter.cli.options import ALLOW_MIXED_PRECISION, MeasureFlags, measure_options
from infermeter.cli.resume import check_resume_flags, given_plan_flags
from infermeter.cli.soak import allocators, print_soak, soak_options, soak_settings
from infermeter.core.errors import UsageError
from infermeter.measure.plan import Matrix
from infermeter.measure.request import build_matrix, cli_flag
from infermeter.models.resolve import resolve_model
from infermeter.report.coldstart import COLD_START_COLUMNS, cold_start_rows
from infermeter.report.summary import SummaryTable, summary_table
from infermeter.report.terminal import ConsoleDisplay, print_summary, print_table

if TYPE_CHECKING:
    from infermeter.measure.benchrun import BenchRun, ClusterRunner


def _default_output() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"bench-{stamp}.json"


def _resumes_generation(resume: Path) -> bool:
    """True when the results file to resume holds a generation plan (`bench --task generate`): a bare `--resume`
    replays it whatever --task says."""
    from infermeter.llm.sweep import TASK, plan_task
    from infermeter.results.io import read_results

    return plan_task(read_results(resume)) == TASK


@click.command("bench")
@click.argument("models", nargs=-1)
@click.option(
    "--task",
    type=click.Choice(["infer", "generate"]),
    default="infer",
    show_default=True,
    help="infer: one forward pass per request; generate: LLM token generation (TTFT, TPOT, tokens/s).",
)
@matrix_options
@measure_options()
@loop_options
@run_options
@ALLOW_MIXED_PRECISION
@generate_options
@soak_options
@click.pass_context
def bench(
    ctx: click.Context,
    models: tuple[str, ...],
    task: str,
    matrix: MatrixFlags,
    measure: MeasureFlags,
    loop: LoopFlags,
    run: RunFlags,
    allow_mixed_precision: bool,
    generate: GenerateFlags,
    **soak_flags: Any,
) -> None:
    """Benchmark models on backends: P50/P99 latency, throughput, peak memory, load time.

    With --task generate, MODELS are LLMs (default tiny-llama, built offline; `tiny-llama:q4_k_m`, a .gguf path,
    or a Hugging Face folder) on generation backends (default llama-cpp; also transformers, vllm, tensorrt-llm).
    """
    if task == "generate" or (run.resume is not None and _resumes_generation(run.resume)):
        from infermeter.cli.bench_generate import run_bench_generate

        run_bench_generate(ctx, run.output, _default_output())  # it reads `generate`'s flags from ctx.params
        return
    from infermeter.cli.generate import GENERATE_ONLY, reject_flags

    reject_flags(ctx, GENERATE_ONLY, "to --task generate (add --task generate)")
    check_resume_flags(run.resume, run.resume_extend, given_plan_flags(ctx))
    if run.cold_start and run.no_isolation:
        raise UsageError("--cold-start needs a fresh process per run; drop --no-isolation")
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
            sweep = resumed_sweep(run.resume, run.output, matrix, run.cold_start, isolation, command, resolve_model)
            stderr.print(
                f"resuming {run.resume}: {len(sweep.todo)} of {len(sweep.items)} planned case(s) remain",
                soft_wrap=True,
            )
        else:
            assert matrix is not None
            output = run.output or _default_output()
            sweep = new_sweep(output, matrix, run.cold_start, isolation, command, collect_environment())
        check_plan_machines(sweep.todo, run.cluster)
        return run_bench(
            sweep, display, not run.no_roofline, not run.no_history, _cluster_runner() if run.cluster else None
        )


def _cluster_runner() -> ClusterRunner:
    from infermeter.cluster.driver import run_on_cluster

    return run_on_cluster


def _print_run(run: BenchRun, allow_mixed_precision: bool) -> None:
    """The summary (or cold-start) table, the soak table, the machine's speed drift and the results path."""
    shown = run.cases
    if run.cold_start:
        print_table(
            SummaryTable(COLD_START_COLUMNS, cold_start_rows(shown)), title="cold start: fresh process to first result"
        )
    else:
        print_summary(summary_table(shown, allow_mixed_precision), shown)
        print_soak(shown)
    if run.trace.moved is not None:
        paired = any(case.paired is not None for case in shown)
        stdout.print(
            f"machine speed: moved {run.trace.moved:.0%} during the run ({len(run.trace.readings)} probe readings"
            + ("; speedups are paired per round, so a move hits both sides)" if paired else ")")
        )
    stdout.print(f"results: {run.path}")
