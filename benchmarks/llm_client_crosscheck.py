"""Cross-check of `infermeter llm load URL` against an independent LLM load client: NVIDIA's aiperf.

Both clients load the same OpenAI-compatible server (llama-cpp-python's server started here on the model's GGUF,
or any server given with --url), with the same model, prompt and output lengths (exact: `ignore_eos`), greedy
streaming completions, in a closed loop at each concurrency, interleaved (the order alternates every round) for
several rounds. The table gives the median over rounds of TTFT P50, TPOT P50 and output tokens/s for each
client and their ratio (ours / aiperf's). aiperf lives in .venv-crosscheck (`make install-crosscheck`); it
counts tokens with the model's Hugging Face tokenizer, which is written here from the GGUF when needed.

Usage:
    python benchmarks/llm_client_crosscheck.py [--model tiny-llama|smollm2-135m] [--url URL --served-name NAME]
        [--concurrency 1,4] [--prompt-len 64] [--gen-len 32] [--requests 16] [--rounds 3] [--threads 2]
        [--quick] [--write-docs] [--machine-note "quiet machine"]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infermeter.llm.models import TINY, resolve_gguf, tiny_llama_folder
from infermeter.llm.openai_bench import make_prompt
from infermeter.llm.openai_server import (
    RunningServer,
    free_port,
    llama_cpp_server_command,
    llama_cpp_server_flags,
    started_server,
)
from infermeter.models.convert import cache_root
from infermeter.results.io import read_results
from infermeter.results.records import GenerationSummary, read_record

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "llm-client-crosscheck.md"
AIPERF = ROOT / ".venv-crosscheck" / "bin" / "aiperf"
CLIENTS = ("infermeter load", "aiperf")
SMOKE_NOTE = """
**A smoke run (`--quick`: one round of 4 requests) on a machine busy with other work, whose load changed from
one run to the next: the table shows its shape, not the agreement (a ratio far from 1 here is the machine, not
the clients; see the concurrency-2 TPOT). Rerun without `--quick` on a quiet machine.**
"""
FIGURES = (("ttft_p50_ms", "TTFT P50 ms"), ("tpot_p50_ms", "TPOT P50 ms"), ("output_tokens_per_s", "output tokens/s"))


@dataclass(frozen=True)
class Figures:
    """One run of one client at one concurrency."""

    client: str
    concurrency: int
    ttft_p50_ms: float
    tpot_p50_ms: float
    output_tokens_per_s: float
    requests_ok: int


def cpu_list(text: str) -> set[int]:
    """`0`, `1-3` or `0,2`: a set of CPU numbers (empty text: no pinning)."""
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pinned(cpus: set[int]) -> Callable[[], None] | None:
    """A preexec_fn that pins the child to `cpus` (None when not pinning): the clients' own CPU then never slows
    the server they measure, which on a 2-vCPU machine is the largest error either client could make."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def llama_server(
    gguf: Path, alias: str, threads: int, cpus: set[int]
) -> contextlib.AbstractContextManager[RunningServer]:
    """llama-cpp-python's OpenAI-compatible server on `gguf`, pinned to `cpus`, started for a load run (no request
    is cut short for another: both clients must receive full-length responses, `llm.openai_server`)."""
    port = free_port()
    flags = llama_cpp_server_flags(alias, n_ctx=2048, threads=threads)
    command = llama_cpp_server_command(gguf, port, flags)
    return started_server(command, f"http://127.0.0.1:{port}", timeout_s=300, preexec_fn=pinned(cpus))


def tokenizer_folder(model: str) -> Path:
    """A Hugging Face tokenizer folder for aiperf: tiny-llama's own, or one written from the GGUF by transformers."""
    if model == TINY:
        return tiny_llama_folder()
    gguf = resolve_gguf(model)
    target = cache_root() / "crosscheck-tokenizers" / f"{gguf.stem}-{gguf.stat().st_size}"
    if not (target / "tokenizer_config.json").is_file():
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(target))
    return target


