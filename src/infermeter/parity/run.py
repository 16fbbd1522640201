"""Running parity checks: the same feeds through a reference and each candidate backend, in this process.

A candidate that cannot load or run is recorded (`error` / `unavailable`) and the others go on. The reference
always computes in fp32: PyTorch eager when the model has a torch form, else ONNX Runtime with graph
optimizations disabled (the plainest execution of the graph).

A candidate can be served a different ONNX file than the model's own (`candidate_onnx`): it is resolved as an
ONNX model and loaded by the candidate backend in place of the model, while the reference keeps the original.
That is how a deliberately corrupted graph is checked, and how a user checks an optimized or edited export
against the model it came from.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.backends.base import Session
from infermeter.backends.registry import get_backend, inference_backends
from infermeter.build.case_build import open_session
from infermeter.core.case import Case
from infermeter.core.errors import (
    BackendError,
    BackendUnavailable,
    InfermeterError,
    ModelError,
    UsageError,
    describe_exception,
)
from infermeter.models.inputs import Feeds
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.parity import (
    OutputMetrics,
    ParityRecord,
    Tolerance,
    compare_output,
    default_tolerance,
    judge,
    parity_to_dict,
    tolerance_for_reference,
)


def reference_backends() -> dict[str, tuple[tuple[str, str], ...]]:
    """The backends that can be the fp32 reference, with the options each runs it with (`Backend.reference_options`)."""
    return {cls.name: cls.reference_options for cls in inference_backends() if cls.reference_options is not None}


def choose_reference(spec: ModelSpec, reference: str | None) -> str:
    """The reference backend: `reference` when given (checked), else torch for models with a torch form,
    onnxruntime for ONNX files, and for another graph file the reference backend whose own format it is (tflite
    for a .tflite), else one that reads it (openvino for an OpenVINO IR: its FP32 run of the same IR)."""
    if reference is None:
        if spec.has_torch_form:
            return "torch"
        suffix = Path(spec.path or spec.ref).suffix.lower()
        if spec.kind != "onnx":
            readers = [name for name in reference_backends() if suffix in get_backend(name).model_files]
            # The file's own runtime first (LiteRT for a .tflite, though OpenVINO reads it too).
            native = [name for name in readers if get_backend(name).model_files[0] == suffix]
            if native or readers:
                return (native or readers)[0]
        return "onnxruntime"
    references = reference_backends()
    if reference not in references:
        raise UsageError(f"--reference {reference!r}: use one of {', '.join(references)}")
    if get_backend(reference).needs_torch_form and not spec.has_torch_form:
        raise UsageError(f"--reference {reference}: {spec.ref} has no PyTorch form; use --reference onnxruntime")
    return reference


def reference_case(case: Case, reference: str) -> Case:
    """The reference's case: the candidate's shapes and threads, in fp32, with the reference's own options."""
    return replace(case, backend=reference, precision="fp32", options=reference_backends().get(reference) or ())


def candidate_spec(spec: ModelSpec, onnx_path: Path) -> ModelSpec:
    """The ModelSpec a backend loads when served `onnx_path` instead of `spec`; its inputs and outputs must
    match the model's (names of inputs, number of outputs), or ModelError says what differs."""
    served = resolve_model(str(onnx_path))
    want = sorted(i.name for i in spec.inputs)
    got = sorted(i.name for i in served.inputs)
    if want != got:
        raise ModelError(f"{onnx_path}: its inputs ({', '.join(got)}) are not the model's ({', '.join(want)})")
    if len(served.output_names) != len(spec.output_names):
        raise ModelError(
            f"{onnx_path}: it has {len(served.output_names)} output(s), the model has {len(spec.output_names)}"
        )
    return served


def run_outputs(session: Session, feed_sets: Sequence[Feeds]) -> list[list[np.ndarray]]:
    """Outputs of `session` for each feed set, as numpy arrays (per feed set, in the model's output order)."""
    outputs = []
    for feeds in feed_sets:
        result = session.run(session.prepare(feeds))
        session.sync()
        outputs.append([np.array(o, copy=True) for o in session.outputs_to_numpy(result)])
    return outputs


def load_and_run(spec: ModelSpec, case: Case, feed_sets: Sequence[Feeds]) -> tuple[list[list[np.ndarray]], str]:
    """Load `case` on `spec`, run every feed set, close; returns (outputs, effective precision).
    Raises `BackendUnavailable` when the backend cannot run the case here; the backend's own errors propagate."""
    backend = get_backend(case.backend)
    reason = backend.available() or backend.unsupported_reason(spec, case)
    if reason:
        raise BackendUnavailable(reason)
    session = open_session(spec, case)
    try:
        return run_outputs(session, feed_sets), session.effective_precision()
    finally:
        session.close()


def stack_samples(per_sample: Sequence[Sequence[np.ndarray]], index: int) -> np.ndarray:
    """Output `index` of every sample, concatenated along the first axis (scalars stacked)."""
    arrays = [np.asarray(outs[index]) for outs in per_sample]
    arrays = [a[None] if a.ndim == 0 else a for a in arrays]
    return np.concatenate(arrays) if len(arrays) > 1 else arrays[0]


