"""LLM commands: `generate-bench` (TTFT/TPOT/tokens/s per backend), `gguf` (build, quantize, compare levels) and
`load-openai` (streaming benchmark of an OpenAI-compatible server under concurrency)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import parse_options, parse_positive_ints, require_positive, split_values, stderr, stdout
from infermeter.generate.metrics import SLO
from infermeter.results.schema import CaseResult, ResultsFile


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _dist(summary: dict[str, Any], key: str, stat: str) -> Any:
    entry = summary.get(key)
    return entry.get(stat) if entry else None


def generation_table(results: list[CaseResult], title: str, label: str = "backend") -> Table:
    """One row per case: TTFT, TPOT (P50/P99), E2E P50, tokens/s, memory, load, errors, GGUF size/quality."""
    table = Table(title=title)
    columns = [label, "status", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "E2E p50 ms", "out tok/s", "req/s"]
    columns += ["goodput req/s", "peak MB", "load s", "size MB", "ppl", "top-1 agree", "errors"]
    for column in columns:
        table.add_column(column, justify="left" if column in (label, "status", "errors") else "right")
    for result in results:
        gen = result.extra.get("generate") or {}
        name = str(result.extra.get("gguf_level") or result.extra.get("concurrency") or result.backend)
        if label == "backend" and result.batch > 1:
            name += f" ×{result.batch}"
        agree = result.extra.get("top1_agreement")
        size = result.extra.get("size_on_disk_mb") or result.extra.get("model_size_mb")
        row = [
            name,
            result.status if result.status == "ok" else f"{result.status}: {result.error or ''}"[:160],
            f"{_fmt(_dist(gen, 'ttft_ms', 'p50'), 2)} / {_fmt(_dist(gen, 'ttft_ms', 'p99'), 2)}",
            f"{_fmt(_dist(gen, 'tpot_ms', 'p50'), 2)} / {_fmt(_dist(gen, 'tpot_ms', 'p99'), 2)}",
            _fmt(_dist(gen, "e2e_ms", "p50")),
            _fmt(gen.get("output_tokens_per_s")),
            _fmt(gen.get("requests_per_s"), 2),
            _fmt(gen.get("goodput_rps"), 2)
            if (gen.get("slo") or {}).get("ttft_ms") or (gen.get("slo") or {}).get("tpot_ms")
            else "-",
            _fmt(result.peak_rss_mb, 0),
            _fmt(result.load_s, 2),
            _fmt(size, 2),
            _fmt(result.extra.get("perplexity"), 2),
            "-" if agree is None else f"{agree:.1%}",
            ", ".join(f"{k}={v}" for k, v in (gen.get("errors_by_kind") or {}).items()) or "-",
        ]
        table.add_row(*(escape(cell) for cell in row))
    return table


def _results_file() -> ResultsFile:
    from infermeter.results.env import collect_environment

    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return ResultsFile(created=created, environment=collect_environment(), command=["infermeter", *sys.argv[1:]])


def _save(path: Path | None, results: ResultsFile) -> None:
    if path is not None:
        from infermeter.results.io import write_results

        write_results(path, results)


def _slo(ttft_ms: float | None, tpot_ms: float | None) -> SLO:
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


_common_options = [
    click.option("--prompt-len", type=int, default=64, show_default=True, help="Prompt tokens."),
    click.option("--gen-len", type=int, default=32, show_default=True, help="Generated tokens per request."),
    click.option("--requests", type=int, default=5, show_default=True, help="Timed requests per case."),
    click.option("--warmup", type=int, default=1, show_default=True, help="Untimed requests first."),
    click.option("--threads", type=int, default=0, help="CPU threads (0: physical cores)."),
    click.option("--slo-ttft-ms", type=float, help="Goodput SLO: TTFT at most this."),
    click.option("--slo-tpot-ms", type=float, help="Goodput SLO: TPOT at most this."),
    click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds per case."),
    click.option("--output", "-o", type=click.Path(path_type=Path), help="Results file (JSON)."),
]


def common_options(func: Any) -> Any:
    """Apply the options shared by generate-bench and gguf compare."""
    for option in reversed(_common_options):
        func = option(func)
    return func


@click.command("generate-bench")
@click.argument("models", nargs=-1)
@click.option(
    "--backend",
    "-b",
    multiple=True,
    default=["llama-cpp"],
    show_default=True,
    help="llama-cpp, transformers, vllm, tensorrt-llm.",
)
@click.option("--batch", multiple=True, default=["1"], show_default=True, help="Sequences per request, e.g. 1,4.")
@click.option("--option", "-O", multiple=True, help="Backend option KEY=VALUE, e.g. transformers.dtype=bfloat16.")
@click.option("--no-isolation", is_flag=True, help="Run cases in this process (debugging only).")
@common_options
def generate_bench(
    models: tuple[str, ...],
    backend: tuple[str, ...],
    batch: tuple[str, ...],
    option: tuple[str, ...],
    no_isolation: bool,
    prompt_len: int,
    gen_len: int,
    requests: int,
    warmup: int,
    threads: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    timeout: float,
    output: Path | None,
) -> None:
    """Time generation (TTFT, TPOT, tokens/s, memory, load) of MODELS (default: tiny-llama) on each backend.

    A MODEL is `tiny-llama` (built offline), `tiny-llama:q4_k_m`, a .gguf path (llama-cpp) or a Hugging Face
    folder (transformers, vllm, tensorrt-llm). Temporary hook until `bench --task generate` is wired.
    """
    run_generation_cases(
        models,
        split_values(backend),
        parse_positive_ints(batch, "--batch"),
        prompt_len,
        gen_len,
        requests,
        warmup,
        threads,
        parse_options(option),
        _slo(slo_ttft_ms, slo_tpot_ms),
        timeout,
        output,
        isolate=not no_isolation,
    )


def run_generation_cases(
    models: tuple[str, ...] | list[str],
    backends: list[str],
    batches: list[int],
    prompt_len: int,
    gen_len: int,
    requests: int,
    warmup: int,
    threads: int,
    options: tuple[tuple[str, str], ...],
    slo: SLO,
    timeout: float,
    output: Path | None,
    isolate: bool = True,
) -> ResultsFile:
    """The whole `--task generate` flow for a CLI command: check, run each case, save after each, print.

    Hook for `bench --task generate`: call it with bench's parsed flags (models, backends, batches…)."""
    from infermeter.generate.backends import get_generation_backend
    from infermeter.generate.backends.base import GenerateCase
    from infermeter.generate.runner import execute_generate_case, run_generate_isolated

    for value, flag in ((prompt_len, "--prompt-len"), (gen_len, "--gen-len"), (requests, "--requests")):
        require_positive(value, flag)
    require_positive(warmup, "--warmup", allow_zero=True)
    for name in backends:
        get_generation_backend(name)  # unknown names are a usage error before any case runs
    cases = [
        GenerateCase(
            model=model,
            backend=name,
            prompt_len=prompt_len,
            gen_len=gen_len,
            batch=b,
            threads=_threads(threads),
            requests=requests,
            warmup=warmup,
            options=options,
            timeout_s=timeout,
        )
        for model in (models or ("tiny-llama",))
        for b in batches
        for name in backends
    ]
    results = _results_file()
    for case in cases:
        stderr.print(f"[dim]{escape(case.backend)} · {escape(case.model)} · batch {case.batch}…[/dim]")
        result = run_generate_isolated(case, slo) if isolate else execute_generate_case(case, slo)
        results.cases.append(result)
        _save(output, results)
    stdout.print(generation_table(results.cases, f"generation: prompt {prompt_len}, gen {gen_len} tokens"))
    if output:
        stdout.print(f"results: {escape(str(output))}")
    return results


