"""Continuous batching, measured: the serving sweep (`infermeter llm load`) on one GGUF model through
llama.cpp's own `llama-server` with 1 slot (no batching across requests) and with 4 slots (continuous batching),
and through vLLM's OpenAI server when `--vllm-python` names a Python with vLLM installed.

Each engine gets a concurrency sweep (1, 2, 4 … --max-concurrency) with the server's /metrics and /slots read
while it runs, then a Poisson rate sweep at fractions of the highest requests/s its concurrency sweep reached.
Results files and the HTML report land in --out; --write-docs writes docs/llm-serving.md (the figures, the knee,
the max concurrency and rate under the SLO, continuous batching on against off, and the machine).

    make llama-server      # builds build/llama-server/bin/llama-server from the llama-cpp-python sdist
    python benchmarks/llm_serving.py MODEL [--vllm-python PATH] [--quick] [--write-docs] [--quiet-machine]

MODEL is a .gguf path or a name `infermeter` resolves (`tiny-llama`, `tiny-llama:q8_0`). Without
--quiet-machine the doc labels every figure "loaded machine".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from infermeter.core.errors import BackendError
from infermeter.llm.openai_server import free_port, started_server

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "llm-serving.md"
RATE_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.25)
START_TIMEOUT_S = 900.0  # vLLM compiles its graphs at every start: 8 min on a loaded 2-vCPU machine


@dataclass(frozen=True)
class Engine:
    """One server to sweep: its name in the tables, the command that starts it on PORT, its model name."""

    series: str
    command: list[str]
    model_name: str


def infermeter(*args: str) -> None:
    command = [sys.executable, "-m", "infermeter", *args]
    print("$", shlex.join(command), flush=True)
    subprocess.run(command, check=False)  # a sweep with failed levels still wrote them; go on


def highest_rps(path: Path) -> float | None:
    from infermeter.llm.serving_verdict import verdicts
    from infermeter.results.io import read_results

    if not path.exists():
        return None
    rps = [p.summary.requests_per_s for v in verdicts(read_results(path).cases) for p in v.points if p.summary]
    return max(rps) if rps and max(rps) > 0 else None


def sweep_engine(engine: Engine, args: argparse.Namespace, load_flags: list[str]) -> tuple[list[Path], str | None]:
    """Start the engine, run its concurrency then rate sweep, stop it; the results files and a start failure."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    slug = engine.series.replace(" ", "_").replace("/", "_")
    log = args.out / f"{slug}.log"
    command = [part.replace("PORT", str(port)) for part in engine.command]
    print("$", shlex.join(command), flush=True)
    with contextlib.ExitStack() as running:
        try:
            running.enter_context(started_server(command, url, timeout_s=START_TIMEOUT_S, log=log))
        except BackendError as failure:
            return [], f"{engine.series}: the server did not start ({failure})"
        common = [url, "--model-name", engine.model_name, "--series", engine.series, *load_flags]
        sweep = args.out / f"{slug}-concurrency.json"
        infermeter("llm", "load", *common, "--scenario", "sweep", "--concurrency", str(args.max_concurrency),
                   "--server-metrics", "-o", str(sweep))  # fmt: skip
        files = [sweep]
        top = highest_rps(sweep)
        if top:
            rates = ",".join(f"{top * f:.3g}" for f in (RATE_FRACTIONS[1::2] if args.quick else RATE_FRACTIONS))
            rated = args.out / f"{slug}-rate.json"
            infermeter("llm", "load", *common, "--rates", rates, "--server-metrics", "-o", str(rated))
            files.append(rated)
        return files, None


