"""`infermeter bench`: measure a matrix of cases and print the summary table."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from infermeter.case import PRECISIONS, SHAPE_MODES, Case, MeasureSettings
from infermeter.cli.common import (
    choose,
    parse_options,
    parse_positive_ints,
    require_positive,
    split_values,
    stderr,
    stdout,
)
from infermeter.errors import UsageError
from infermeter.models.inputs import parse_input_override, resolve_shapes
from infermeter.models.spec import ModelSpec, resolve_model
from infermeter.models.zoo import DEFAULT_MODEL
from infermeter.report.summary import SummaryTable, group_warnings, summary_table
from infermeter.results.schema import ResultsFile


def _default_output() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"bench-{stamp}.json"


def build_plan(
    models: list[ModelSpec],
    backends: list[str],
    precisions: list[str],
    batches: list[int],
    shape_modes: list[str],
    threads: int,
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...],
    options: tuple[tuple[str, str], ...],
    settings: MeasureSettings,
) -> list[tuple[ModelSpec, Case]]:
    """The matrix in the order it runs: model, batch, shape mode, precision, then backend (so that the
    first backend of each group is the baseline of its speedups)."""
    all_names = {i.name for spec in models for i in spec.inputs}
    if len(models) == 1 or any(name not in all_names for name, _ in input_shapes):
        # With one model, every --input must name one of its inputs; resolve_shapes says which exist.
        resolve_shapes(models[0].inputs, batches[0], input_shapes)
    plan = []
    for spec in models:
        names = {i.name for i in spec.inputs}
        model_shapes = tuple((n, d) for n, d in input_shapes if n in names)
        for batch in batches:
            resolve_shapes(spec.inputs, batch, model_shapes)  # bad shapes are a usage error, before any case runs
            for shape_mode in shape_modes:
                for precision in precisions:
                    for backend in backends:
                        case = Case(
                            spec.ref,
                            backend,
                            precision,
                            batch,
                            shape_mode,
                            threads,
                            model_shapes,
                            options,
                            settings,
                        )
                        plan.append((spec, case))
    return plan


def print_summary(table: SummaryTable) -> None:
    """The summary table on stdout (constant columns moved to the caption), grouped warnings and footnotes."""
    columns, rows, caption = table.compact()
    rich_table = Table(header_style="bold", caption=escape(caption) or None, caption_justify="left")
    numeric = {"batch", "P50 ms", "P99 ms", "throughput/s", "peak MB", "load s", "speedup"}
    for column in columns:
        rich_table.add_column(column, justify="right" if column in numeric else "left", no_wrap=True)
    for row in rows:
        rich_table.add_row(*(escape(cell) for cell in row))
    stdout.print(rich_table)
    for group in group_warnings(table.warnings):
        where = ", ".join(f"{label} ({detail})" if detail else label for label, detail in group.cases)
        stdout.print(f"[yellow]warning[/] {escape(f'{group.code}: {group.title}: {where}')}", soft_wrap=True)
        stdout.print(f"  [dim]→ {escape(group.remedy)}[/]", soft_wrap=True)
    for note in table.footnotes:
        stdout.print(escape(note), soft_wrap=True)


@click.command("bench")
@click.argument("models", nargs=-1)
@click.option(
    "--backend",
    "-b",
    multiple=True,
    help="Backends (repeat or comma-separate). Default: every available CPU backend.",
)
@click.option("--batch", multiple=True, default=["1,16"], show_default=True, help="Batch sizes, e.g. 1,16.")
@click.option("--precision", multiple=True, default=["fp32"], show_default=True, help="fp32, fp16, bf16, int8.")
@click.option("--shape-mode", multiple=True, default=["static"], show_default=True, help="static and/or dynamic.")
@click.option("--threads", type=int, default=0, help="Intra-op threads for every backend (0: physical cores).")
@click.option("--warmup", type=int, default=10, show_default=True, help="Warm-up iterations after the first inference.")
@click.option("--iterations", type=int, default=100, show_default=True, help="Minimum timed iterations.")
@click.option("--min-time", type=float, default=1.0, show_default=True, help="Minimum seconds of timed loop.")
@click.option(
    "--max-time",
    type=float,
    default=60.0,
    show_default=True,
    help="Maximum seconds of timed loop (wins over --iterations).",
)
@click.option(
    "--case-timeout",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds before a case's worker is killed.",
)
@click.option(
    "--input-sets",
    type=int,
    default=4,
    show_default=True,
    help="Distinct input sets rotated through the loop.",
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    help="A model input's shape: NAME:1x3x224x224 (batch follows --batch).",
)
@click.option("--option", "-O", multiple=True, help="Backend option KEY=VALUE, e.g. onnxruntime.opt_level=basic.")
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    help="Results file (default: results/bench-<time>.json).",
)
@click.option("--resume", type=click.Path(path_type=Path), help="Continue a results file: skip its finished cases.")
@click.option("--no-isolation", is_flag=True, help="Run cases in this process (debugging only).")
@click.option("--allow-mixed-precision", is_flag=True, help="Show speedups across effective precisions (marked).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs.")
def bench(
    models: tuple[str, ...],
    backend: tuple[str, ...],
    batch: tuple[str, ...],
    precision: tuple[str, ...],
    shape_mode: tuple[str, ...],
    threads: int,
    warmup: int,
    iterations: int,
    min_time: float,
    max_time: float,
    case_timeout: float,
    input_sets: int,
    inputs: tuple[str, ...],
    option: tuple[str, ...],
    output: Path | None,
    resume: Path | None,
    no_isolation: bool,
    allow_mixed_precision: bool,
    seed: int,
) -> None:
    """Benchmark models on backends: P50/P99 latency, throughput, peak memory, load time."""
    from infermeter.backends.registry import backend_names, default_backends
    from infermeter.measure.sweep import SweepEvent, run_sweep
    from infermeter.results.env import collect_environment, default_threads
    from infermeter.results.io import read_results, write_results

    for value, flag in ((iterations, "--iterations"), (min_time, "--min-time"), (max_time, "--max-time")):
        require_positive(value, flag, allow_zero=flag == "--min-time")
    require_positive(case_timeout, "--case-timeout")
    require_positive(input_sets, "--input-sets")
    require_positive(warmup, "--warmup", allow_zero=True)
    require_positive(threads, "--threads", allow_zero=True)
    backends = split_values(backend) or default_backends()
    known = backend_names()
    for name in backends:
        if name not in known:
            raise UsageError(
                f"unknown backend {name!r}; known backends: {', '.join(known)} (see `infermeter backends`)"
            )
    precisions = choose(precision, PRECISIONS, "--precision")
    shape_modes = choose(shape_mode, SHAPE_MODES, "--shape-mode")
    batches = parse_positive_ints(batch, "--batch")
    if not (precisions and shape_modes and batches and backends):
        raise UsageError("nothing to run: --backend, --batch, --precision and --shape-mode need at least one value")
    overrides = tuple(parse_input_override(text) for text in inputs or ())
    specs = [resolve_model(ref) for ref in split_values(models) or [DEFAULT_MODEL]]
    settings = MeasureSettings(warmup, iterations, min_time, max_time, input_sets, case_timeout, seed)
    plan = build_plan(
        specs,
        backends,
        precisions,
        batches,
        shape_modes,
        threads or default_threads(),
        overrides,
        parse_options(option),
        settings,
    )

    if resume is not None:
        results = read_results(resume)
        path = output or resume
    else:
        results = ResultsFile(
            created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), environment=collect_environment()
        )
        path = output or _default_output()
    results.command = ["infermeter", *sys.argv[1:]]
    write_results(path, results)

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    )
    task = progress.add_task("starting", total=len(plan))

    def on_event(event: SweepEvent) -> None:
        case = event.case
        label = f"{case.model} · {case.backend} {case.precision} b{case.batch} {case.shape_mode}"
        if event.kind in ("done", "skipped"):
            progress.advance(task)
            if event.result is not None and event.result.status != "ok":
                progress.console.print(
                    f"[red]{event.result.status}[/] {escape(f'{label}: {event.result.error}')}",
                    soft_wrap=True,
                )
        else:
            progress.update(task, description=escape(f"{label}: {event.phase or 'starting'}"))

    try:
        with progress:
            run_sweep(plan, results, path, isolate=not no_isolation, on_event=on_event)
    except KeyboardInterrupt:
        finished = len(results.cases)
        stderr.print(f"interrupted: {finished} finished case(s) are saved in {path}; continue with --resume {path}")
        raise SystemExit(130) from None
    planned_ids = {case.id for _, case in plan}
    shown = [c for c in results.cases if c.id in planned_ids]
    print_summary(summary_table(shown, allow_mixed_precision))
    stdout.print(f"results: {path}")
