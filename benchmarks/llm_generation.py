"""LLM generation figures on the tiny offline Llama: GGUF levels (size, memory, TTFT, TPOT, tokens/s, quality),
llama.cpp vs transformers, and llama.cpp's OpenAI-compatible server under concurrency 1, 4, 16.

Runs the real CLI (`infermeter llm quantize --compare`, `llm bench`, `llm load`)
and prints its tables; the results files land in the output folder. Needs the `llm` extra (`make install-llm`).
Take the figures on a quiet machine: other processes on the same cores change every number here.

    python benchmarks/llm_generation.py [--out results/llm] [--requests 10] [--gen-len 64]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path


def run(*args: str) -> None:
    command = [sys.executable, "-m", "infermeter", *args]
    print("$", shlex.join(command), flush=True)
    subprocess.run(command, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("results/llm"))
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--gen-len", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    common = ["--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len), "--requests", str(args.requests)]
    common += ["--threads", str(args.threads)]
    levels = ["--levels", "q4_k_m,q5_k_m,q8_0,f16"]
    run("llm", "quantize", "tiny-llama", *levels, "--compare", *common,
        "--results", str(args.out / "gguf-levels.json"))  # fmt: skip
    run("llm", "bench", "tiny-llama", "-b", "llama-cpp,transformers", *common,
        "-o", str(args.out / "backends.json"))  # fmt: skip

    from infermeter.llm.models import resolve_gguf
    from infermeter.llm.openai_server import free_port, llama_cpp_server_command, llama_cpp_server_flags, started_server

    port = free_port()
    command = llama_cpp_server_command(resolve_gguf("tiny-llama"), port, llama_cpp_server_flags("tiny", n_ctx=2048))
    with started_server(command, f"http://127.0.0.1:{port}") as server:
        run(
            "llm", "load", server.url, "--model-name", "tiny", "--concurrency", "1,4,16",
            "--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len),
            "--slo-ttft-ms", "500", "--slo-tpot-ms", "50", "-o", str(args.out / "endpoint.json"),
        )  # fmt: skip


if __name__ == "__main__":
    main()
