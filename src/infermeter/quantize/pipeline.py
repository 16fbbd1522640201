"""`infermeter quantize` as a library call: quantize, evaluate against FP32, rank layers, search a mixed model
under an accuracy budget, fine-tune (QAT), and time every variant. Prints nothing; returns a `QuantizeOutcome`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from infermeter.errors import InfermeterError, UsageError
from infermeter.models.input_flags import Sizes, Values
from infermeter.models.reshape import reshape_notes
from infermeter.models.spec import ModelSpec, load_torch_module, resolve_model
from infermeter.quantize.data import (
    RANDOM_CALIBRATION_SAMPLES,
    SampleSet,
    calibration_warnings,
    load_samples,
    random_calibration_warning,
)
from infermeter.quantize.evaluate import Accuracy, ModelRunner, score, task_kind
from infermeter.quantize.feeds import own as own_inputs
from infermeter.quantize.feeds import sample_shapes
from infermeter.quantize.ort_quant import QuantConfig, preprocess, quantize_onnx
from infermeter.quantize.sensitivity import FrontierPoint, LayerSensitivity, greedy_mixed, layer_sensitivity
from infermeter.results.records import QuantizedVariant, write_record
from infermeter.results.schema import CaseResult, CaseWarning


def quantize_engines() -> list[str]:
    """The backends whose framework ships an INT8 quantizer (`Backend.quantizer`): the `--engine` values."""
    from infermeter.backends.registry import inference_backends

    return [cls.name for cls in inference_backends() if cls.quantizer]


@dataclass(frozen=True)
class QuantizeRequest:
    """Everything `infermeter quantize` was asked to do."""

    model: str
    output: Path
    engine: str = "onnxruntime"
    config: QuantConfig = field(default_factory=QuantConfig)
    calib: str | None = None
    calib_size: int = 300
    eval: str | None = None
    sensitivity: bool = False
    max_drop_pct: float | None = None
    finetune: str | None = None
    finetune_epochs: int = 3
    latency: bool = True
    threads: int = 1
    seed: int = 0
    input_shapes: Sizes = ()  # --input NAME:DIMS: the generated samples' shapes
    input_values: Values = ()  # --input NAME=VALUE: constant inputs the data need not hold
    reshape: Sizes = ()  # --reshape NAME:DIMS: the model's declared dims rewritten before anything runs


@dataclass
class ModelRow:
    """One variant (FP32, INT8, mixed, QAT): where it is, what it computes in, how accurate and how fast."""

    role: str
    label: str
    path: Path
    precision: str
    accuracy: Accuracy | None = None
    timing: CaseResult | None = None
    float_nodes: tuple[str, ...] = ()


@dataclass
class QuantizeOutcome:
    """What `quantize_model` did: rows, warnings, notes, the sensitivity ranking and the frontier."""

    output: Path
    rows: list[ModelRow] = field(default_factory=list)
    warnings: list[CaseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sensitivity: list[LayerSensitivity] = field(default_factory=list)
    frontier: list[FrontierPoint] = field(default_factory=list)
    budget_met: bool | None = None


def check_request(request: QuantizeRequest) -> None:
    """UsageError for combinations that cannot work, before any slow step."""
    request.config.check()
    engines = quantize_engines()
    if request.engine not in engines:
        raise UsageError(f"--engine {request.engine!r} is not one of {', '.join(engines)}")
    if request.calib_size <= 0:
        raise UsageError(f"--calib-size {request.calib_size} must be positive")
    if request.max_drop_pct is not None and request.max_drop_pct < 0:
        raise UsageError(f"--max-drop {request.max_drop_pct:g} must be zero or more (percentage points)")
    if request.engine == "openvino" and request.sensitivity:
        raise UsageError("--sensitivity works with --engine onnxruntime (it re-quantizes per layer); with "
                         "--engine openvino, --max-drop runs NNCF's own accuracy control")  # fmt: skip
    if request.engine != "openvino" and request.model.lower().endswith(".xml"):
        raise UsageError(f"{request.model} is an OpenVINO IR: only --engine openvino (NNCF) quantizes it")
    if request.finetune and request.config.mode != "static":
        raise UsageError("--finetune fine-tunes for static quantization; drop --mode dynamic")
    suffix = request.output.suffix.lower()
    wanted = ".xml" if request.engine == "openvino" else ".onnx"
    if suffix != wanted:
        raise UsageError(f"-o {str(request.output)!r}: --engine {request.engine} writes a {wanted} file")


def _fp32_source(spec: ModelSpec, scratch: Path) -> tuple[Path, Path, str]:
    """The float model to quantize (the ONNX form, or an OpenVINO IR as it is) and the file the FP32 reference
    runs (ONNX Runtime's pre-processed graph; the IR itself), with a note."""
    if spec.kind == "openvino_ir" and spec.path:
        return Path(spec.path), Path(spec.path), "OpenVINO IR quantized as it is (NNCF)"
    from infermeter.models.convert import onnx_for

    source = onnx_for(spec).path
    fp32 = scratch / "fp32.onnx"
    return source, fp32, preprocess(source, fp32)


def quantize_model(request: QuantizeRequest, on_progress: Callable[[str], None] | None = None) -> QuantizeOutcome:
    """Run the whole request (see the module docstring). Raises InfermeterError subclasses for bad input."""
    check_request(request)
    progress = on_progress or (lambda _msg: None)
    spec = resolve_model(request.model, request.reshape)
    outcome = QuantizeOutcome(request.output)
    outcome.notes.extend(reshape_notes(spec))
    static = request.config.mode == "static"
    progress("loading data")
    feeds = own_inputs(spec.inputs, request.input_shapes, request.input_values)
    calib = feeds.load(request.calib, request.calib_size) if request.calib else None
    evaluation = feeds.load(request.eval) if request.eval else None
    if static and calib is None:
        calib = feeds.random(RANDOM_CALIBRATION_SAMPLES, request.seed + 1)
        outcome.warnings.append(random_calibration_warning(RANDOM_CALIBRATION_SAMPLES))
    elif calib is not None and not static:
        outcome.notes.append("--calib is not used by dynamic quantization (activation ranges are taken at run time)")
    if calib is not None and request.calib:
        outcome.warnings.extend(calibration_warnings(calib, evaluation))
    if evaluation is None:
        if calib is not None and request.calib:
            evaluation = calib
            outcome.notes.append("no --eval: accuracy is agreement with FP32 on the calibration samples")
        else:
            evaluation = feeds.random(64, request.seed + 2)
            outcome.notes.append("no --eval: accuracy is agreement with FP32 on random inputs (not a task metric)")
    with tempfile.TemporaryDirectory(prefix="infermeter-quantize-") as scratch_name:
        scratch = Path(scratch_name)
        progress("exporting / pre-processing")
        source, fp32, note = _fp32_source(spec, scratch)
        outcome.notes.append(note)
        fp32_runner = ModelRunner(fp32, request.threads)
        fp32_outputs = fp32_runner.predict(evaluation)
        kind = task_kind(spec.task, fp32_outputs, evaluation.labels is not None)
        fp32_accuracy = score(kind, fp32_outputs, fp32_outputs, evaluation.labels)
        outcome.rows.append(ModelRow("fp32", "FP32", source, "fp32", fp32_accuracy))
        request.output.parent.mkdir(parents=True, exist_ok=True)
        cache = scratch / "calibration.json" if static else None
        label = f"INT8 {request.config.mode}" + (f" {request.config.method}" if static else "")
        progress(f"quantizing ({label})")
        if request.engine == "openvino":
            from infermeter.quantize.ov_quant import quantize_openvino

            outcome.notes.append(quantize_openvino(source, request.output, request.config, calib))
            quantized = request.output
        else:
            quantized = scratch / "int8.onnx"
            quantize_onnx(fp32, quantized, request.config, calib, cache)
        accuracy = score(
            kind, fp32_outputs, ModelRunner(quantized, request.threads).predict(evaluation), evaluation.labels
        )
        outcome.rows.append(ModelRow("int8", label, request.output, "int8", accuracy))
        chosen = quantized
        # The ranking re-quantizes ONNX Runtime's QDQ graph per layer: it serves our search, not NNCF's control.
        if request.sensitivity or (request.max_drop_pct is not None and request.engine != "openvino"):
            progress("per-layer sensitivity")
            _, outcome.sensitivity = layer_sensitivity(
                fp32, request.config, calib, evaluation, kind, fp32_outputs, scratch, cache, progress
            )
        if request.max_drop_pct is not None and request.engine == "openvino":
            chosen = _nncf_controlled(request, outcome, source, calib, evaluation, kind, fp32_outputs, scratch)
        elif request.max_drop_pct is not None:
            chosen = _search_mixed(request, outcome, fp32, calib, evaluation, kind, fp32_outputs, scratch, cache)
        if chosen != request.output:
            shutil.copyfile(chosen, request.output)
        if request.finetune:
            _finetune_row(request, outcome, spec, calib, evaluation, kind, fp32_outputs, scratch, progress)
        if request.latency:
            _time_rows(request, outcome, evaluation, progress)
    return outcome


def _nncf_controlled(
    request: QuantizeRequest,
    outcome: QuantizeOutcome,
    source: Path,
    calib: SampleSet | None,
    evaluation: SampleSet,
    kind: str,
    fp32_outputs: Any,
    scratch: Path,
) -> Path:
    """OpenVINO's counterpart of the sensitivity search: when NNCF's plain INT8 breaks --max-drop, NNCF's own
    accuracy control (`ov_quant.quantize_openvino_controlled`), scored like every other row."""
    from infermeter.quantize.ov_quant import float_compute_layers, quantize_openvino_controlled

    assert request.max_drop_pct is not None and calib is not None
    plain = outcome.rows[-1]
    assert plain.accuracy is not None
    outcome.budget_met = plain.accuracy.drop_pct <= request.max_drop_pct
    if outcome.budget_met:
        outcome.notes.append(
            f"plain NNCF INT8 is within --max-drop {request.max_drop_pct:g}: no accuracy control needed"
        )
        return request.output

    target = scratch / "controlled.xml"
    reference = (kind, fp32_outputs)
    outcome.notes.append(
        quantize_openvino_controlled(source, target, calib, evaluation, reference, request.max_drop_pct)
    )
    outputs = ModelRunner(target, request.threads).predict(evaluation)
    accuracy = score(kind, fp32_outputs, outputs, evaluation.labels)
    floats = float_compute_layers(target)
    outcome.budget_met = accuracy.drop_pct <= request.max_drop_pct
    # The plain INT8 IR is no longer the -o output: kept beside it for comparison.
    plain.path = request.output.with_name(f"{request.output.stem}.int8-all{request.output.suffix}")
    for suffix in (".xml", ".bin"):
        shutil.copyfile(request.output.with_suffix(suffix), plain.path.with_suffix(suffix))
        shutil.copyfile(target.with_suffix(suffix), request.output.with_suffix(suffix))
    label = f"NNCF accuracy control ({len(floats)} float)"
    outcome.rows.append(ModelRow("mixed", label, request.output, "int8", accuracy, float_nodes=tuple(floats)))
    return request.output


def _search_mixed(
    request: QuantizeRequest,
    outcome: QuantizeOutcome,
    fp32: Path,
    calib: SampleSet | None,
    evaluation: SampleSet,
    kind: str,
    fp32_outputs: Any,
    scratch: Path,
    cache: Path | None,
) -> Path:
    assert request.max_drop_pct is not None
    measure = None
    if request.latency:
        from infermeter.quantize.latency import measure_file

        shapes = sample_shapes(evaluation)

        def measure(path: Path) -> float | None:
            timing = measure_file(path, request.threads, shapes, input_values=request.input_values)
            return timing.latency_ms.p50 if timing.latency_ms else None

    frontier, best = greedy_mixed(
        fp32,
        request.config,
        calib,
        evaluation,
        kind,
        fp32_outputs,
        outcome.sensitivity,
        request.max_drop_pct,
        scratch,
        cache,
        measure,
    )
    outcome.frontier = frontier
    outcome.budget_met = best is not None
    if best is None:
        # Even with every ranked layer in float the budget is missed: keep the most accurate candidate.
        best = min(frontier, key=lambda p: p.accuracy.drop_pct)
        outcome.warnings.append(
            CaseWarning(
                "accuracy_budget_missed",
                f"no mix of float and int8 layers met --max-drop {request.max_drop_pct:g}; wrote the most accurate "
                f"candidate ({best.accuracy.drop_pct:.2f} points); try better calibration data, --per-channel or "
                "--finetune",
                f"best drop {best.accuracy.drop_pct:.2f}",
            )
        )
    if best.float_nodes:
        outcome.rows.append(
            ModelRow(
                "mixed",
                f"mixed ({len(best.float_nodes)} float)",
                request.output,
                "int8",
                best.accuracy,
                float_nodes=best.float_nodes,
            )
        )
        # The plain INT8 file is no longer the -o output: keep it beside it for comparison.
        plain = request.output.with_name(f"{request.output.stem}.int8-all{request.output.suffix}")
        shutil.copyfile(frontier[0].path, plain)
        outcome.rows[1].path = plain
    return best.path


def _finetune_row(
    request: QuantizeRequest,
    outcome: QuantizeOutcome,
    spec: ModelSpec,
    calib: SampleSet | None,
    evaluation: SampleSet,
    kind: str,
    fp32_outputs: Any,
    scratch: Path,
    progress: Callable[[str], None],
) -> None:
    from infermeter.quantize import qat

    assert request.finetune is not None and calib is not None
    train = load_samples(spec.inputs, request.finetune)
    progress("quantization-aware fine-tuning")
    module = qat.finetune(
        load_torch_module(spec),
        spec.inputs,
        train,
        calib,
        request.finetune_epochs,
        per_channel=request.config.per_channel,
    )
    exported, tuned = scratch / "qat-fp32.onnx", scratch / "qat-fp32-pre.onnx"
    qat.export_module(module, spec.inputs, spec.output_names, exported)
    preprocess(exported, tuned)
    target = request.output.with_name(f"{request.output.stem}.qat{request.output.suffix}")
    quantize_onnx(tuned, target, request.config, calib, scratch / "calibration-qat.json")
    accuracy = score(kind, fp32_outputs, ModelRunner(target, request.threads).predict(evaluation), evaluation.labels)
    outcome.rows.append(ModelRow("qat", f"QAT ({request.finetune_epochs} epochs)", target, "int8", accuracy))


def _time_rows(
    request: QuantizeRequest, outcome: QuantizeOutcome, evaluation: SampleSet, progress: Callable[[str], None]
) -> None:
    from infermeter.quantize.latency import measure_file

    shapes = sample_shapes(evaluation)
    for row in outcome.rows:
        progress(f"timing {row.label}")
        try:
            row.timing = measure_file(row.path, request.threads, shapes, input_values=request.input_values)
        except InfermeterError as exc:  # e.g. a file kind `bench` cannot load yet: accuracy still stands
            outcome.notes.append(f"{row.label} not timed: {exc}")
            continue
        if row.timing.precision_effective:
            row.precision = row.timing.precision_effective


def outcome_results(outcome: QuantizeOutcome, model: str) -> list[CaseResult]:
    """The timed rows as results-file cases, with their `Accuracy` and `QuantizedVariant` records."""
    cases = []
    for row in outcome.rows:
        if row.timing is None:
            continue
        case = replace(row.timing)
        case.extra = dict(case.extra)
        if row.accuracy is not None:
            write_record(case, row.accuracy)
        write_record(case, QuantizedVariant(row.role, row.label, model, str(row.path), list(row.float_nodes)))
        cases.append(case)
    return cases
