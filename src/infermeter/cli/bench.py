"""`infermeter bench`: measure a matrix of cases and print the summary table."""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from infermeter.case import MeasureSettings
from infermeter.cli.cluster import check_cluster_flags, check_plan_machines, cluster_connection
from infermeter.cli.common import (
    RESHAPE_HELP,
    parse_fraction,
    parse_options,
    parse_positive_ints,
    split_values,
    stderr,
    stdout,
)
from infermeter.cli.resume import check_resume_flags, given_plan_flags
from infermeter.cli.soak import allocators, print_soak, soak_options, soak_settings
from infermeter.errors import UsageError
from infermeter.measure.plan import Matrix
from infermeter.measure.request import BenchRequest, build_matrix, cli_flag
from infermeter.measure.shapes import EVERY_SIZE, parse_sizes
from infermeter.models.input_flags import parse_input_flags
from infermeter.models.reshape import parse_reshape
from infermeter.models.spec import resolve_model
from infermeter.report.coldstart import COLD_START_COLUMNS, cold_start_rows
from infermeter.report.summary import SummaryTable, summary_table
from infermeter.terminal import ConsoleDisplay, print_summary, print_table

# Convenience flags that set a backend option (the same as `-O key=value`).
OPTION_FLAGS = {
    "compile_mode": "torch-compile.mode",
    "ort_opt_level": "onnxruntime.opt_level",
    "ov_hint": "openvino.hint",
}


def _default_output() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"bench-{stamp}.json"


def _resumes_generation(resume: Path) -> bool:
    """True when the results file to resume holds a generation plan (`bench --task generate`): a bare `--resume`
    replays it whatever --task says."""
    from infermeter.generate.sweep import TASK, plan_task
    from infermeter.results.io import read_results

    return plan_task(read_results(resume)) == TASK


