"""llama.cpp built portable (`make install-llm`, GGML_NATIVE=OFF) against built for this CPU
(`make install-llm-native`, GGML_NATIVE=ON, in .venv-llm-native), on the real model, interleaved.

Each round runs `llm bench MODEL -b llama-cpp` once in each venv (the order alternates every round),
with this checkout's source on PYTHONPATH so both run the same infermeter. The table gives, per build, the ISA
its engine reported (`engine_build`), and the median over rounds of TTFT P50, TPOT P50 and output tokens/s, with
the native / portable ratio, and the range over rounds.

Usage:
    make real-llm install-llm-native
    python benchmarks/llm_native_build.py [--model smollm2-135m] [--prompt-len 128] [--gen-len 64] [--requests 10]
        [--threads 2] [--rounds 3] [--quick] [--write-docs] [--machine-note "quiet machine"]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infermeter.llm.engine_build import EngineBuild
from infermeter.results.io import read_results
from infermeter.results.records import GenerationSummary, read_record

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "llm-native-build.md"
BUILDS = {"portable": ROOT / ".venv" / "bin" / "python", "native": ROOT / ".venv-llm-native" / "bin" / "python"}


@dataclass(frozen=True)
class Run:
    """One bench run of one build."""

    build: str
    features: str
    cpu_model: str
    ttft_p50_ms: float
    tpot_p50_ms: float
    output_tokens_per_s: float


def run_build(build: str, args: argparse.Namespace, folder: Path, index: int) -> Run:
    out = folder / f"{build}-{index}.json"
    command = [str(BUILDS[build]), "-m", "infermeter", "llm", "bench", args.model, "-b", "llama-cpp"]
    command += ["--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len)]
    command += ["--requests", str(args.requests), "--threads", str(args.threads), "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    results = read_results(out)
    case = results.cases[0]
    if case.status != "ok":
        raise SystemExit(f"{build}: {case.status}: {case.error}")
    summary = read_record(case, GenerationSummary)
    engine = read_record(case, EngineBuild)
    assert summary is not None and summary.ttft_ms is not None and summary.tpot_ms is not None
    features = ", ".join(f for f in (engine.features if engine else []) if f.startswith(("AVX", "AMX", "FMA")))
    env = results.environment
    cpu = f"{env.get('cpu_model') or 'unknown CPU'}, {env.get('logical_cores')} logical CPUs"
    return Run(build, features, cpu, summary.ttft_ms.p50, summary.tpot_ms.p50, summary.output_tokens_per_s)


def table(runs: list[Run]) -> str:
    """The medians over rounds per build, each with its range over rounds, and the native / portable ratio."""

    def values(build: str, field: str) -> list[float]:
        return [getattr(r, field) for r in runs if r.build == build]

    def cell(build: str, field: str) -> str:
        seen = values(build, field)
        spread = f" ({min(seen):.2f}–{max(seen):.2f})" if len(seen) > 1 else ""
        return f"{statistics.median(seen):.2f}{spread}"

    header = "| figure | portable: median (range over rounds) | native: median (range) | native / portable |"
    rows = [header, "|---|---:|---:|---:|"]
    features = {r.build: r.features for r in runs}
    rows.append(f"| ISA reported | {features['portable']} | {features['native']} | |")
    for field, label in (
        ("ttft_p50_ms", "TTFT P50 ms"),
        ("tpot_p50_ms", "TPOT P50 ms"),
        ("output_tokens_per_s", "output tokens/s"),
    ):
        ratio = statistics.median(values("native", field)) / statistics.median(values("portable", field))
        rows.append(f"| {label} | {cell('portable', field)} | {cell('native', field)} | {ratio:.3f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--gen-len", type=int, default=64)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: one round, 3 requests, 16 tokens")
    parser.add_argument("--machine-note", default="quiet machine")
    parser.add_argument("--portable-python", type=Path, default=BUILDS["portable"], help="python of the portable build")
    parser.add_argument("--write-docs", action="store_true", help=f"write {DOCS.name}")
    args = parser.parse_args()
    BUILDS["portable"] = args.portable_python
    if args.quick:
        args.rounds, args.requests, args.gen_len, args.prompt_len = 1, 3, 16, 32
    missing = [f"{name} ({path})" for name, path in BUILDS.items() if not path.is_file()]
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)}; run `make real-llm install-llm-native`")
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.rounds):
            order = ("portable", "native") if index % 2 == 0 else ("native", "portable")
            for build in order:
                runs.append(run_build(build, args, Path(tmp), index))
                print(runs[-1], flush=True)
    rendered = table(runs)
    print(rendered)
    if args.write_docs:
        command = "python benchmarks/llm_native_build.py " + shlex.join(sys.argv[1:])
        DOCS.write_text(
            f"""# llama.cpp built portable against built for this CPU

`make install-llm` builds llama.cpp with GGML_NATIVE=OFF (a wheel that runs on any x86-64 with AVX2);
`make install-llm-native` builds it with GGML_NATIVE=ON in .venv-llm-native. Model `{args.model}`, prompt
{args.prompt_len} tokens, {args.gen_len} output tokens, {args.requests} requests per run, {args.threads} threads,
{args.rounds} round(s), the two builds interleaved. Medians over rounds. Machine: {runs[0].cpu_model},
**{args.machine_note}**.

Command: `{command}`

{rendered}
"""
        )
        print(f"wrote {DOCS}")


if __name__ == "__main__":
    main()
