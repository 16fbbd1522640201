"""The seeds' framework comparison on this machine, through the real CLI, written to docs/frameworks.md.

mobilenet_v2 and resnet18 (and minilm at sequence length 128 when the zoo has it), batch 1 and 16, fp32, every
available CPU backend that can run the model; P50/P99/throughput/peak memory/load time per case. Then a
cross-check of infermeter's OpenVINO figure against OpenVINO's own `benchmark_app` on the same ONNX file, shapes,
precision hint (f32), threads and latency hint, reported as the ratio of medians.

    python benchmarks/frameworks.py            # full settings (take final figures on a quiet machine)
    python benchmarks/frameworks.py --small    # a quick run that proves the pipeline works
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from infermeter.backends.registry import backend_names, get_backend
from infermeter.case import Case
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import resolve_shapes
from infermeter.models.spec import ModelSpec, resolve_model
from infermeter.models.zoo import ZOO
from infermeter.results.env import collect_environment, default_threads
from infermeter.results.io import read_results
from infermeter.results.schema import CaseResult

ROOT = Path(__file__).resolve().parent.parent
SEQ_LEN = 128
BATCHES = (1, 16)
RATIO_TOLERANCE = 0.05


def models() -> list[str]:
    """The seeds' models; minilm joins automatically once the zoo has it."""
    return ["mobilenet_v2", "resnet18"] + (["minilm"] if "minilm" in ZOO else [])


def seq_overrides(spec: ModelSpec) -> list[tuple[str, tuple[int, ...]]]:
    """Shape overrides fixing non-batch symbolic dims (the sequence length of text models) to SEQ_LEN."""
    return [
        (item.name, (1, *(d if isinstance(d, int) else SEQ_LEN for d in item.shape[1:])))
        for item in spec.inputs
        if any(isinstance(d, str) for d in item.shape[1:])
    ]


def input_flags(spec: ModelSpec) -> list[str]:
    """The `--input NAME:1xS` flags of `seq_overrides` (the batch axis follows --batch)."""
    return [f for name, dims in seq_overrides(spec) for f in ("--input", f"{name}:{'x'.join(map(str, dims))}")]


def cpu_backends(spec: ModelSpec, threads: int) -> list[str]:
    """Every available, non-synthetic CPU backend that can run `spec` in fp32."""
    chosen = []
    for name in backend_names():
        cls = get_backend(name)
        if cls.synthetic or cls.device != "cpu" or cls.available() is not None:
            continue
        if cls.unsupported_reason(spec, Case(spec.ref, name, "fp32", 1, "static", threads)) is None:
            chosen.append(name)
    return chosen


def run_bench(command: list[str]) -> None:
    print("$", shlex.join(command), flush=True)
    completed = subprocess.run(command, text=True, capture_output=True)
    print(completed.stdout[-4000:], completed.stderr[-2000:], sep="\n", flush=True)
    if completed.returncode != 0:
        raise SystemExit(f"infermeter bench failed with exit code {completed.returncode}")


def benchmark_app_median_ms(onnx: Path, shapes: dict[str, tuple[int, ...]], threads: int, seconds: float) -> float:
    """OpenVINO's own benchmark_app on `onnx`: sync API, latency hint, f32 inference precision, `threads`.

    benchmark_app refuses -nthreads next to -hint (a UI rule of the tool), so the thread count, hint and precision
    go in through -load_config, which sets the same CPU properties infermeter sets."""
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config.json"
        config.write_text(
            json.dumps(
                {
                    "CPU": {
                        "PERFORMANCE_HINT": "LATENCY",
                        "INFERENCE_NUM_THREADS": str(threads),
                        "INFERENCE_PRECISION_HINT": "f32",
                    }
                }
            )
        )
        shape = ",".join(f"{name}[{','.join(map(str, dims))}]" for name, dims in shapes.items())
        command = [
            str(Path(sys.executable).with_name("benchmark_app")),
            *("-m", str(onnx), "-d", "CPU", "-shape", shape, "-hint", "latency"),
            *("-load_config", str(config), "-api", "sync", "-t", f"{seconds:g}"),
        ]
        print("$", shlex.join(command), flush=True)
        out = subprocess.run(command, text=True, capture_output=True, check=True).stdout
    match = re.search(r"Median:\s+([\d.]+)\s*ms", out)
    if not match:
        raise SystemExit(f"could not find the median latency in benchmark_app's output:\n{out[-2000:]}")
    return float(match.group(1))


