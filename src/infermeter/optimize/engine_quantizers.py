"""Step 4a's per-engine INT8: each engine's INT8 artifact is made by that engine's own quantizer
(`Backend.int8_quantizer_for`: ONNX Runtime's static QDQ, NNCF for OpenVINO; an engine with none of its own, such
as TensorRT, runs the QDQ graph), all from the same calibration samples and scored on the same evaluation samples
against the same FP32 reference, so their accuracies and speeds compare. `-O openvino.int8_source=qdq` cross-feeds
ONNX Runtime's QDQ graph to OpenVINO instead. When an engine's INT8 is slower than its FP32, the step says why in
one sentence from the engine's per-node profile (`results.records.why_int8`). The cases of an INT8 file (`int8_spec`,
`request_precision`, `annotate_int8`) are set up here too, for step 4a and for the steps that measure its pick
again."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from infermeter.backends.registry import get_backend
from infermeter.build.int8.ort_quant import QuantConfig
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.optimize.pipeline import INT8_IR, Run
from infermeter.optimize.steps.log import note
from infermeter.quantize.study import Reference, score_file
from infermeter.quantize.study_data import StudyData
from infermeter.results.records import Accuracy, Int8Run, read_record, why_int8, write_record
from infermeter.results.schema import CaseResult

# The quantizer whose graph an engine without one of its own runs (a QDQ ONNX graph is what it reads).
QDQ = "ort-qdq"
NNCF = "nncf"
# How optimize quantizes: static, min/max ranges, per-tensor (what every engine's INT8 kernels take).
CONFIG = QuantConfig("static", "minmax", per_channel=False)


def int8_engines(device: str) -> list[str]:
    """The engines that execute a quantized (QDQ) ONNX graph in int8 on `device` (`Backend.runs_quantized_onnx`)."""
    from infermeter.backends.registry import inference_backends

    return [cls.name for cls in inference_backends() if cls.runs_quantized_onnx and cls.device == device]


def int8_spec(run: Run, ref: str) -> ModelSpec:
    """The ModelSpec of an artifact inside the output folder, named by its path relative to the folder (so that
    case ids do not depend on where the folder is)."""
    return replace(resolve_model(str(run.path(ref))), ref=ref)


def annotate_int8(result: CaseResult) -> None:
    """A case of a quantized file records int8, the precision the file itself fixes (engines are asked for fp32:
    that is their hint for the layers the file leaves in float)."""
    result.precision = "int8"
    if result.precision_effective not in (None, "int8"):
        result.notes.append(
            f"{result.backend} reports {result.precision_effective} (its precision for layers left in float); "
            "the graph's quantized layers run in int8"
        )
        result.precision_effective = "int8"
    result.warnings = [w for w in result.warnings if w.code != "precision_not_requested"]


def engine_quantizer(run: Run, backend: str) -> str:
    """The quantizer that makes `backend`'s INT8 artifact in this run (its own, or the one its options name)."""
    case = run.case(run.spec.ref, backend, "int8")
    return get_backend(backend).int8_quantizer_for(case) or QDQ


def quantizer_groups(run: Run, engines: list[str]) -> dict[str, list[str]]:
    """The engines grouped by the quantizer that makes their INT8 artifact, in the order given."""
    groups: dict[str, list[str]] = {}
    for backend in engines:
        groups.setdefault(engine_quantizer(run, backend), []).append(backend)
    return groups


def nncf_plain(
    run: Run, data: StudyData, reference: Reference, source: Path, details: dict[str, object]
) -> tuple[str, str, Accuracy]:
    """NNCF's INT8 IR of the float model `source` (the FP32 ONNX artifact, or the IR given as the model), calibrated
    on the step's calibration samples and scored on its evaluation samples; cached in the journal for a resume."""
    from infermeter.build.int8.ov_quant import quantize_openvino

    target = run.path(INT8_IR)
    if "nncf" not in details or not target.is_file():
        started = time.perf_counter()
        target.parent.mkdir(parents=True, exist_ok=True)
        how = quantize_openvino(source, target, CONFIG, data.calib)
        seconds = time.perf_counter() - started
        accuracy = score_file(target, reference, data.evaluation, run.request.threads)
        details["nncf"] = {"file": INT8_IR, "accuracy": accuracy.to_dict(), "seconds": round(seconds, 3), "how": how}
        run.save()
    made = details["nncf"]
    assert isinstance(made, dict)
    acc = Accuracy.from_dict(made["accuracy"])
    note(run, "int8", f"NNCF INT8 ({made['how']}, from the step's calibration set): {acc.metric} {acc.value:.4f} vs "
         f"FP32 {acc.fp32_value:.4f}, drop {acc.drop_pct:.2f} points")  # fmt: skip
    if acc.drop_pct > run.request.max_accuracy_drop_pct:
        note(run, "int8", "NNCF INT8 breaks the accuracy budget: the mixed-precision search works on QDQ graphs "
             "(pass -O openvino.int8_source=qdq to run its result on OpenVINO)")  # fmt: skip
    return INT8_IR, "INT8 NNCF", acc


def request_precision(backend: str) -> str:
    """The precision an INT8 file is measured at: int8 where the engine takes it (it then records what ran,
    `Int8Run`), else fp32, the hint for the layers the file leaves in float."""
    return "int8" if "int8" in get_backend(backend).precisions else "fp32"


def label_quantizer(result: CaseResult, quantizer: str) -> None:
    """Name the quantizer that made the artifact in the case's INT8 record (the measurement saw only a file)."""
    record = read_record(result, Int8Run)
    if record is not None:
        own = get_backend(result.backend).int8_quantizer or QDQ
        write_record(result, replace(record, quantizer=quantizer, source="own" if quantizer == own else "cross-fed"))


def explain_if_slower(run: Run, result: CaseResult, fp32: CaseResult | None, variant: str) -> None:
    """When `result` (an INT8 row) is slower than the engine's FP32 row, one sentence on why, from its profile."""
    if fp32 is None or fp32.latency_ms is None or result.latency_ms is None or result.latency_ms.p50 <= 0:
        return
    speedup = fp32.latency_ms.p50 / result.latency_ms.p50
    if speedup >= 1:
        return
    record = read_record(result, Int8Run)
    why = why_int8(record, speedup) if record is not None else ""
    if not why:
        why = f"INT8 was {1 / speedup:.1f}x slower ({result.backend} gives no per-node profile)"
    note(run, "int8", f"{result.backend} {variant}: {why}")
