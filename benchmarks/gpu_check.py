"""Run every GPU path once on a tiny model and print one table: for the first machine with an NVIDIA GPU.

The paths: the native TensorRT backend, ONNX Runtime's CUDA and TensorRT execution providers, the CUDA branch of
`infermeter peak`, and the vLLM and TensorRT-LLM generation backends when they are installed. Each runs through
infermeter's own Python API or CLI, in a process group of its own under its own timeout (the timeouts add up to
under 8 minutes), so a hang or a crash in one engine costs only its row. Each row says `ok` with its key figure
(P50 ms, or TFLOP/s for the peak), `skipped` with the reason (the engine is not installed, or cannot run here) or
`failed` with the engine's own message line, and the seconds it took.

Where there is no NVIDIA GPU it says so and exits 0. Exit status 1 when a path failed.

    python benchmarks/gpu_check.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Tiny models, so that a path's time is its engine's start-up, build and first runs, not the model's size.
INFER_MODEL = "tiny_cnn"
GENERATE_MODEL = "tiny-llama"
TOTAL_BUDGET_S = 8 * 60  # what every path's timeout together must stay under
STATUS_WIDTH = 60


@dataclass(frozen=True)
class CheckRow:
    """One path's outcome: `status` is ok, skipped or failed; `figure` the key figure when ok, `detail` why not."""

    path: str
    status: str
    figure: str = ""
    detail: str = ""
    seconds: float = 0.0


def _case_outcome(case: Any) -> tuple[str, str, str]:
    """(status, figure, detail) of one measured case of a results file (its error already says why, first)."""
    if case.ok:
        return "ok", f"P50 {case.latency_ms.p50:.3f} ms", ""
    reason = _first_line(case.error or "") or case.status
    return ("skipped" if case.status == "unavailable" else "failed"), "", f"{case.status}: {reason}"


def _bench(backend: str, precision: str = "fp32") -> Callable[[Path], tuple[str, str, str]]:
    """An inference backend through `infermeter.bench`, one short case at batch 1."""

    def run(_workdir: Path) -> tuple[str, str, str]:
        import infermeter as im

        results = im.bench(
            INFER_MODEL, backends=[backend], batch=1, precision=precision, min_time_s=0.3, max_time_s=5,
            target_ci=0, roofline=False, progress=False,
        )  # fmt: skip
        return _case_outcome(results.cases[0])

    return run


def _peak_cuda(_workdir: Path) -> tuple[str, str, str]:
    """The CUDA branch of `infermeter peak`: the GPU's compute ceilings, measured with CUDA events."""
    from infermeter.machine.ceilings import measure_gpu_peak

    peak = measure_gpu_peak()
    if peak is None:
        return "skipped", "", "torch sees no CUDA device (a CPU build of torch?)"
    shown = [f"{key.split('_')[0]} {peak[key] / 1000:.1f}" for key in ("fp16_gflops", "fp32_gflops") if peak.get(key)]
    if not shown:
        return "failed", "", f"no compute ceiling measured on {peak.get('device', 'the GPU')}"
    return "ok", f"{', '.join(shown)} TFLOP/s", ""


