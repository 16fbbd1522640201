"""What ONNX Runtime computes an FP16/BF16 graph in, read from one profiled probe run (`compute_precision`), and
recorded on the session: the precision, where it was read, and the `fp32_compute_storage` warning when the
provider ran its kernels in FP32 between inserted casts (the CPU provider on any x86 CPU)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from infermeter.backends._common import dummy_feeds
from infermeter.backends.compute_precision import ComputeReading, ort_profiled
from infermeter.core.case import Case
from infermeter.core.errors import BackendError
from infermeter.models.spec import ModelSpec

if TYPE_CHECKING:
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend, OnnxRuntimeSession


def compute_reading(backend: OnnxRuntimeBackend, model: ModelSpec, case: Case, optimized: str | None,
                    prepared: Any) -> ComputeReading | None:  # fmt: skip
    """The kernels' input types in one profiled run (on `prepared` feeds, else dummy ones) of a probe session made
    like the case's (from the build's `optimized` graph when there is one). Never the CPU's flags: the CPU provider
    has no x86 FP16 Conv/MatMul kernels and inserts casts whatever the CPU offers. None when the probe cannot run."""
    import onnxruntime as ort

    from infermeter.models.convert import onnx_for

    def make(patch: Callable[[Any], None]) -> Any:
        options = backend.session_options(
            ort, model, case, "disable" if optimized is not None else backend.opt_level(case)
        )
        options.log_severity_level = 3
        patch(options)
        return backend.create(ort, optimized or str(onnx_for(model).path), options, case, model)

    try:
        return ort_profiled(make, prepared if prepared is not None else dummy_feeds(model, case))
    except BackendError:
        raise
    except Exception:  # a probe that cannot run says nothing; the graph's own precision stands
        return None


def compute_reader(backend: OnnxRuntimeBackend, session: OnnxRuntimeSession, model: ModelSpec, case: Case,
                   optimized: str | None) -> Callable[[Any], None]:  # fmt: skip
    """What reads `session`'s compute precision (given prepared feeds, or None: dummy ones) and records it."""
    stored = session.stored_precision or "fp32"

    def read(prepared: Any) -> None:
        reading = compute_reading(backend, model, case, optimized, prepared)
        computed = backend.computed_precision(stored, reading, case)
        session.set_compute(computed, reading.evidence() if reading is not None else None)
        note = backend.storage_note(stored, computed)
        if note:
            session.notes.append(note)
            session.warnings.append(("fp32_compute_storage", note))

    return read