def row(case: CaseResult) -> str:
    if case.status != "ok" or case.latency_ms is None:
        return f"| {case.model} | {case.backend} | {case.batch} | {case.status}: {case.error} | | | | | |"
    stats = case.latency_ms
    return (
        f"| {case.model} | {case.backend} | {case.batch} | {case.precision_effective} | {stats.p50:.3f} | "
        f"{stats.p99:.3f} | {case.throughput or 0:.1f} | {case.peak_rss_mb or 0:.0f} | {case.load_s or 0:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="few iterations: proves the pipeline, not the figures")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: physical cores)")
    parser.add_argument("--models", default="", help="comma-separated subset of the models")
    parser.add_argument("--skip-backends", default="", help="comma-separated backends to leave out")
    parser.add_argument("--results-dir", type=Path, default=ROOT / "results")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "frameworks.md")
    args = parser.parse_args()
    threads = args.threads or default_threads()
    timing = ["--warmup", "3", "--iterations", "20", "--min-time", "0.5"] if args.small else []
    timing += ["--warmup", "10", "--iterations", "200", "--min-time", "5"] if not args.small else []
    skipped = {b for b in args.skip_backends.split(",") if b}
    chosen_models = [m for m in models() if not args.models or m in args.models.split(",")]
    args.results_dir.mkdir(parents=True, exist_ok=True)

    commands: list[str] = []
    cases: list[CaseResult] = []
    for name in chosen_models:
        spec = resolve_model(name)
        backends = [b for b in cpu_backends(spec, threads) if b not in skipped]
        output = args.results_dir / f"frameworks-{name}.json"
        command = [sys.executable, "-m", "infermeter", "bench", name, "-b", ",".join(backends)]
        command += ["--batch", ",".join(map(str, BATCHES)), "--precision", "fp32", "--threads", str(threads)]
        command += [*input_flags(spec), *timing, "-o", str(output)]
        run_bench(command)
        commands.append(shlex.join(["infermeter", *command[3:]]))
        cases += read_results(output).cases

    checks = []
    for name in chosen_models:
        spec = resolve_model(name)
        onnx = onnx_for(spec).path
        for batch in BATCHES:
            ours = [c for c in cases if c.model == name and c.backend == "openvino" and c.batch == batch]
            if not ours or ours[0].latency_ms is None:
                continue
            shapes = resolve_shapes(spec.inputs, batch, seq_overrides(spec))
            theirs = benchmark_app_median_ms(onnx, shapes, threads, 3 if args.small else 15)
            checks.append((name, batch, ours[0].latency_ms.p50, theirs))

    env = collect_environment()
    machine = (
        f"{env['cpu_model']}, {env['physical_cores']} physical / {env['logical_cores']} logical cores, "
        f"ISA {' '.join(env['isa'])}, {env['memory_total_gb']} GB, {env['os']}, Python {env['python']}"
    )
    frameworks = ", ".join(f"{k} {v}" for k, v in sorted(env["frameworks"].items()))
    lines = [
        "# Framework comparison (CPU, fp32)",
        "",
        f"Machine: {machine}.  ",
        f"Frameworks: {frameworks}.  ",
        f"Threads: {threads}. Settings: {'SMALL (smoke run: figures are not final)' if args.small else 'full'}.",
        "",
        "Generated by `python benchmarks/frameworks.py" + (" --small" if args.small else "") + "`, which ran:",
        "",
        *[f"    {c}" for c in commands],
        "",
        "| model | backend | batch | effective precision | P50 ms | P99 ms | throughput/s | peak MB | load s |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
        *[row(c) for c in cases],
        "",
        "## OpenVINO cross-check against `benchmark_app`",
        "",
        "Same ONNX file, shapes, INFERENCE_PRECISION_HINT f32, threads and LATENCY hint, sync API.",
        "",
        "| model | batch | infermeter P50 ms | benchmark_app median ms | ratio | within 5% |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, batch, ours_ms, theirs_ms in checks:
        ratio = ours_ms / theirs_ms if theirs_ms else float("nan")
        within = "yes" if abs(ratio - 1) <= RATIO_TOLERANCE else "**no**"
        lines.append(f"| {name} | {batch} | {ours_ms:.3f} | {theirs_ms:.2f} | {ratio:.3f} | {within} |")
    lines.append("")
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
