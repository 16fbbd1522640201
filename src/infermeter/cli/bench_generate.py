"""`infermeter llm bench`: a generation sweep from the parsed flags, through the one plan and sweep (`llm.sweep`):
the plan stored in the results file, cases interleaved per comparison group, `--resume`."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource
from rich.markup import escape

from infermeter.cli.common import parse_fraction, require_positive, stderr, stdout
from infermeter.cli.generate import generation_table, given_flags, make_slo
from infermeter.cli.resume import check_resume_flags, given_plan_flags
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.llm.plan import GenerationMatrix
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:
    from infermeter.llm.sweep import GenerationSweep

# llm bench's plan parameters that bench has not (`cli.resume.PLAN_PARAMS` names the shared ones): refused with a
# bare --resume, which replays the stored plan.
GENERATION_PLAN_PARAMS = ("prompt_len", "gen_len", "requests", "slo_ttft_ms", "slo_tpot_ms")


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def _measure(ctx: click.Context) -> MeasureSettings:
    """The stop rule and rounds of a generation case. A flag not given keeps the generation default: no --min-time
    and no --target-ci (exactly --requests timed requests, one per round when interleaved), at most --case-timeout."""
    params = ctx.params
    min_time = params["min_time"] if _given(ctx, "min_time") else 0.0
    max_time = params["max_time"] if _given(ctx, "max_time") else params["case_timeout"]
    require_positive(min_time, "--min-time", allow_zero=True)
    require_positive(max_time, "--max-time")
    require_positive(params["rounds"], "--rounds")
    return MeasureSettings(
        min_time_s=min_time,
        max_time_s=max_time,
        case_timeout_s=params["case_timeout"],
        seed=params["seed"],
        target_ci=parse_fraction(params["target_ci"], "--target-ci") if _given(ctx, "target_ci") else 0.0,
        rounds=params["rounds"] if _given(ctx, "rounds") else 1,
        interleave=not params["no_interleave"],
    )


def generation_matrix(ctx: click.Context) -> GenerationMatrix:
    """llm bench's flags as a generation matrix (defaults: tiny-llama on llama-cpp, batch 1, one warm-up request);
    UsageError for a bad value, an unknown backend or a bad `-O`, before anything runs."""
    from infermeter.backends.options import options_for
    from infermeter.cli.common import parse_options, parse_positive_ints, split_values
    from infermeter.llm.backends import get_generation_backend
    from infermeter.results.env import default_threads

    params = ctx.params
    for flag in ("prompt_len", "gen_len", "requests"):
        require_positive(params[flag], f"--{flag.replace('_', '-')}")
    warmup = params["warmup"] if _given(ctx, "warmup") else 1
    require_positive(warmup, "--warmup", allow_zero=True)
    backends = tuple(split_values(params["backend"]) or ["llama-cpp"])
    options = parse_options(params["option"])
    for name in backends:
        get_generation_backend(name)  # unknown names are a usage error before any case runs
        options_for(name, options)  # so is a bad -O
    if params["threads"]:
        require_positive(params["threads"], "--threads")
    return GenerationMatrix(
        models=tuple(split_values(params["models"]) or ["tiny-llama"]),
        backends=backends,
        batches=tuple(parse_positive_ints(params["batch"] or ["1"], "--batch")),
        prompt_len=params["prompt_len"],
        gen_len=params["gen_len"],
        requests=params["requests"],
        warmup=warmup,
        threads=params["threads"] or default_threads(),
        options=options,
        timeout_s=params["case_timeout"],
        seed=params["seed"],
        measure=_measure(ctx),
        slo=make_slo(params["slo_ttft_ms"], params["slo_tpot_ms"]),
    )


def _sweep(ctx: click.Context, output: Path | None, default_output: Path) -> GenerationSweep:
    """The new sweep of the flags, or the stored plan of --resume FILE (no plan flags with it)."""
    from infermeter.llm.sweep import new_generation_sweep, resumed_generation_sweep
    from infermeter.machine.environment import collect_environment

    command = ["infermeter", *sys.argv[1:]]
    resume: Path | None = ctx.params["resume"]
    if resume is None:
        isolate = not ctx.params["no_isolation"]
        matrix = generation_matrix(ctx)
        return new_generation_sweep(output or default_output, matrix, isolate, command, collect_environment())
    check_resume_flags(resume, False, [*given_plan_flags(ctx), *given_flags(ctx, GENERATION_PLAN_PARAMS)])
    sweep = resumed_generation_sweep(resume, output, command)
    stderr.print(f"resuming {resume}: {len(sweep.todo)} of {len(sweep.items)} planned case(s) remain", soft_wrap=True)
    return sweep


def run_generation(ctx: click.Context, output: Path | None, default_output: Path) -> None:
    """Make the new sweep or replay the stored plan, run it (Ctrl-C: saved, with the line to resume) and print the
    table and findings."""
    from infermeter.llm.sweep import run_generation_sweep
    from infermeter.report.terminal import ConsoleDisplay

    sweep = _sweep(ctx, output, default_output)
    cases = run_generation_sweep(sweep, ConsoleDisplay())
    matrix = sweep.plan.matrix
    stdout.print(generation_table(cases, f"generation: prompt {matrix.prompt_len}, gen {matrix.gen_len} tokens"))
    print_findings(cases)
    stdout.print(f"results: {escape(str(sweep.path))}")


def _label(case: CaseResult) -> str:
    return f"{case.model} {case.backend} b{case.batch}"


def print_findings(cases: list[CaseResult]) -> None:
    """Under the table: the paired speedup of each case over its interleaved group's first (end-to-end time per
    request, per round; GGUF levels are compared across precisions by design, marked), or why there is none
    (other work disturbed it), then the cases' warnings grouped (interference, too few requests...)."""
    from infermeter.report.summary import speedups
    from infermeter.report.terminal import print_warnings

    by_id = {case.id: case for case in cases}
    found = speedups(cases, allow_mixed_precision=True)
    for case in cases:
        speedup, paired = found.get(case.id), case.timing.paired
        if speedup is None or paired is None or paired.baseline_id not in by_id:
            continue
        against = f"against {_label(by_id[paired.baseline_id])}"
        if speedup.ratio is None:
            text = f"{_label(case)}: no speedup {against}: other work disturbed the timing ({speedup.mark})"
        else:
            ratio = "no difference" if paired.no_difference else f"{paired.ratio:.2f}x"
            mixed = ", different precisions" if speedup.mark == "mixed" else ""
            text = (
                f"{_label(case)}: {ratio} [{paired.ci_low:.2f}–{paired.ci_high:.2f}] {against} "
                f"(E2E per request, paired over {paired.rounds} rounds{mixed})"
            )
        stdout.print(escape(text), soft_wrap=True)
    print_warnings([(_label(case), warning) for case in cases for warning in case.warnings])