def compare_samples(
    output_names: Sequence[str],
    reference: Sequence[Sequence[np.ndarray]],
    candidate: Sequence[Sequence[np.ndarray]],
    tolerance: Tolerance,
) -> list[OutputMetrics]:
    """OutputMetrics per output over all samples (a missing or misshaped output becomes a `problem`)."""
    count = len(reference[0]) if reference else 0
    names = list(output_names) + [f"output{i}" for i in range(len(output_names), count)]
    metrics = []
    for i in range(count):
        if any(len(outs) <= i for outs in candidate):
            metrics.append(OutputMetrics(names[i], tuple(reference[0][i].shape), problem="missing from the outputs"))
            continue
        try:
            ref, cand = stack_samples(reference, i), stack_samples(candidate, i)
        except ValueError as exc:
            metrics.append(OutputMetrics(names[i], (), problem=f"shapes vary between samples: {exc}"))
            continue
        metrics.append(compare_output(names[i], ref, cand, tolerance))
    extra = len(candidate[0]) - count if candidate else 0
    if extra > 0:
        metrics.append(OutputMetrics("(extra)", (), problem=f"{extra} more output(s) than the reference"))
    return metrics


def check_backend(
    spec: ModelSpec,
    case: Case,
    feed_sets: Sequence[Feeds],
    reference_outputs: Sequence[Sequence[np.ndarray]],
    reference: str,
    tolerance: Tolerance,
    served: ModelSpec | None = None,
    session: Session | None = None,
    reference_precision: str | None = None,
) -> ParityRecord:
    """The verdict of one candidate (`case.backend`) against `reference_outputs` on the same `feed_sets`.

    `served` replaces the model the candidate loads (see `candidate_spec`); `session`, when given, is an
    already-loaded session of `case` to use instead of loading one (it is not closed here). Never raises for
    the candidate's own failures: they become `error` (or `unavailable`) records. `reference_precision` is what
    the reference really ran: a looser one than `tolerance`'s (the model's own INT8 graph) sets the tolerance
    (`tolerance_for_reference`).
    """
    tolerance = tolerance_for_reference(tolerance, reference_precision)
    record = ParityRecord(
        case.backend,
        reference,
        precision=case.precision,
        status="error",
        reason="",
        tolerance=tolerance,
        samples=len(feed_sets),
    )
    try:
        if session is not None:
            outputs, effective = run_outputs(session, feed_sets), session.effective_precision()
        else:
            outputs, effective = load_and_run(served or spec, case, feed_sets)
    except BackendUnavailable as exc:
        record.status, record.reason = "unavailable", str(exc)
        return record
    except Exception as exc:
        record.reason = f"{case.backend} failed: {describe_exception(exc)}"
        if not isinstance(exc, InfermeterError):
            record.reason += f"\n{traceback.format_exc(limit=4)}"
        return record
    record.precision_effective = effective
    record.outputs = compare_samples(spec.output_names, reference_outputs, outputs, tolerance)
    passed, reason, worst = judge(record.outputs, tolerance)
    if effective != case.precision:
        reason += f" [effective precision {effective}, requested {case.precision}]"
    record.status, record.reason, record.worst_output = ("pass" if passed else "fail"), reason, worst
    return record


def reference_run(
    spec: ModelSpec, case: Case, feed_sets: Sequence[Feeds], reference: str
) -> tuple[list[list[np.ndarray]], str]:
    """The reference's outputs for `feed_sets` and the precision it really ran (the model's own graph: int8 for
    a quantized model); BackendError when the reference itself cannot run (then no candidate can be judged)."""
    ref_case = reference_case(case, reference)
    try:
        return load_and_run(spec, ref_case, feed_sets)
    except Exception as exc:
        raise BackendError(f"the reference ({reference}) could not run {spec.ref}: {describe_exception(exc)}") from exc


def reference_outputs(
    spec: ModelSpec, case: Case, feed_sets: Sequence[Feeds], reference: str
) -> list[list[np.ndarray]]:
    """The reference's outputs alone (see `reference_run`)."""
    return reference_run(spec, case, feed_sets, reference)[0]


def check_case_parity(
    spec: ModelSpec,
    case: Case,
    *,
    reference: str | None = None,
    samples: int = 2,
    tolerance: Tolerance | None = None,
    session: Session | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Parity of one benchmark case, for `bench --check-parity`: the case's backend against the reference on
    `samples` seeded random feed sets of the case's shapes; returns the JSON-ready `parity` field.

    `tolerance` defaults to the case precision's (`default_tolerance`); `session` reuses a loaded session of
    the case (not closed here); `seed` defaults to the case's input seed. Never raises for the backend's
    failures (status `error`/`unavailable`); a reference that cannot run is reported as an `error` record too.
    """
    from infermeter.models.feeds_data import case_feed_sets

    tolerance = tolerance or default_tolerance(case.precision)
    seed = case.settings.seed if seed is None else seed
    try:
        ref_name = choose_reference(spec, reference)
        feeds = case_feed_sets(spec.inputs, case, samples, seed)  # the case's own data and constants, if any
        expected, ran = reference_run(spec, case, feeds, ref_name)
    except InfermeterError as exc:
        record = ParityRecord(
            case.backend,
            reference or "?",
            precision=case.precision,
            status="error",
            reason=str(exc),
            tolerance=tolerance,
        )
        return parity_to_dict(record)
    record = check_backend(spec, case, feeds, expected, ref_name, tolerance, session=session, reference_precision=ran)
    return parity_to_dict(record)