def prompt_tokens(folder: Path, prompt_len: int) -> int:
    """How many tokens `load`'s prompt of `prompt_len` words is for this tokenizer (aiperf's lengths are tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    counts = [len(tokenizer(make_prompt(prompt_len, i), add_special_tokens=False)["input_ids"]) for i in range(8)]
    return round(statistics.mean(counts))


def run_ours(url: str, name: str, level: int, args: argparse.Namespace, folder: Path) -> Figures:
    out = folder / f"ours-{level}.json"
    command = [sys.executable, "-m", "infermeter", "llm", "load", url, "--model-name", name]
    command += ["--concurrency", str(level), "--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len)]
    command += ["--requests", str(args.requests), "--ignore-eos", "-o", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, preexec_fn=pinned(args.client_cpu_set))
    summary = read_record(read_results(out).cases[0], GenerationSummary)
    assert summary is not None and summary.ttft_ms is not None and summary.tpot_ms is not None
    return Figures(
        CLIENTS[0], level, summary.ttft_ms.p50, summary.tpot_ms.p50, summary.output_tokens_per_s, summary.succeeded
    )


def run_aiperf(url: str, name: str, level: int, args: argparse.Namespace, folder: Path, isl: int) -> Figures:
    out = folder / f"aiperf-{level}-{time.monotonic_ns()}"
    command = [str(AIPERF), "profile", "--model", name, "--url", url, "--endpoint-type", "completions"]
    command += ["--streaming", "--concurrency", str(level), "--request-count", str(args.requests)]
    command += ["--prompt-input-tokens-mean", str(isl), "--prompt-input-tokens-stddev", "0"]
    command += ["--prompt-output-tokens-mean", str(args.gen_len), "--prompt-output-tokens-stddev", "0"]
    command += ["--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0"]
    command += ["--tokenizer", str(args.tokenizer), "--output-artifact-dir", str(out), "--ui-type", "none"]
    command += ["--warmup-request-count", "1", "--no-server-metrics", "--no-gpu-telemetry"]
    # Not HF_HUB_OFFLINE: in offline mode aiperf 0.13 looks a tokenizer up in the hub cache only and refuses a
    # local folder (HFValidationError); online, a local folder is loaded as it is, with no request made.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, preexec_fn=pinned(args.client_cpu_set))
    export = out / "profile_export_aiperf.json"  # the profiling phase (phases/ holds warm-up and profiling apart)
    if proc.returncode != 0 or not export.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"aiperf failed ({proc.returncode}): {' | '.join(tail)}")
    data = json.loads(export.read_text())
    metric = lambda key, stat: float(data[key][stat])  # noqa: E731 - aiperf's JSON: {metric: {stat: value}}
    return Figures(
        CLIENTS[1],
        level,
        metric("time_to_first_token", "p50"),
        metric("inter_token_latency", "p50"),  # aiperf's ITL is (E2E - TTFT) / (output tokens - 1): our TPOT
        metric("output_token_throughput", "avg"),
        int(metric("request_count", "avg")),
    )


def run_rounds(url: str, name: str, args: argparse.Namespace, isl: int) -> list[Figures]:
    results: list[Figures] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for round_index in range(args.rounds):
            for level in args.levels:
                order = (0, 1) if (round_index + level) % 2 == 0 else (1, 0)  # alternate who goes first
                for which in order:
                    if which == 0:
                        results.append(run_ours(url, name, level, args, folder))
                    else:
                        results.append(run_aiperf(url, name, level, args, folder, isl))
                    print(f"round {round_index + 1} c={level}: {results[-1]}", flush=True)
    return results


def table(results: list[Figures], levels: list[int]) -> str:
    def median(client: str, level: int, field: str) -> float:
        return statistics.median(getattr(r, field) for r in results if r.client == client and r.concurrency == level)

    rows = ["| concurrency | figure | infermeter load | aiperf | ratio |", "|---:|---|---:|---:|---:|"]
    for level in levels:
        for field, label in FIGURES:
            ours, theirs = median(CLIENTS[0], level, field), median(CLIENTS[1], level, field)
            ratio = ours / theirs if theirs else float("nan")
            rows.append(f"| {level} | {label} | {ours:.2f} | {theirs:.2f} | {ratio:.3f} |")
    return "\n".join(rows)


def _cpu() -> str:
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def _aiperf_version() -> str:
    proc = subprocess.run(
        [str(AIPERF.parent / "python"), "-m", "pip", "show", "aiperf"], capture_output=True, text=True
    )
    return next((line.split(":", 1)[1].strip() for line in proc.stdout.splitlines() if line.startswith("Version")), "?")


def write_docs(rendered: str, command: str, args: argparse.Namespace, isl: int) -> None:
    text = f"""# `llm load` cross-checked against aiperf

`infermeter llm load URL` is checked here against NVIDIA's aiperf ({_aiperf_version()}, an independent
LLM load client, in its own venv: `make install-crosscheck`) on the same server: {args.server_label}, model
`{args.model}`, prompts of {args.prompt_len} words for `load` (about {isl} tokens; aiperf was asked for {isl}
tokens of its own synthetic text), {args.gen_len} output tokens exactly (`ignore_eos`), greedy, streaming
`/v1/completions`, a closed loop of {args.requests} requests per run at each concurrency, {args.rounds} round(s),
the two clients interleaved (the order alternates every round). Figures are medians over rounds; ratios are
`load` / aiperf. Machine: {_cpu()}, {os.cpu_count()} logical CPUs, **{args.machine_note}**; {args.placement}.
{SMOKE_NOTE if args.quick else ""}
Command: `{command}`

