"""Evaluation data, INT8 artifacts and the accuracy of any backend, as thin adapters over `infermeter.quantize`
(its library functions are used as they are; only the glue optimize needs lives here).

Accuracy is always scored the way `infermeter quantize` scores it (`quantize.evaluate.score`): against the FP32
ONNX model's outputs on the evaluation samples, as top-1 against labels when the data has them, else as
agreement with FP32 (top-1 agreement for classifiers, cosine similarity otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.case import Case
from infermeter.errors import BackendUnavailable
from infermeter.models.spec import ModelSpec
from infermeter.quantize.data import (
    RANDOM_CALIBRATION_SAMPLES,
    SampleSet,
    calibration_warnings,
    load_samples,
    random_calibration_warning,
    random_samples,
)
from infermeter.quantize.evaluate import Accuracy, ModelRunner, score, task_kind
from infermeter.results.schema import CaseWarning

RANDOM_EVAL_SAMPLES = 64
# Rows per run when a backend is scored: static shapes, the last batch padded so that nothing recompiles.
EVAL_BATCH = 16


@dataclass
class EvalData:
    """Calibration and evaluation samples, with what a reader must know about them."""

    calib: SampleSet
    evaluation: SampleSet
    notes: list[str] = field(default_factory=list)
    warnings: list[CaseWarning] = field(default_factory=list)

    @property
    def calibrated_on_random(self) -> bool:
        """True when calibration used generated inputs (accuracy of the INT8 model on real data unknown)."""
        return any(w.code == "random_calibration" for w in self.warnings)


def load_eval_data(
    spec: ModelSpec, calib_ref: str | None, eval_ref: str | None, calib_size: int, eval_size: int, seed: int
) -> EvalData:
    """`--calib` / `--eval` as sample sets, with the same fallbacks as `infermeter quantize`: no calibration data
    means random inputs (warned), no evaluation data means agreement with FP32 on the calibration samples, or on
    random inputs when there are none."""
    notes: list[str] = []
    warnings: list[CaseWarning] = []
    if calib_ref:
        calib = load_samples(spec.inputs, calib_ref, calib_size)
    else:
        calib = random_samples(spec.inputs, RANDOM_CALIBRATION_SAMPLES, seed + 1)
        warnings.append(random_calibration_warning(RANDOM_CALIBRATION_SAMPLES))
    evaluation = load_samples(spec.inputs, eval_ref, eval_size) if eval_ref else None
    if calib_ref:
        warnings.extend(calibration_warnings(calib, evaluation))
    if evaluation is None:
        if calib_ref:
            evaluation = calib
            notes.append("no --eval: accuracy is agreement with FP32 on the calibration samples")
        else:
            evaluation = random_samples(spec.inputs, RANDOM_EVAL_SAMPLES, seed + 2)
            notes.append(
                f"no --eval: accuracy is agreement with FP32 on {RANDOM_EVAL_SAMPLES} random inputs "
                "(not a task metric; pass --eval with labelled data for one)"
            )
    what = "labelled: top-1 against the labels" if evaluation.labels is not None else "unlabelled: agreement"
    notes.append(f"evaluation data: {evaluation.count} samples from {evaluation.source} ({what})")
    return EvalData(calib, evaluation, notes, warnings)


@dataclass(frozen=True)
class Reference:
    """The FP32 model's outputs on the evaluation samples, and the metric kind they call for."""

    outputs: np.ndarray
    kind: str
    accuracy: Accuracy


def fp32_reference(fp32_onnx: Path, spec: ModelSpec, evaluation: SampleSet, threads: int) -> Reference:
    """Run the FP32 ONNX model over the evaluation samples (ONNX Runtime, as `quantize` does)."""
    outputs = ModelRunner(fp32_onnx, threads).predict(evaluation)
    kind = task_kind(spec.task, outputs, evaluation.labels is not None)
    return Reference(outputs, kind, score(kind, outputs, outputs, evaluation.labels))


def score_file(path: Path, reference: Reference, evaluation: SampleSet, threads: int) -> Accuracy:
    """Accuracy of an ONNX file run by ONNX Runtime, against the reference."""
    outputs = ModelRunner(path, threads).predict(evaluation)
    return score(reference.kind, reference.outputs, outputs, evaluation.labels)


def _pad(feeds: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
    count = next(iter(feeds.values())).shape[0]
    if count == rows:
        return feeds
    return {k: np.concatenate([v, np.repeat(v[-1:], rows - count, axis=0)]) for k, v in feeds.items()}


@dataclass(frozen=True)
class BackendScore:
    """A backend's accuracy on the evaluation samples, the precision it reported, and what it showed of itself."""

    accuracy: Accuracy
    precision_effective: str
    note: str = ""


def score_backend(
    spec: ModelSpec,
    backend: str,
    precision: str,
    reference: Reference,
    evaluation: SampleSet,
    threads: int,
    options: tuple[tuple[str, str], ...] = (),
) -> BackendScore:
    """Run `spec` on `backend` at `precision` (in this process) over the evaluation samples and score it.
    Raises BackendUnavailable when the backend cannot take the case; its own errors propagate."""
    from infermeter.backends.registry import get_backend
    from infermeter.quantize import metrics

    rows = min(EVAL_BATCH, evaluation.count)
    shapes = tuple((name, (rows, *array.shape[1:])) for name, array in evaluation.arrays.items())
    case = Case(spec.ref, backend, precision, rows, "static", threads, shapes, options)
    cls = get_backend(backend)
    reason = cls.available() or cls.unsupported_reason(spec, case)
    if reason:
        raise BackendUnavailable(reason)
    from infermeter.measure.build import open_session

    session = open_session(spec, case)
    try:
        outputs = []
        for feeds in evaluation.batches(rows):
            count = next(iter(feeds.values())).shape[0]
            result = session.run(session.prepare(_pad(feeds, rows)))
            session.sync()
            out = np.asarray(session.outputs_to_numpy(result)[0], dtype=np.float32)[:count]
            if out.ndim == 3:
                mask = next((v[:count] for k, v in feeds.items() if "mask" in k.lower()), None)
                out = metrics.mean_pool(out, mask)
            outputs.append(out)
        effective = session.effective_precision()
        note = runtime_precision_note(session)
    finally:
        session.close()
    accuracy = score(reference.kind, reference.outputs, np.concatenate(outputs), evaluation.labels)
    return BackendScore(accuracy, effective, note)


def runtime_precision_note(session: Any) -> str:
    """What the engine says its compiled graph runs, layer by layer (`Session.layer_mix`: OpenVINO's runtime
    model), e.g. `runtime: 27 int8, 3 fp32 of 30 compute layers`; "" when the engine cannot say. The precision hint
    says nothing about layers a quantized graph fixes itself."""
    mix = session.layer_mix()
    return "" if mix is None else f"runtime: {mix.describe()}"