@click.group("gguf")
def gguf() -> None:
    """GGUF models: build the offline tiny model, quantize to llama.cpp levels, compare the levels."""


@gguf.command("build-tiny")
def build_tiny() -> None:
    """Build (or find in the cache) the tiny test Llama: HF folder and F16 GGUF."""
    from infermeter.generate.models import gguf_from_hf, tiny_llama_folder

    folder = tiny_llama_folder()
    stdout.print(f"hf folder: {escape(str(folder))}")
    stdout.print(f"gguf f16:  {escape(str(gguf_from_hf(folder, 'f16')))}")


@gguf.command("quantize")
@click.argument("source")
@click.option("--levels", default="q4_k_m,q5_k_m,q8_0,f16", show_default=True, help="llama.cpp quantization levels.")
@click.option("--output-dir", "-o", type=click.Path(path_type=Path), required=True, help="Folder for the variants.")
def quantize(source: str, levels: str, output_dir: Path) -> None:
    """Write the GGUF variants of SOURCE (tiny-llama, an HF Llama folder, or a F32/F16 .gguf) to a folder.

    Temporary hook until `quantize --format gguf` is wired."""
    from infermeter.generate.gguf_compare import make_variants
    from infermeter.generate.gguf_quant import parse_levels

    for variant in make_variants(source, parse_levels(levels), output_dir):
        stdout.print(f"{variant.level:8} {variant.size_mb:9.2f} MB  {escape(str(variant.path))}")


