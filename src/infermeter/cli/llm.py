"""`infermeter llm`: LLM generation's own commands: `llm bench` (generation backends: TTFT, TPOT, tokens/s),
`llm quantize` (llama.cpp GGUF levels) and `llm load` (an OpenAI-compatible server under load)."""

from __future__ import annotations

from pathlib import Path

import click

from infermeter.cli.bench_generate import llm_bench
from infermeter.cli.common import require_positive
from infermeter.cli.generate import quantize_gguf
from infermeter.cli.serving import llm_load
from infermeter.core.errors import UsageError
from infermeter.llm.gguf_quant import DEFAULT_LEVELS


@click.command("quantize")
@click.argument("model")
@click.option("--levels", default=",".join(DEFAULT_LEVELS), show_default=True, help="llama.cpp levels.")
@click.option("--output", "-o", type=click.Path(path_type=Path), help="The folder for the variants.")
@click.option(
    "--compare",
    is_flag=True,
    help="Measure each level (size, memory, TTFT, tokens/s, perplexity, top-1 agreement with f16).",
)
@click.option("--prompt-len", type=int, default=64, show_default=True, help="--compare: prompt tokens.")
@click.option("--gen-len", type=int, default=32, show_default=True, help="--compare: tokens generated per request.")
@click.option("--requests", type=int, default=5, show_default=True, help="--compare: timed requests per level.")
@click.option("--threads", type=int, default=0, help="--compare: threads (0: physical cores).")
@click.option("--results", type=click.Path(path_type=Path), help="--compare: also write the levels as a results file.")
def llm_quantize(
    model: str,
    levels: str,
    output: Path | None,
    compare: bool,
    prompt_len: int,
    gen_len: int,
    requests: int,
    threads: int,
    results: Path | None,
) -> None:
    """Quantize an LLM to llama.cpp levels: MODEL is tiny-llama, a Hugging Face Llama folder, or an F32/F16 .gguf;
    writes its variants at --levels to the -o folder; --compare measures and compares them."""
    if output is None and not compare:
        raise UsageError("llm quantize needs -o FOLDER for the variants (or --compare to measure them)")
    if results is not None and not compare:
        raise UsageError("--results needs --compare: the results are the measured levels")
    require_positive(threads, "--threads", allow_zero=True)
    quantize_gguf(model, levels, output, compare, prompt_len, gen_len, requests, threads, results)


@click.group("llm")
def llm() -> None:
    """LLM generation: benchmark generation backends (bench), quantize to llama.cpp levels (quantize), load an
    OpenAI-compatible server (load)."""


llm.add_command(llm_bench)
llm.add_command(llm_quantize)
llm.add_command(llm_load)
