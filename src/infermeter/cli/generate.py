"""LLM generation's shared CLI parts: the generation table, the flags of one mode refused in another, the SLO,
and `llm quantize`'s flow (llama.cpp levels, `--compare` for size/memory/speed/quality). `llm bench` is in
`cli.bench_generate`, `llm load` in `cli.serving`, the group in `cli.llm`. Only flow and printing live here; the
measuring is in `infermeter.llm`."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import require_positive, stderr, stdout
from infermeter.core.errors import UsageError
from infermeter.llm.generation_metrics import SLO
from infermeter.machine.environment import new_results_file
from infermeter.results.records import Distribution, GenerationCase, GenerationSummary, GgufQuality, read_record
from infermeter.results.schema import CaseResult, ResultsFile, now_iso


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _p50_p99(dist: Distribution | None) -> str:
    return f"{_fmt(dist.p50 if dist else None, 2)} / {_fmt(dist.p99 if dist else None, 2)}"


def _generation_row(result: CaseResult, label: str) -> list[str]:
    """A case's cells under `generation_table`'s columns, from its generation records."""
    gen = read_record(result, GenerationSummary)
    requests = read_record(result, GenerationCase)
    quality = read_record(result, GgufQuality)
    concurrency = requests.concurrency if requests else None
    name = quality.gguf_level if quality else str(concurrency or result.backend)
    if label == "backend" and result.batch > 1:
        name += f" ×{result.batch}"
    size = quality.size_on_disk_mb if quality else requests.model_size_mb if requests else None
    agree = quality.top1_agreement if quality else None
    slo_set = gen is not None and gen.slo.is_set
    return [
        name,
        result.status if result.status == "ok" else f"{result.status}: {result.error or ''}"[:160],
        _p50_p99(gen.ttft_ms if gen else None),
        _p50_p99(gen.tpot_ms if gen else None),
        _fmt(gen.e2e_ms.p50 if gen and gen.e2e_ms else None),
        _fmt(gen.output_tokens_per_s if gen else None),
        _fmt(gen.requests_per_s if gen else None, 2),
        _fmt(gen.goodput_rps, 2) if gen and slo_set else "-",
        _fmt(result.memory.peak_rss_mb, 0),
        _fmt(result.loading.load_s, 2),
        _fmt(size, 2),
        _fmt(quality.perplexity if quality else None, 2),
        "-" if agree is None else f"{agree:.1%}",
        ", ".join(f"{k}={v}" for k, v in (gen.errors_by_kind if gen else {}).items()) or "-",
    ]


def generation_table(results: list[CaseResult], title: str, label: str = "backend") -> Table:
    """One row per case: TTFT, TPOT (P50/P99), E2E P50, tokens/s, memory, load, errors, GGUF size/quality."""
    table = Table(title=escape(title))
    columns = [label, "status", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "E2E p50 ms", "out tok/s", "req/s"]
    columns += ["goodput req/s", "peak MB", "load s", "size MB", "ppl", "top-1 agree", "errors"]
    for column in columns:
        table.add_column(column, justify="left" if column in (label, "status", "errors") else "right")
    several_models = len({result.model for result in results}) > 1
    for result in results:
        row = _generation_row(result, label)
        if several_models and label == "backend":  # the GGUF levels of a model, or several models
            row[0] = f"{result.model} · {row[0]}"
        table.add_row(*(escape(cell) for cell in row))
    return table


def _results_file() -> ResultsFile:

    created = now_iso()
    return new_results_file(["infermeter", *sys.argv[1:]], created=created)


def _save(path: Path | None, results: ResultsFile) -> None:
    if path is not None:
        from infermeter.results.io import write_results

        write_results(path, results)


def given_flags(ctx: click.Context, names: Iterable[str]) -> list[str]:
    """The flags (long spelling) of the parameters in `names` that the user set, in the command's order."""
    wanted = set(names)
    flags = []
    for param in ctx.command.params:
        if param.name not in wanted or not isinstance(param, click.Option):
            continue
        if ctx.get_parameter_source(param.name) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            flags.append(max(param.opts, key=len))
    return flags


def reject_flags(ctx: click.Context, names: Iterable[str], reason: str) -> None:
    """UsageError naming every flag in `names` that was given: "--x applies only {reason}"."""
    flags = given_flags(ctx, names)
    if flags:
        raise UsageError(f"{', '.join(flags)} {'applies' if len(flags) == 1 else 'apply'} only {reason}")


def make_slo(ttft_ms: float | None, tpot_ms: float | None) -> SLO:
    """The goodput SLO of --slo-ttft-ms / --slo-tpot-ms (each optional, positive when given)."""
    for value, flag in ((ttft_ms, "--slo-ttft-ms"), (tpot_ms, "--slo-tpot-ms")):
        if value is not None:
            require_positive(value, flag)
    return SLO(ttft_ms, tpot_ms)


def _threads(threads: int) -> int:
    if threads:
        require_positive(threads, "--threads")
        return threads
    from infermeter.results.env import default_threads

    return default_threads()


def quantize_gguf(
    source: str,
    levels_text: str,
    output_dir: Path | None,
    compare: bool,
    prompt_len: int,
    gen_len: int,
    requests: int,
    threads: int,
    results_path: Path | None,
) -> None:
    """`llm quantize`: write the llama.cpp variants of `source` (to `output_dir` when given) and print them; with
    `compare`, benchmark each (size, memory, TTFT, tokens/s, perplexity, top-1 agreement with f16)."""
    from infermeter.llm.backends.base import GenerateCase
    from infermeter.llm.gguf_compare import compare_levels, make_variants
    from infermeter.llm.gguf_quant import parse_levels

    for value, flag in ((prompt_len, "--prompt-len"), (gen_len, "--gen-len"), (requests, "--requests")):
        require_positive(value, flag)
    levels = parse_levels(levels_text)
    with stderr.status(f"quantizing {escape(source)} to {escape(', '.join(levels))}"):
        variants = make_variants(source, levels, output_dir)
    for variant in variants:
        stdout.print(f"{variant.level:8} {variant.size_mb:9.2f} MB  {escape(str(variant.path))}", soft_wrap=True)
    if not compare:
        return
    template = GenerateCase(
        model=source,
        backend="llama-cpp",
        prompt_len=prompt_len,
        gen_len=gen_len,
        threads=_threads(threads),
        requests=requests,
        warmup=1,
    )
    results = _results_file()

    def measured(result: CaseResult) -> None:
        quality = read_record(result, GgufQuality)
        stderr.print(f"[dim]{escape(quality.gguf_level if quality else result.model)} measured[/dim]")

    from infermeter.llm.packaged import default_text_for

    text_name = default_text_for(source)
    stderr.print(f"[dim]perplexity on the {text_name} text[/dim]")
    results.cases = compare_levels(variants, template, None, measured, text_name)
    _save(results_path, results)
    stdout.print(generation_table(results.cases, f"GGUF levels of {source}", label="level"))
    if results_path:
        stdout.print(f"results: {escape(str(results_path))}")
