"""Deep-learning compilers against the runtimes, on this machine: TVM untuned and tuned, IREE for the host and for a
generic CPU, ONNX Runtime and OpenVINO, each model at batch 1, FP32, the same threads, parity-checked, in one
interleaved `bench` run per model (backend variants, `-b tvm:tune_trials=N`).

    python benchmarks/compilers.py --write-docs                       # resnet18, mobilenet_v2, bert_tiny
    python benchmarks/compilers.py --models tiny_cnn --trials 8 --max-time 3   # a smoke run

Per row: P50, the build's compile and tuning seconds (recorded by the build stage, also on a cache hit), and the
break-even point: after how many inferences the tuning paid for itself against untuned TVM, and against the fastest
other backend of the run ("never" when tuned TVM is not faster). Targets of issue 16: tuned TVM >= 1.5x faster than
untuned on resnet18; the IREE host build >= 5x faster than the generic build. A compiler that loses to ONNX Runtime
or OpenVINO is a finding, and the table says so. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infermeter.backends.variant import variant_label
from infermeter.report.tuning import break_even_inferences, tune_s
from infermeter.results.artifact import Phase
from infermeter.results.io import read_results
from infermeter.results.records import ParityRecord, read_record
from infermeter.results.schema import CaseResult

DOCS = Path(__file__).resolve().parents[1] / "docs" / "compilers.md"
SECTION = "## Benchmark"
MODELS = ("resnet18", "mobilenet_v2", "bert_tiny")


def backends(trials: int) -> list[str]:
    """The rows of every model: the runtimes first (the speedups' baseline is ONNX Runtime), then the compilers."""
    return [
        "onnxruntime",
        "openvino",
        "tvm",
        f"tvm:tune_trials={trials}",
        "iree",
        "iree:target_cpu=generic",
    ]


@dataclass(frozen=True)
class Row:
    """One measured backend of one model."""

    model: str
    label: str
    p50_ms: float | None
    compile_s: float
    tune_s: float
    parity: str
    status: str


def _label(case: CaseResult) -> str:
    """`tvm tune_trials=256`: the backend and its own options, as bench's tables label a variant."""
    own = {key for key in case.options if key.split(".")[0] == case.backend}
    return variant_label(case.backend, case.options, own)


def _row(case: CaseResult) -> Row:
    phases = case.loading.build.build_phases_s if case.loading.build is not None else {}
    parity = read_record(case, ParityRecord)
    verdict = "—" if parity is None else ("pass" if parity.passed else "FAIL")
    p50 = case.latency_ms.p50 if case.ok and case.latency_ms is not None else None
    status = case.status if case.ok else f"{case.status}: {case.error}"
    return Row(case.model, _label(case), p50, phases.get(Phase.COMPILE.value, 0.0), tune_s(case), verdict, status)


def run_model(model: str, args: argparse.Namespace, folder: Path) -> list[Row]:
    """One interleaved bench of every backend on `model`."""
    out = folder / f"{model}.json"
    command = [sys.executable, "-m", "infermeter", "bench", model, "--batch", "1", "--threads", str(args.threads)]
    for backend in backends(args.trials):
        command += ["-b", backend]
    command += ["--max-time", str(args.max_time), "--check-parity", "--no-history", "-o", str(out)]
    command += ["--build-timeout", str(args.build_timeout)]
    print("$", " ".join(command[2:]), flush=True)
    subprocess.run(command, check=False)
    return [_row(case) for case in read_results(out).cases] if out.exists() else []


def break_even(cost_s: float, slower_ms: float | None, faster_ms: float | None) -> str:
    """Inferences after which `cost_s` of tuning is paid back by going from `slower_ms` to `faster_ms`."""
    if slower_ms is None or faster_ms is None:
        return "—"
    count = break_even_inferences(cost_s, slower_ms, faster_ms)
    return "never" if count is None else f"{count:,}"


def table(rows: list[Row]) -> list[str]:
    """The markdown table, with the break-even of each tuned row."""
    lines = [
        "| model | backend | P50 ms | compile s | tuning s | break-even vs untuned | vs fastest other | parity |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        same = [r for r in rows if r.model == row.model]
        untuned = next((r.p50_ms for r in same if r.label == "tvm"), None)
        others = [r.p50_ms for r in same if not r.label.startswith("tvm") and r.p50_ms is not None]
        tuned = row.tune_s > 0
        cells = [
            row.model,
            row.label,
            f"{row.p50_ms:.3f}" if row.p50_ms is not None else row.status,
            f"{row.compile_s:.1f}" if row.compile_s else "—",
            f"{row.tune_s:.0f}" if tuned else "—",
            break_even(row.tune_s, untuned, row.p50_ms) if tuned else "—",
            break_even(row.tune_s, min(others, default=None), row.p50_ms) if tuned else "—",
            row.parity,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def targets(rows: list[Row]) -> list[str]:
    """The issue's two targets, met or not, with the figures."""
    out = []

    def p50(model: str, label: str) -> float | None:
        return next((r.p50_ms for r in rows if r.model == model and r.label == label), None)

    for model in sorted({r.model for r in rows}):
        tuned = next((r for r in rows if r.model == model and r.tune_s > 0), None)
        untuned, host, generic = p50(model, "tvm"), p50(model, "iree"), p50(model, "iree target_cpu=generic")
        if tuned and tuned.p50_ms and untuned:
            ratio = untuned / tuned.p50_ms
            verdict = "met" if ratio >= 1.5 else "NOT met"
            out.append(f"- {model}: tuned TVM {ratio:.2f}x faster than untuned (target 1.5x: {verdict})")
        if host and generic:
            ratio = generic / host
            verdict = "met" if ratio >= 5 else "NOT met"
            out.append(f"- {model}: IREE host build {ratio:.1f}x faster than generic (target 5x: {verdict})")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--trials", type=int, default=256, help="MetaSchedule trials of the tuned TVM row")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-time", type=float, default=20.0)
    parser.add_argument("--build-timeout", type=float, default=7200.0)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="infermeter-compilers-") as scratch:
        rows = [row for model in args.models for row in run_model(model, args, Path(scratch))]
    lines = [*table(rows), "", *targets(rows)]
    print("\n".join(lines))
    if args.write_docs:
        head = DOCS.read_text().split(SECTION)[0] if DOCS.exists() else "# Compilers\n\n"
        from infermeter.machine.environment import collect_environment

        cpu = collect_environment().get("cpu_model") or platform.machine()
        machine = f"{cpu} ({os.cpu_count()} logical CPUs), Python {platform.python_version()}"
        command = f"python benchmarks/compilers.py --trials {args.trials} --threads {args.threads} --write-docs"
        body = [SECTION, "", f"`{command}` on {machine}, batch 1, FP32, {args.threads} threads.", "", *lines, ""]
        DOCS.write_text(head.rstrip() + "\n\n" + "\n".join(body))


if __name__ == "__main__":
    main()