def engines(args: argparse.Namespace, model: Path) -> list[Engine]:
    """llama-server with 1 and 4 slots; vLLM with each --vllm-seqs max running sequences when --vllm-python is given."""
    threads = str(args.threads or os.cpu_count() or 1)
    out = []
    for slots in (1, 4):
        command = [
            str(args.llama_server),
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            "PORT",
            "-np",
            str(slots),
            "-c",
            str(slots * args.ctx_per_slot),
            "-t",
            threads,
            "--metrics",
            "--slots",
            "-a",
            "model",
        ]
        out.append(Engine(f"llama-server -np {slots}", command, "model"))
    if args.vllm_python:
        for seqs in args.vllm_seqs:
            command = [
                str(args.vllm_python),
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(args.vllm_model or model),
                "--served-model-name",
                "model",
                "--host",
                "127.0.0.1",
                "--port",
                "PORT",
                "--max-num-seqs",
                str(seqs),
                "--max-model-len",
                str(args.ctx_per_slot),
                "--dtype",
                args.vllm_dtype,
                # On CPU this fraction of the machine's memory is what vLLM wants free at start (weights + KV
                # cache); its default 0.92 refuses to start beside anything else using memory.
                "--gpu-memory-utilization",
                f"{args.vllm_memory_fraction:g}",
            ]
            out.append(Engine(f"vllm max-num-seqs {seqs}", command, "model"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a .gguf path or a model name infermeter resolves (tiny-llama)")
    parser.add_argument("--llama-server", type=Path, default=ROOT / "build/llama-server/bin/llama-server")
    parser.add_argument("--vllm-python", type=Path, help="a Python with vLLM (its CPU build) installed")
    parser.add_argument(
        "--vllm-model",
        help="what vLLM loads (default: MODEL): a Hugging Face folder, e.g. the one "
        "benchmarks/gguf_to_hf.py writes from the same GGUF",
    )
    parser.add_argument(
        "--vllm-seqs",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 4],
        help="vLLM's --max-num-seqs values, one server each (default 1,4; each start compiles again)",
    )
    parser.add_argument("--vllm-memory-fraction", type=float, default=0.3, help="vLLM's --gpu-memory-utilization")
    parser.add_argument("--vllm-dtype", default="bfloat16", help="vLLM's compute precision (default bfloat16)")
    parser.add_argument("--out", type=Path, default=ROOT / "results/llm-serving")
    parser.add_argument("--max-concurrency", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--gen-len", type=int, default=64)
    parser.add_argument("--requests", type=int, help="requests per level (default: the CLI's)")
    parser.add_argument("--ctx-per-slot", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--slo-ttft-ms", type=float, default=2000.0)
    parser.add_argument("--slo-tpot-ms", type=float, default=200.0)
    parser.add_argument("--quick", action="store_true", help="smoke run: concurrency up to 4, short requests")
    parser.add_argument("--write-docs", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    parser.add_argument("--quiet-machine", action="store_true", help="figures taken on a quiet machine")
    args = parser.parse_args()
    if args.quick:
        args.max_concurrency = min(args.max_concurrency, 4)
        args.prompt_len, args.gen_len, args.requests = 32, 16, args.requests or 8
    if not args.llama_server.exists():
        sys.exit(f"{args.llama_server} does not exist: run `make llama-server` first (or pass --llama-server)")
    from infermeter.llm.models import resolve_gguf

    model = resolve_gguf(args.model)
    args.out.mkdir(parents=True, exist_ok=True)
    load_flags = ["--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len), "--ignore-eos",
                  "--slo-ttft-ms", f"{args.slo_ttft_ms:g}", "--slo-tpot-ms", f"{args.slo_tpot_ms:g}"]  # fmt: skip
    if args.requests:
        load_flags += ["--requests", str(args.requests)]
    files: list[Path] = []
    failures: list[str] = []
    for engine in engines(args, model):
        made, failure = sweep_engine(engine, args, load_flags)
        files += made
        failures += [failure] if failure else []
    if files:
        infermeter("report", *map(str, files), "--format", "html", "-o", str(args.out / "report.html"))
    if args.write_docs:
        from llm_serving_doc import write_doc

        write_doc(DOC, args, model, files, failures, sys.argv[1:])
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