@click.command("bench")
@click.argument("models", nargs=-1)
@click.option(
    "--backend", "-b", multiple=True, help="Generation backends (repeat or comma-separate; default llama-cpp)."
)
@click.option("--batch", multiple=True, help="Sequences per request, e.g. 1,4 (default 1).")
@click.option("--threads", type=int, default=0, help="Threads of every backend (0: physical cores).")
@click.option("--prompt-len", type=int, default=64, show_default=True, help="Prompt tokens.")
@click.option("--gen-len", type=int, default=32, show_default=True, help="Tokens generated per request.")
@click.option("--requests", type=int, default=5, show_default=True, help="Timed requests per case.")
@click.option("--warmup", type=int, default=1, show_default=True, help="Untimed requests before the timed ones.")
@click.option("--slo-ttft-ms", type=float, help="Goodput SLO: time to first token at most this.")
@click.option("--slo-tpot-ms", type=float, help="Goodput SLO: time per output token at most this.")
@click.option(
    "--target-ci", help="Go on until the P50 E2E's 95% interval is within ± this (e.g. 5%), within --max-time."
)
@click.option(
    "--rounds", type=int, default=1, show_default=True, help="Interleaved comparisons: at least these rounds."
)
@click.option("--no-interleave", is_flag=True, help="Time the cases of a comparison one after another, not in rounds.")
@click.option("--min-time", type=float, default=0.0, show_default=True, help="Minimum seconds of timed requests.")
@click.option("--max-time", type=float, help="Maximum seconds of timed requests (default: --case-timeout).")
@click.option("--case-timeout", type=float, default=600.0, show_default=True, help="Seconds before a case is killed.")
@click.option("--option", "-O", multiple=True, help="Backend option KEY=VALUE, e.g. fake.decode_ms=3.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the prompts.")
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), help="Results file (default: results/llm-bench-<time>.json)."
)
@click.option(
    "--resume", type=click.Path(path_type=Path), help="Finish the plan stored in a results file (no plan flags)."
)
@click.option("--no-isolation", is_flag=True, help="Run cases in this process (debugging only).")
@click.pass_context
def llm_bench(ctx: click.Context, output: Path | None, resume: Path | None, **flags: object) -> None:
    """Benchmark LLM generation: TTFT, TPOT, end-to-end time, tokens/s, requests/s, goodput, peak memory and load
    time per case. MODELS are LLMs (default tiny-llama, built offline; `tiny-llama:q4_k_m`, a .gguf path, or a
    Hugging Face folder) on generation backends (default llama-cpp; also transformers, vllm, tensorrt-llm).
    Interleaved per comparison group, saved after every case; `--resume FILE` finishes an interrupted sweep."""
    if resume is not None:
        from infermeter.llm.sweep import TASK, plan_task
        from infermeter.results.io import read_results

        if plan_task(read_results(resume)) != TASK:
            raise UsageError(f"{resume} holds an inference plan: resume it with `infermeter bench --resume {resume}`")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_generation(ctx, output, Path("results") / f"llm-bench-{stamp}.json")
