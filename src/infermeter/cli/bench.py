"""`infermeter bench`: measure a matrix of cases and print the summary table."""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from rich.markup import escape

from infermeter.case import PRECISIONS, SHAPE_MODES, Case, MeasureSettings
from infermeter.cli.common import (
    choose,
    parse_fraction,
    parse_options,
    parse_positive_ints,
    require_measure_flags,
    require_positive,
    split_values,
    stderr,
    stdout,
)
from infermeter.cli.console import print_summary, print_table, run_plan_with_progress
from infermeter.cli.resume import check_resume_flags, given_plan_flags, new_sweep, resumed_sweep
from infermeter.errors import InfermeterError, UsageError
from infermeter.interrupts import deferred_interrupts
from infermeter.measure.plan import Matrix, PlanItem
from infermeter.measure.shapes import parse_sizes
from infermeter.models.inputs import parse_input_override, resolve_shapes
from infermeter.models.spec import ModelSpec, resolve_model
from infermeter.models.zoo import DEFAULT_MODEL
from infermeter.report.summary import (
    COLD_START_COLUMNS,
    SummaryTable,
    cold_start_rows,
    summary_table,
)
from infermeter.results.io import write_results
from infermeter.results.schema import ResultsFile

# Convenience flags that set a backend option (the same as `-O key=value`).
OPTION_FLAGS = {
    "compile_mode": "torch-compile.mode",
    "ort_opt_level": "onnxruntime.opt_level",
    "ov_hint": "openvino.hint",
}


def _default_output() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"bench-{stamp}.json"


def _backend_chains(
    backend: tuple[str, ...], fallback: tuple[str, ...], specs: Sequence[ModelSpec]
) -> list[tuple[str, ...]]:
    """The backends to run, each a fallback chain (usually of one). Without --backend/--fallback: every available
    CPU backend that can run the models' form (a `.tflite`-only backend is left out for a zoo model, with a note)."""
    from infermeter.backends.registry import backend_names, default_backends, get_backend

    chains: list[tuple[str, ...]] = [(name,) for name in split_values(backend)]
    chains += [tuple(split_values([chain])) for chain in fallback]
    known = backend_names()
    for chain in chains:
        for name in chain:
            if name not in known:
                raise UsageError(
                    f"unknown backend {name!r}; known backends: {', '.join(known)} (see `infermeter backends`)"
                )
    if chains:
        return chains
    for name in default_backends():
        reasons = [get_backend(name).unsupported_reason(spec, Case(spec.ref, name)) for spec in specs]
        if all(reason is not None for reason in reasons):
            stderr.print(f"[dim]not running {name}: {escape(str(reasons[0]))}[/]", soft_wrap=True)
        else:
            chains.append((name,))
    return chains


def _prepare_onnx(plan: Sequence[PlanItem]) -> None:
    """Export each model's ONNX form once, before any case, when an ONNX-reading backend will need it: the export
    is a one-time conversion (cached on disk), not part of any one backend's load time or peak memory."""
    from infermeter.backends.registry import get_backend
    from infermeter.models.convert import onnx_for

    seen: set[str] = set()
    for item in plan:
        spec = item.spec
        if spec.ref in seen or not spec.has_torch_form:
            continue
        if any(get_backend(c.backend).consumes_onnx and get_backend(c.backend).available() is None for c in item.chain):
            seen.add(spec.ref)
            status = stderr.status(escape(f"exporting {spec.ref} to ONNX (once; cached for later runs)"))
            # An export error is not raised here: each case that needs the export reports it as its own failure.
            with status, contextlib.suppress(InfermeterError), deferred_interrupts():
                onnx_for(spec)


def _annotate_roofline(results: ResultsFile, path: Path) -> None:
    """Achieved GFLOP/s against this machine's measured ceilings (`infermeter peak`, cached per machine)."""
    from infermeter.graph.peak import cached_peak
    from infermeter.graph.roofline import annotate_roofline

    if cached_peak() is None and any(case.ok and not case.synthetic for case in results.cases):
        stderr.print("[dim]measuring this machine's compute and memory ceilings once (infermeter peak)...[/]")
    with stderr.status("roofline: counting FLOPs per model"), deferred_interrupts():
        annotate_roofline(results)
    write_results(path, results)