def _sizes(values: tuple[str, ...], flag: str, points: int = 8) -> tuple[tuple[str, tuple[int, ...]], ...]:
    parsed = [parse_sizes(text, flag, points) for text in values]
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
    "--batch",
    multiple=True,
    help="Batch sizes, e.g. 1,16 (default: 1,16, or the batch the model fixes; with --task generate: sequences, 1).",
)
@click.option("--precision", multiple=True, help="fp32, fp16, bf16, int8 (default: the model's own, int8 for a "
              "quantized model, else fp32).")  # fmt: skip
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
@click.option(
    "--repeat",
    type=int,
    default=1,
    show_default=True,
    help="Run each case in this many fresh processes spread over the run; its P50 interval and `compare` then use "
    "the processes as replicates (costs N times the measuring time; docs/repeat.md).",
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
    "--case-timeout",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds before a case's worker is killed (a soak's: seconds without progress).",
)
@click.option(
    "--build-timeout",
    type=float,
    default=3600.0,
    show_default=True,
    help="Seconds one artifact's build (compilation, engine build, auto-tuning) may take, apart from the case.",
)
@click.option(
    "--input-sets", type=int, default=4, show_default=True, help="Distinct input sets rotated through the loop."
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    help="A model input's shape, NAME:1x3x224x224 (batch follows --batch), or a constant, NAME=VALUE (sr=16000).",
)
@click.option(
    "--data",
    help="Real inputs rotated through the loop, batched: an .npz, a folder of .npy or of images, or file.py:function.",
)
@click.option("--reshape", multiple=True, metavar="NAME:DIMS", help=RESHAPE_HELP)
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
@click.option(
    "--cluster",
    envvar="RAY_ADDRESS",
    help="Run the cases on a Ray cluster, one case per node at a time: its address (HEAD:6379), or `local` to start "
    "one here; also RAY_ADDRESS. Needs infermeter[cluster] (docs/cluster.md).",
)
@click.option(
    "--machines",
    multiple=True,
    help="With --cluster: the machine classes (node label infermeter.io/machine) every case runs on, e.g. "
    "xeon-amx,epyc-zen4, or all.",
)
@click.option("--allow-mixed-precision", is_flag=True, help="Show speedups across effective precisions (marked).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs.")
@click.option("--prompt-len", type=int, default=64, show_default=True, help="--task generate: prompt tokens.")
@click.option("--gen-len", type=int, default=32, show_default=True, help="--task generate: tokens generated.")
@click.option("--requests", type=int, default=5, show_default=True, help="--task generate: timed requests per case.")
@click.option("--slo-ttft-ms", type=float, help="--task generate: goodput SLO, time to first token at most this.")
@click.option("--slo-tpot-ms", type=float, help="--task generate: goodput SLO, time per output token at most this.")
@soak_options
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
    reshape: tuple[str, ...],
    dynamic: tuple[str, ...],
    buckets: tuple[str, ...],
    seq_len: int | None,
    streams: tuple[str, ...],
    threads: int,
    warmup: int,
    iterations: int,
    target_ci: str,
    rounds: int,
    repeat: int,
    no_interleave: bool,
    min_time: float,
    max_time: float,
    case_timeout: float,
    build_timeout: float,
    input_sets: int,
    inputs: tuple[str, ...],
    data: str | None,
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
    cluster: str | None,
    machines: tuple[str, ...],
    allow_mixed_precision: bool,
    seed: int,
    prompt_len: int,
    gen_len: int,
    requests: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    **soak_flags: Any,
) -> None:
    """Benchmark models on backends: P50/P99 latency, throughput, peak memory, load time.

    With --task generate, MODELS are LLMs (default tiny-llama, built offline; `tiny-llama:q4_k_m`, a .gguf path,
    or a Hugging Face folder) on generation backends (default llama-cpp; also transformers, vllm, tensorrt-llm).
    """
    if task == "generate" or (resume is not None and _resumes_generation(resume)):
        from infermeter.cli.bench_generate import run_bench_generate

        run_bench_generate(ctx, output, _default_output())
        return
    from infermeter.cli.generate import GENERATE_ONLY, reject_flags

    reject_flags(ctx, GENERATE_ONLY, "to --task generate (add --task generate)")
    from infermeter.measure.benchrun import new_sweep, resumed_sweep, run_bench
    from infermeter.results.env import collect_environment

    check_resume_flags(resume, resume_extend, given_plan_flags(ctx))
    if cold_start and no_isolation:
        raise UsageError("--cold-start needs a fresh process per run; drop --no-isolation")
    machine_names = tuple(split_values(machines))
    check_cluster_flags(cluster, machine_names, threads if resume is None or resume_extend else None)
    display = ConsoleDisplay()
    matrix: Matrix | None = None
    if resume is None or resume_extend:  # a bare --resume takes every one of these from the file's plan
        flag_values = {"compile_mode": compile_mode, "ort_opt_level": ort_opt_level, "ov_hint": ov_hint}
        flag_options = [f"{OPTION_FLAGS[k]}={v}" for k, v in flag_values.items() if v]
        settings = MeasureSettings(
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
            build_timeout,
        )
        settings = soak_settings(replace(settings, repeat=repeat), soak_flags, not no_isolation)
        shapes, values = parse_input_flags(inputs)
        request = BenchRequest(
            models=tuple(split_values(models)),
            backends=tuple(split_values(backend)),
            fallback=tuple(tuple(split_values([chain])) for chain in fallback),
            batch=tuple(parse_positive_ints(batch, "--batch")),  # none: 1,16, or the batch the model fixes
            precision=tuple(split_values(precision)),
            shape_mode=tuple(split_values(shape_mode)),
            streams=tuple(parse_positive_ints(streams, "--streams")),
            threads=threads,
            inputs=shapes,
            options=parse_options([*flag_options, *option]),
            dynamic=_sizes(dynamic, "--dynamic", EVERY_SIZE if settings.soaking else 8),  # a soak: every size
            buckets=_sizes(buckets, "--buckets"),
            seq_len=seq_len,
            settings=settings,
            data=data,
            input_values=values,
            reshape=parse_reshape(reshape),
            allocators=allocators(soak_flags),
        )
        matrix = build_matrix(request, display.note, cli_flag)
    command = ["infermeter", *sys.argv[1:]]
    with cluster_connection(cluster):
        if matrix is not None and machine_names:
            from infermeter.cluster.session import resolve_machines

            matrix = replace(matrix, machines=resolve_machines(machine_names))
        if resume is not None:
            sweep = resumed_sweep(resume, output, matrix, cold_start, not no_isolation, command, resolve_model)
            stderr.print(
                f"resuming {resume}: {len(sweep.todo)} of {len(sweep.items)} planned case(s) remain", soft_wrap=True
            )
        else:
            assert matrix is not None
            environment = collect_environment()
            sweep = new_sweep(output or _default_output(), matrix, cold_start, not no_isolation, command, environment)
        check_plan_machines(sweep.todo, cluster)
        run = run_bench(sweep, display, roofline=not no_roofline, history=not no_history, on_cluster=bool(cluster))
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