def _generate(backend: str) -> Callable[[Path], tuple[str, str, str]]:
    """A generation backend through `infermeter llm bench`, when installed."""

    def run(workdir: Path) -> tuple[str, str, str]:
        from infermeter.llm.backends import get_generation_backend
        from infermeter.results.io import read_results

        reason = get_generation_backend(backend).available()
        if reason:
            return "skipped", "", reason
        out = workdir / "generate.json"
        command = [sys.executable, "-m", "infermeter", "llm", "bench", GENERATE_MODEL, "-b", backend]
        command += ["--prompt-len", "16", "--gen-len", "8", "--requests", "4", "-o", str(out)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if not out.is_file() or not read_results(out).cases:
            return "failed", "", _last_line(done.stderr) or f"exit status {done.returncode}, no results"
        return _case_outcome(read_results(out).cases[0])

    return run


@dataclass(frozen=True)
class GpuPath:
    """A GPU path: its name in the table, its timeout and what its own process runs."""

    name: str
    timeout_s: int
    run: Callable[[Path], tuple[str, str, str]]


PATHS: tuple[GpuPath, ...] = (
    GpuPath("tensorrt", 70, _bench("tensorrt")),
    GpuPath("onnxruntime-cuda", 45, _bench("onnxruntime-cuda")),
    GpuPath("onnxruntime-tensorrt", 70, _bench("onnxruntime-tensorrt")),
    GpuPath("peak (CUDA)", 75, _peak_cuda),
    GpuPath("vllm (generate)", 100, _generate("vllm")),
    GpuPath("tensorrt-llm (generate)", 100, _generate("tensorrt-llm")),
)


def _last_line(text: str) -> str:
    """The engine's message in a child's output: the last non-empty line (where Python puts the exception)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _first_line(text: str) -> str:
    """An error's first non-empty line: what infermeter's messages and most engines' say first is why."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def run_child(command: Sequence[str], timeout_s: float) -> tuple[int | None, str, str]:
    """(exit status, stdout, stderr) of `command` in a process group of its own; None and the whole group killed
    when it outlives `timeout_s` (the engines start processes of their own: workers, compilers)."""
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return None, out, err
    return proc.returncode, out, err


def check(path: GpuPath) -> CheckRow:
    """Run one path in its own process under its timeout and read its outcome."""
    started = time.perf_counter()
    code, out, err = run_child([sys.executable, __file__, "--path", path.name], path.timeout_s)
    seconds = time.perf_counter() - started
    if code is None:
        return CheckRow(path.name, "failed", detail=f"timed out after {path.timeout_s} s", seconds=seconds)
    try:
        status, figure, detail = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        detail = _last_line(err) or f"exit status {code}, no outcome"
        return CheckRow(path.name, "failed", detail=detail, seconds=seconds)
    return CheckRow(path.name, status, figure, detail, seconds)


def format_table(rows: Sequence[CheckRow]) -> str:
    """The table: path, status (with the reason when not ok), key figure, seconds; one line per path."""
    header = ("path", "status", "key figure", "seconds")
    cells = [
        (r.path, r.status if r.status == "ok" else f"{r.status}: {r.detail}", r.figure or "—", f"{r.seconds:.1f}")
        for r in rows
    ]
    widths = [max(len(row[i]) for row in (header, *cells)) for i in range(4)]
    widths[1] = min(widths[1], STATUS_WIDTH)  # a long engine message runs on; the other rows stay aligned

    def line(values: Sequence[str]) -> str:
        return "  ".join([*(v.ljust(w) for v, w in zip(values[:3], widths, strict=False)), values[3].rjust(widths[3])])

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(c) for c in cells)])


def _run_one(name: str) -> int:
    path = next(p for p in PATHS if p.name == name)
    with tempfile.TemporaryDirectory(prefix="infermeter-gpu-check-") as workdir:
        try:
            outcome = path.run(Path(workdir))
        except Exception as exc:  # the engine's failure is the row's content, not a crash of the check
            outcome = ("failed", "", f"{type(exc).__name__}: {_first_line(str(exc))}")
    print(json.dumps(list(outcome)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", choices=[p.name for p in PATHS], help=argparse.SUPPRESS)  # one path, in a child
    args = parser.parse_args(argv)
    if args.path:
        return _run_one(args.path)
    from infermeter.backends._gpu import gpu_name, nvidia_gpu_reason

    reason = nvidia_gpu_reason()
    if reason:
        print(f"no GPU here: {reason}; nothing to check")
        return 0
    limit_s = sum(p.timeout_s for p in PATHS)
    print(f"GPU: {gpu_name()}; {len(PATHS)} paths, at most {limit_s} s (budget {TOTAL_BUDGET_S} s)", flush=True)
    rows = []
    for path in PATHS:
        rows.append(check(path))
        print(f"  {path.name}: {rows[-1].status} ({rows[-1].seconds:.0f} s)", file=sys.stderr, flush=True)
    print(format_table(rows))
    return 1 if any(r.status == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