{rendered}

## How each counts

- **TTFT**: both clients start the clock just before the request is written and stop it at the first streamed
  chunk that carries text. `load` reads `time.perf_counter()` in its asyncio loop (httpx); aiperf takes its
  timestamps in its worker processes (aiohttp) and reports `time_to_first_token`.
- **TPOT**: both are (E2E - TTFT) / (output tokens - 1) per request. aiperf calls it `inter_token_latency`
  and counts output tokens by re-tokenizing the streamed text with the model's tokenizer (a byte-level BPE
  can merge two streamed tokens into one when re-tokenized, so its count can be a little lower); `load`
  counts the server's `usage.completion_tokens` when the server sends it, else one token per text chunk.
- **Output tokens/s**: `load` divides all output tokens of a level by the time from its first request sent
  to its last answer received; aiperf divides by its own benchmark duration (from its first request to its
  last response), after one warm-up request that is not counted. With few requests per run the ramp up and
  the tail weigh more, so this figure differs more than the per-request ones.
- **Prompts**: `load` sends words of the shipped text; aiperf its own synthetic text of the same token count.
  Same length, different tokens: prefill costs the same, but the server's prompt cache never helps either.
- **Queueing**: llama-cpp-python's server decodes one sequence at a time; at concurrency 2 a request waits for
  the one ahead of it, and both clients count that wait in its TTFT (not in its TPOT).
"""
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=TINY, help="tiny-llama, smollm2-135m or a .gguf path")
    parser.add_argument("--url", help="an OpenAI-compatible server already running (default: start llama.cpp's)")
    parser.add_argument("--served-name", help="the model's name on --url (default: --model)")
    parser.add_argument("--tokenizer", type=Path, help="HF tokenizer folder for aiperf (default: from the model)")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--gen-len", type=int, default=32)
    parser.add_argument("--requests", type=int, default=16, help="requests per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, help="the llama.cpp server's threads (default: its CPUs, else 2)")
    two = (os.cpu_count() or 1) >= 2
    parser.add_argument("--server-cpus", default="0" if two else "", help="CPUs the server is pinned to ('' for none)")
    parser.add_argument(
        "--client-cpus",
        default=f"1-{(os.cpu_count() or 2) - 1}" if two else "",
        help="CPUs both clients are pinned to ('' for none)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: one round, 4 requests, concurrency 1,2")
    parser.add_argument("--machine-note", default="quiet machine", help="how busy the machine was (for the doc)")
    parser.add_argument("--write-docs", action="store_true", help=f"write {DOCS.name}")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.requests, args.concurrency = 1, 4, "1,2"
    args.levels = [int(c) for c in args.concurrency.split(",")]
    server_cpus, args.client_cpu_set = cpu_list(args.server_cpus), cpu_list(args.client_cpus)
    args.threads = args.threads or len(server_cpus) or 2
    args.placement = (
        f"the server runs on CPU(s) {args.server_cpus} and both clients on CPU(s) {args.client_cpus} (pinned), so a "
        "client's own work never takes the server's CPU"
        if server_cpus and args.client_cpu_set
        else "the server and both clients share the CPUs, so each client's own work slows the server it measures"
    )
    if not AIPERF.is_file():
        raise SystemExit(f"aiperf is not installed at {AIPERF}: run `make install-crosscheck`")
    args.tokenizer = args.tokenizer or tokenizer_folder(args.model)
    isl = prompt_tokens(args.tokenizer, args.prompt_len)
    name = args.served_name or args.model
    with contextlib.ExitStack() as stack:
        if args.url:
            url, args.server_label = args.url, f"the server at {args.url}"
        else:
            url = stack.enter_context(llama_server(resolve_gguf(args.model), name, args.threads, server_cpus)).url
            args.server_label = f"llama-cpp-python's server ({args.threads} threads, one sequence at a time)"
        results = run_rounds(url, name, args, isl)
    rendered = table(results, args.levels)
    print(rendered)
    if args.write_docs:
        command = shlex.join(["python", "benchmarks/llm_client_crosscheck.py", *sys.argv[1:]])
        write_docs(rendered, command, args, isl)
        print(f"wrote {DOCS}")


if __name__ == "__main__":
    main()
