"""Latency of a model file with the measurement core (an isolated case on ONNX Runtime or OpenVINO), so that
quantized variants are timed exactly like `bench` times them: each in a fresh worker of its own."""

from __future__ import annotations

from pathlib import Path

from infermeter.core.case import Case, MeasureSettings
from infermeter.models.resolve import resolve_model
from infermeter.results.schema import CaseResult

# Short but honest: enough iterations for a stable median on a small model; `bench` is there for more.
QUICK_SETTINGS = MeasureSettings(warmup_iterations=5, min_iterations=30, min_time_s=0.5, max_time_s=10.0)


def file_precision(path: Path) -> str:
    """The precision a model file computes in, read from the file."""
    if path.suffix.lower() == ".xml":
        from infermeter.build.int8.ov_quant import ir_precision

        return ir_precision(path)
    from infermeter.models.spec import onnx_graph_precision

    return onnx_graph_precision(str(path))


def measure_file(
    path: Path,
    threads: int,
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = (),
    settings: MeasureSettings | None = None,
    batch: int = 1,
    input_values: tuple[tuple[str, str], ...] = (),
) -> CaseResult:
    """Measure `path` at `batch` in a fresh worker (`measure.worker.run_isolated`: its own memory, crash and
    timeout). The case's precision is the file's own (a quantized file runs in int8 whatever is asked), recorded
    as such. `settings` default to `QUICK_SETTINGS`, read at call time (a test sets shorter ones)."""
    from infermeter.backends.registry import backend_for_file, get_backend
    from infermeter.measure.worker import run_isolated

    backend = backend_for_file(path.suffix)
    precision = file_precision(path)
    spec = resolve_model(str(path))
    supported = get_backend(backend).precisions
    requested = precision if precision in supported else "fp32"
    case = Case(
        str(path),
        backend,
        precision=requested,
        batch=batch,
        shape_mode="static",
        threads=threads,
        input_shapes=input_shapes,
        options=(),
        settings=settings or QUICK_SETTINGS,
        input_values=input_values,
    )
    result = run_isolated(spec, case)
    if requested != precision:
        # The backend only accepts fp32 requests; the file itself fixes the precision, so record that one.
        result.precision = precision
        result.warnings = [w for w in result.warnings if w.code != "precision_not_requested"]
        result.notes.append(f"precision {precision} is the model file's own (a pre-quantized file)")
    return result