def _sizes(values: tuple[str, ...], flag: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    parsed = [parse_sizes(text, flag) for text in values]
    return tuple((name, tuple(sizes)) for name, sizes in parsed)


@click.command("bench")
@click.argument("models", nargs=-1)
@click.option(
    "--task",
    type=click.Choice(["infer", "generate"]),
    default="infer",
    show_default=True,
    help="infer: one forward pass per request; generate: LLM token generation (TTFT, TPOT, tokens/s).",
)
@click.option(
    "--backend", "-b", multiple=True, help="Backends (repeat or comma-separate). Default: every available CPU backend."
)
@click.option(
    "--fallback",
    multiple=True,
    help="A fallback chain: the first of these backends that runs here, e.g. tensorrt,onnxruntime-cuda,onnxruntime.",
)
@click.option(
    "--batch", multiple=True, help="Batch sizes, e.g. 1,16 (default: 1,16; with --task generate: sequences, 1)."
)
@click.option("--precision", multiple=True, default=["fp32"], show_default=True, help="fp32, fp16, bf16, int8.")
@click.option("--shape-mode", multiple=True, default=["static"], show_default=True, help="static and/or dynamic.")
@click.option(
    "--dynamic", multiple=True, help="Dynamic mode: sizes a symbolic dim takes, e.g. seq=16..128 or batch=1,4,16."
)
@click.option("--buckets", multiple=True, help="Dynamic mode: pad a dim up to the nearest bucket, e.g. seq=32,64,128.")
@click.option("--seq-len", type=int, help="Sequence length of transformer models (their `seq` dim).")
@click.option(
    "--streams", multiple=True, default=["1"], show_default=True, help="Concurrent inference requests, e.g. 1,4."
)
@click.option("--threads", type=int, default=0, help="Intra-op threads for every backend (0: physical cores).")
@click.option(
    "--warmup",
    type=int,
    default=10,
    show_default=True,
    help="Warm-up iterations after the first inference (--task generate: untimed requests, default 1).",
)
@click.option("--iterations", type=int, default=10, show_default=True, help="Minimum timed iterations.")
@click.option(
    "--target-ci",
    default="1%",
    show_default=True,
    help="Stop a case once its P50's 95% interval is within ± this (e.g. 1%, 0.5%); 0: no precision target.",
)
@click.option(
    "--rounds",
    type=int,
    default=10,
    show_default=True,
    help="Interleaved comparisons: at least this many rounds (each case runs once per round, order varied).",
)
@click.option("--no-interleave", is_flag=True, help="Time the cases of a comparison one after another, not in rounds.")
@click.option("--min-time", type=float, default=1.0, show_default=True, help="Minimum seconds of timed loop.")
@click.option(
    "--max-time",
    type=float,
    default=60.0,
    show_default=True,
    help="Maximum seconds of timed loop (wins over --iterations).",
)
@click.option(
    "--case-timeout", type=float, default=600.0, show_default=True, help="Seconds before a case's worker is killed."
)
@click.option(
    "--input-sets", type=int, default=4, show_default=True, help="Distinct input sets rotated through the loop."
)
@click.option(
    "--input", "inputs", multiple=True, help="A model input's shape: NAME:1x3x224x224 (batch follows --batch)."
)
@click.option("--option", "-O", multiple=True, help="Backend option KEY=VALUE, e.g. onnxruntime.opt_level=basic.")
@click.option("--compile-mode", help="torch-compile mode (default, reduce-overhead, max-autotune...).")
@click.option(
    "--ort-opt-level",
    type=click.Choice(["disable", "basic", "extended", "all"]),
    help="ONNX Runtime graph optimization level.",
)
@click.option("--ov-hint", type=click.Choice(["latency", "throughput"]), help="OpenVINO performance hint.")
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), help="Results file (default: results/bench-<time>.json)."
)
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    help="Finish the plan stored in a results file (its remaining cases, in order); no matrix flags with it.",
)
@click.option(
    "--resume-extend", is_flag=True, help="With --resume: add the cases of the matrix flags given to the plan."
)
@click.option(
    "--check-parity", is_flag=True, help="Check each case's outputs against the fp32 reference; no speedup when wrong."
)
@click.option(
    "--no-roofline", is_flag=True, help="Skip achieved GFLOP/s and the fraction of this machine's measured peak."
)
@click.option("--no-history", is_flag=True, help="Do not record this run in the history database.")
@click.option(
    "--cold-start", is_flag=True, help="Time a fresh process to its first result per backend, without and with caches."
)
@click.option("--no-isolation", is_flag=True, help="Run cases in this process (debugging only).")
@click.option("--allow-mixed-precision", is_flag=True, help="Show speedups across effective precisions (marked).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs.")
@click.option("--prompt-len", type=int, default=64, show_default=True, help="--task generate: prompt tokens.")
@click.option("--gen-len", type=int, default=32, show_default=True, help="--task generate: tokens generated.")
@click.option("--requests", type=int, default=5, show_default=True, help="--task generate: timed requests per case.")
@click.option("--slo-ttft-ms", type=float, help="--task generate: goodput SLO, time to first token at most this.")
@click.option("--slo-tpot-ms", type=float, help="--task generate: goodput SLO, time per output token at most this.")
@click.pass_context
def bench(
    ctx: click.Context,
    models: tuple[str, ...],
    task: str,
    backend: tuple[str, ...],
    fallback: tuple[str, ...],
    batch: tuple[str, ...],
    precision: tuple[str, ...],
    shape_mode: tuple[str, ...],
    dynamic: tuple[str, ...],
    buckets: tuple[str, ...],
    seq_len: int | None,
    streams: tuple[str, ...],
    threads: int,
    warmup: int,
    iterations: int,
    target_ci: str,
    rounds: int,
    no_interleave: bool,
    min_time: float,
    max_time: float,
    case_timeout: float,
    input_sets: int,
    inputs: tuple[str, ...],
    option: tuple[str, ...],
    compile_mode: str | None,
    ort_opt_level: str | None,
    ov_hint: str | None,
    output: Path | None,
    resume: Path | None,
    resume_extend: bool,
    check_parity: bool,
    no_roofline: bool,
    no_history: bool,
    cold_start: bool,
    no_isolation: bool,
    allow_mixed_precision: bool,
    seed: int,
    prompt_len: int,
    gen_len: int,
    requests: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
) -> None:
    """Benchmark models on backends: P50/P99 latency, throughput, peak memory, load time.

    With --task generate, MODELS are LLMs (default tiny-llama, built offline; `tiny-llama:q4_k_m`, a .gguf path,
    or a Hugging Face folder) on generation backends (default llama-cpp; also transformers, vllm, tensorrt-llm).
    """
    if task == "generate":
        from infermeter.cli.generate import run_bench_generate

        run_bench_generate(ctx, output or _default_output())
        return
    from infermeter.cli.generate import GENERATE_ONLY, reject_flags

    reject_flags(ctx, GENERATE_ONLY, "to --task generate (add --task generate)")
    from infermeter.results.env import collect_environment, default_threads

    check_resume_flags(resume, resume_extend, given_plan_flags(ctx))
    if cold_start and no_isolation:
        raise UsageError("--cold-start needs a fresh process per run; drop --no-isolation")
    matrix: Matrix | None = None
    if resume is None or resume_extend:  # a bare --resume takes every one of these from the file's plan
        require_measure_flags(warmup, iterations, min_time, max_time, case_timeout)
        require_positive(input_sets, "--input-sets")
        require_positive(rounds, "--rounds")
        require_positive(threads, "--threads", allow_zero=True)
        if seq_len is not None:
            require_positive(seq_len, "--seq-len")
        specs = [resolve_model(ref) for ref in split_values(models) or [DEFAULT_MODEL]]
        chains = _backend_chains(backend, fallback, specs)
        precisions = choose(precision, PRECISIONS, "--precision")
        shape_modes = choose(shape_mode, SHAPE_MODES, "--shape-mode")
        batches = parse_positive_ints(batch or ["1,16"], "--batch")
        stream_counts = parse_positive_ints(streams, "--streams")
        if not (precisions and shape_modes and batches and chains and stream_counts):
            raise UsageError("nothing to run: --backend, --batch, --precision and --shape-mode need at least one value")
        if (dynamic or buckets) and "dynamic" not in shape_modes:
            raise UsageError("--dynamic and --buckets apply to --shape-mode dynamic; add --shape-mode dynamic")
        overrides = tuple(parse_input_override(text) for text in inputs or ())
        all_names = {i.name for spec in specs for i in spec.inputs}
        if len(specs) == 1 or any(name not in all_names for name, _ in overrides):
            # With one model, every --input must name one of its inputs; resolve_shapes says which exist.
            resolve_shapes(specs[0].inputs, batches[0], overrides)
        flag_values = {"compile_mode": compile_mode, "ort_opt_level": ort_opt_level, "ov_hint": ov_hint}
        flag_options = [f"{OPTION_FLAGS[k]}={v}" for k, v in flag_values.items() if v]
        matrix = Matrix(
            models=tuple(specs),
            backends=tuple(chains),
            precisions=tuple(precisions),
            batches=tuple(batches),
            shape_modes=tuple(shape_modes),
            streams=tuple(stream_counts),
            threads=threads or default_threads(),
            input_shapes=overrides,
            options=parse_options([*flag_options, *option]),
            dynamic=_sizes(dynamic, "--dynamic"),
            buckets=_sizes(buckets, "--buckets"),
            seq_len=seq_len,
            settings=MeasureSettings(
                warmup,
                iterations,
                min_time,
                max_time,
                input_sets,
                case_timeout,
                seed,
                check_parity,
                parse_fraction(target_ci, "--target-ci"),
                rounds,
                not no_interleave,
            ),
        )
    command = ["infermeter", *sys.argv[1:]]
    if resume is not None:
        sweep = resumed_sweep(resume, output, matrix, cold_start, not no_isolation, command, resolve_model)
        stderr.print(f"resuming {resume}: {len(sweep.todo)} of {len(sweep.items)} planned case(s) remain")
    else:
        assert matrix is not None
        environment = collect_environment()
        sweep = new_sweep(output or _default_output(), matrix, cold_start, not no_isolation, command, environment)
    results, path, plan = sweep.results, sweep.path, sweep.items
    cold_start, no_isolation = sweep.plan.cold_start, not sweep.plan.isolate
    write_results(path, results)
    if not cold_start:  # a cold start measures the conversion itself
        _prepare_onnx(sweep.todo)
    trace = run_plan_with_progress(plan, results, path, isolate=not no_isolation)
    if not no_roofline and not cold_start:
        _annotate_roofline(results, path)
    planned_ids = {case.id for item in plan for case in item.chain}
    shown = [c for c in results.cases if c.id in planned_ids]
    if cold_start:
        print_table(
            SummaryTable(COLD_START_COLUMNS, cold_start_rows(shown)), title="cold start: fresh process to first result"
        )
    else:
        print_summary(summary_table(shown, allow_mixed_precision), shown)
    if trace.moved is not None:
        paired = any(case.paired is not None for case in shown)
        stdout.print(
            f"machine speed: moved {trace.moved:.0%} during the run ({len(trace.readings)} probe readings"
            + ("; speedups are paired per round, so a move hits both sides)" if paired else ")")
        )
    stdout.print(f"results: {path}")
    if not no_history:
        from infermeter.results.store import record_run

        problem = record_run(results, path)
        if problem:
            stderr.print(escape(problem), soft_wrap=True)
