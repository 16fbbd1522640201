"""The accuracy side of optimize: the INT8 study's data and FP32 reference for a run (`quantize.study_data` and
`quantize.study`, chosen exactly as `quantize` chooses them), and the accuracy of any backend's case.

Accuracy is always scored the way `infermeter quantize` scores it (`quantize.evaluate.score`): against the FP32
model's outputs on the evaluation samples, as top-1 against labels when the data has them, else as agreement
with FP32 (top-1 agreement for classifiers, cosine similarity otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.build.int8.feeds import own as own_inputs
from infermeter.core.case import Case
from infermeter.core.errors import BackendUnavailable, describe_exception
from infermeter.models.samples import SampleSet
from infermeter.models.spec import ModelSpec
from infermeter.optimize.pipeline import FP32_ONNX, Run
from infermeter.optimize.request import OptimizeRequest
from infermeter.optimize.steps.log import note
from infermeter.quantize.evaluate import score
from infermeter.quantize.study import Reference, fp32_reference
from infermeter.quantize.study_data import DataFlags, StudyData, choose_study_data
from infermeter.results.records import Accuracy, AccuracyError, write_record
from infermeter.results.schema import CaseResult

# Rows per run when a backend is scored: static shapes, the last batch padded so that nothing recompiles.
EVAL_BATCH = 16


def study_data(request: OptimizeRequest, spec: ModelSpec) -> StudyData:
    """The request's calibration and evaluation sets, chosen as `quantize` chooses them (`choose_study_data`);
    optimize always quantizes statically."""
    flags = DataFlags(request.calib, request.eval, request.calib_size, request.eval_size, request.seed)
    inputs = own_inputs(spec.inputs, request.input_shapes, request.input_values)
    return choose_study_data(inputs, flags, static=True)


def coarse_budget_note(kind: str, samples: int, max_drop_pct: float) -> str | None:
    """For a classifier scored on `samples` answers, a budget finer than one answer (100/samples points) lets no
    answer change at all: say so, and how many samples a budget of `max_drop_pct` points needs. None otherwise."""
    step_pct = 100.0 / samples if samples else 0.0
    if kind != "classification" or not 0 < max_drop_pct < step_pct:
        return None
    needed = math.ceil(100.0 / max_drop_pct)
    return (
        f"--max-accuracy-drop {max_drop_pct:g} points is finer than one of the {samples} evaluation answers "
        f"({step_pct:.2f} points each): a single changed answer breaks it, so every reduced precision that flips "
        f"one is dropped; pass at least {needed} evaluation samples (--eval-size, or --eval data) to allow one"
    )


def eval_data(run: Run, step: str) -> tuple[StudyData, Reference]:
    """Calibration/evaluation samples and the FP32 reference outputs, loaded once per invocation (the first
    time, `step`'s journal says when the accuracy budget is finer than one evaluation answer)."""
    if "data" not in run.memo:
        data = study_data(run.request, run.spec)
        run.memo["data"] = data
        # The float model the reference runs: the FP32 ONNX artifact, or an OpenVINO IR given as the model.
        ir = run.spec.kind == "openvino_ir" and run.spec.path
        fp32 = Path(run.spec.path) if ir and run.spec.path else run.path(FP32_ONNX)
        reference = fp32_reference(fp32, run.spec.task, data.evaluation, run.request.threads)
        run.memo["reference"] = reference
        coarse = coarse_budget_note(reference.kind, data.evaluation.count, run.request.max_accuracy_drop_pct)
        if coarse:
            note(run, step, coarse)
    return run.memo["data"], run.memo["reference"]


def score_case(run: Run, step: str, spec: ModelSpec, result: CaseResult, precision: str) -> None:
    """Score `result`'s backend at `precision` on the evaluation data (in this process) into its `Accuracy`
    record (or say why not in an `AccuracyError`)."""
    data, reference = eval_data(run, step)
    try:
        scored = score_backend(
            spec, result.backend, precision, reference, data.evaluation, run.request.threads,
            run.options_for(result.backend),
        )  # fmt: skip
    except Exception as exc:
        text = describe_exception(exc)
        write_record(result, AccuracyError(text))
        note(run, step, f"{result.backend} {result.precision}: accuracy could not be measured ({text})")
        run.save()
        return
    write_record(result, scored.accuracy)
    if scored.note:
        result.notes.append(scored.note)
    acc = scored.accuracy
    note(run, step, f"{result.backend} {result.precision}: {acc.metric} {acc.value:.4f} vs FP32 {acc.fp32_value:.4f} "
         f"(drop {acc.drop_pct:.2f} points){'; ' + scored.note if scored.note else ''}")  # fmt: skip
    run.save()


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
    from infermeter.quantize import accuracy_metrics as metrics

    rows = min(EVAL_BATCH, evaluation.count)
    # The first batch's feeds, constant inputs (`--input NAME=VALUE`) included, give the case its static shapes.
    shapes = tuple((name, tuple(array.shape)) for name, array in next(evaluation.batches(rows)).items())
    case = Case(
        spec.ref,
        backend,
        precision=precision,
        batch=rows,
        shape_mode="static",
        threads=threads,
        input_shapes=shapes,
        options=options,
    )
    cls = get_backend(backend)
    reason = cls.available() or cls.unsupported_reason(spec, case)
    if reason:
        raise BackendUnavailable(reason)
    from infermeter.build.case_build import open_session

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