@gguf.command("compare")
@click.argument("source")
@click.option("--levels", default="q4_k_m,q5_k_m,q8_0,f16", show_default=True, help="llama.cpp quantization levels.")
@common_options
def compare(
    source: str,
    levels: str,
    prompt_len: int,
    gen_len: int,
    requests: int,
    warmup: int,
    threads: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    timeout: float,
    output: Path | None,
) -> None:
    """Quantize SOURCE to each level and compare size, memory, TTFT, tokens/s, perplexity and top-1 agreement."""
    from infermeter.generate.backends.base import GenerateCase
    from infermeter.generate.gguf_compare import compare_levels, make_variants
    from infermeter.generate.gguf_quant import parse_levels

    variants = make_variants(source, parse_levels(levels))
    template = GenerateCase(
        model=source,
        backend="llama-cpp",
        prompt_len=prompt_len,
        gen_len=gen_len,
        threads=_threads(threads),
        requests=requests,
        warmup=warmup,
        timeout_s=timeout,
    )
    results = _results_file()

    def saved(result: CaseResult) -> None:
        stderr.print(f"[dim]{escape(str(result.extra.get('gguf_level')))} measured[/dim]")

    results.cases = compare_levels(variants, template, _slo(slo_ttft_ms, slo_tpot_ms), saved)
    _save(output, results)
    stdout.print(generation_table(results.cases, f"GGUF levels of {source}", label="level"))
    if output:
        stdout.print(f"results: {escape(str(output))}")


@click.command("load-openai")
@click.argument("url")
@click.option("--model", "model_name", default="default", show_default=True, help="The `model` field sent.")
@click.option("--api-kind", type=click.Choice(["completions", "chat"]), default="completions", show_default=True)
@click.option("--concurrency", multiple=True, default=["1,4,16"], show_default=True, help="Levels, e.g. 1,4,16.")
@click.option("--prompt-len", type=int, default=64, show_default=True, help="Prompt words (of the shipped text).")
@click.option("--gen-len", type=int, default=32, show_default=True, help="max_tokens per request.")
@click.option("--requests", type=int, help="Requests per level (default: max(8, 2 × concurrency)).")
@click.option("--request-timeout", type=float, default=60.0, show_default=True, help="Seconds per request.")
@click.option("--ignore-eos", is_flag=True, help="Send ignore_eos (vLLM, llama.cpp server) for exact lengths.")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Bearer token (default: $OPENAI_API_KEY).")
@click.option("--slo-ttft-ms", type=float, help="Goodput SLO: TTFT at most this.")
@click.option("--slo-tpot-ms", type=float, help="Goodput SLO: TPOT at most this.")
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Results file (JSON).")
def load_openai(
    url: str,
    model_name: str,
    api_kind: str,
    concurrency: tuple[str, ...],
    prompt_len: int,
    gen_len: int,
    requests: int | None,
    request_timeout: float,
    ignore_eos: bool,
    api_key: str | None,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    output: Path | None,
) -> None:
    """Stream completions from an OpenAI-compatible server at URL under each concurrency level.

    Temporary hook until `load URL --api openai` is wired."""
    from infermeter.generate.openai_bench import EndpointSettings, run_endpoint_benchmark

    for value, flag in ((prompt_len, "--prompt-len"), (gen_len, "--gen-len"), (request_timeout, "--request-timeout")):
        require_positive(value, flag)
    if requests is not None:
        require_positive(requests, "--requests")
    settings = EndpointSettings(
        url=url,
        model=model_name,
        api=api_kind,
        prompt_len=prompt_len,
        gen_len=gen_len,
        concurrency=tuple(parse_positive_ints(concurrency, "--concurrency")),
        requests=requests,
        request_timeout_s=request_timeout,
        ignore_eos=ignore_eos,
        api_key=api_key,
        slo=_slo(slo_ttft_ms, slo_tpot_ms),
    )
    results = _results_file()

    def on_level(result: CaseResult) -> None:
        results.cases.append(result)
        _save(output, results)
        stderr.print(f"[dim]concurrency {result.extra['concurrency']} done[/dim]")

    run_endpoint_benchmark(settings, on_level)
    stdout.print(
        generation_table(
            results.cases, f"{escape(url)}: prompt {prompt_len} words, max {gen_len} tokens", label="concurrency"
        )
    )
    if output:
        stdout.print(f"results: {escape(str(output))}")
    if not any(r.status == "ok" for r in results.cases):
        sys.exit(1)
