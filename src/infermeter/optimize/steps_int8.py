"""Step 4a of optimize: INT8 with calibration, accuracy-checked, made by each engine's own quantizer from one shared
calibration set and scored on one evaluation set (`optimize.int8_engines`): ONNX Runtime's QDQ graph, with the
sensitivity-guided mixed precision when plain INT8 breaks the accuracy budget, for the engines that run it; NNCF's
IR for OpenVINO."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import cast

from infermeter.backends.registry import get_backend
from infermeter.errors import describe_exception
from infermeter.models.spec import ModelSpec, resolve_model
from infermeter.optimize import int8
from infermeter.optimize.accuracy import EvalData, Reference, fp32_reference, load_eval_data, score_backend, score_file
from infermeter.optimize.candidates import best_case, p50, plan_backends, prune_reason
from infermeter.optimize.int8_engines import (
    NNCF,
    explain_if_slower,
    label_quantizer,
    nncf_plain,
    quantizer_groups,
    request_precision,
)
from infermeter.optimize.pipeline import FP32_ONNX, INT8_ONNX, MIXED_ONNX, OptimizeEvent, Run
from infermeter.optimize.steps import begin, finish, note, skip
from infermeter.results.records import Accuracy, AccuracyError, read_record, write_record
from infermeter.results.schema import CaseResult


def int8_engines(device: str) -> list[str]:
    """The engines that execute a quantized (QDQ) ONNX graph in int8 on `device` (`Backend.runs_quantized_onnx`)."""
    from infermeter.backends.registry import inference_backends

    return [cls.name for cls in inference_backends() if cls.runs_quantized_onnx and cls.device == device]


class _OutOfBudget(Exception):
    """Raised from the mixed search's progress callback when the time budget is spent: stops the search."""


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


def eval_data(run: Run) -> tuple[EvalData, Reference]:
    """Calibration/evaluation samples and the FP32 reference outputs, loaded once per invocation."""
    if "data" not in run.memo:
        request = run.request
        data = load_eval_data(
            run.spec, request.calib, request.eval, request.calib_size, request.eval_size, request.seed
        )
        run.memo["data"] = data
        # The float model the reference runs: the FP32 ONNX artifact, or an OpenVINO IR given as the model.
        ir = run.spec.kind == "openvino_ir" and run.spec.path
        fp32 = Path(run.spec.path) if ir and run.spec.path else run.path(FP32_ONNX)
        run.memo["reference"] = fp32_reference(fp32, run.spec, data.evaluation, request.threads)
    return run.memo["data"], run.memo["reference"]


def score_case(run: Run, step: str, spec: ModelSpec, result: CaseResult, precision: str) -> None:
    """Score `result`'s backend at `precision` on the evaluation data (in this process) into its `Accuracy`
    record (or say why not in an `AccuracyError`)."""
    data, reference = eval_data(run)
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


def step_int8(run: Run, fp32_onnx: Path | None) -> None:
    """4a. Quantize (each engine with its own quantizer), score, (search mixed,) measure."""
    begin(
        run,
        "int8",
        "INT8 moves a quarter of FP32's bytes and runs on VNNI/AMX integer units — usually the largest CPU gain — "
        "but it changes the outputs, so it is calibrated on data and its accuracy is measured before it counts",
    )
    if run.spec.default_precision == "int8":
        skip(run, "int8", "int8", "the model is INT8 by design: the FP32 step ran its own INT8 graph on every engine")
        return finish(run, "int8", "skipped")
    usable = plan_backends(run.request.device, run.request.backends).usable
    engines = [b for b in int8_engines(run.request.device) if b in usable]
    # An OpenVINO IR has no ONNX form: only NNCF quantizes it, as it is.
    ir = Path(run.spec.path) if run.spec.kind == "openvino_ir" and run.spec.path else None
    groups = quantizer_groups(run, engines)
    if ir is not None:
        groups = {q: group for q, group in groups.items() if q == NNCF}
    if fp32_onnx is None and ir is None:
        skip(run, "int8", "int8", "no FP32 ONNX artifact to quantize (the export step failed)")
        return finish(run, "int8", "skipped")
    if not engines:
        skip(
            run,
            "int8",
            "int8",
            f"no engine that runs quantized ONNX graphs is in use ({', '.join(int8_engines(run.request.device))})",
        )
        return finish(run, "int8", "skipped")  # fmt: skip
    measured = run.measured()
    unit_s, source = run.budget.estimate_case_s("onnxruntime", measured)
    reason = run.budget.work_reason("calibrated INT8 quantization", 2 * unit_s, f"2x a case, {source}")
    details = run.journal.details("int8")
    if reason and "plain" not in details:
        skip(run, "int8", "int8", reason)
        return finish(run, "int8", "skipped")
    data, reference = eval_data(run)
    for text in data.notes:
        note(run, "int8", text)
    for warning in data.warnings:
        run.journal.note("int8", f"warning {warning.code}: {warning.message}")
        run.emit(OptimizeEvent("warning", "int8", f"{warning.code}: {warning.message}"))
    note(run, "int8", "each engine's INT8 from its own quantizer, one calibration set, one evaluation: "
         + "; ".join(f"{q}: {', '.join(group)}" for q, group in groups.items()))  # fmt: skip
    for quantizer, group in groups.items():
        if quantizer == NNCF:
            variants = [nncf_plain(run, data, reference, ir or cast(Path, fp32_onnx), details)]
        else:
            variants = _qdq_variants(run, data, reference, cast(Path, fp32_onnx), details)
        for ref, variant, accuracy in variants:
            _measure_artifact(run, group, ref, variant, accuracy, quantizer)
    finish(run, "int8")


def _qdq_variants(
    run: Run, data: EvalData, reference: Reference, fp32_onnx: Path, details: dict[str, object]
) -> list[tuple[str, str, Accuracy]]:
    """ONNX Runtime's plain QDQ graph, and the mixed one when plain breaks the accuracy budget."""
    budget = run.request.max_accuracy_drop_pct
    variants = _plain(run, data, reference, fp32_onnx, details)
    if variants[0][2].drop_pct > budget:
        mixed = _mixed(run, data, reference, fp32_onnx, details)
        if mixed:
            variants.append(mixed)
    else:
        note(run, "int8", f"plain INT8 is within the {budget:g}-point budget: no mixed-precision search needed")
    return variants


def _plain(
    run: Run, data: EvalData, reference: Reference, fp32_onnx: Path, details: dict[str, object]
) -> list[tuple[str, str, Accuracy]]:
    target = run.path(INT8_ONNX)
    if "plain" not in details or not target.is_file():
        with tempfile.TemporaryDirectory(prefix="infermeter-optimize-") as scratch:
            prepared = int8.prepare(fp32_onnx, Path(scratch))
            seconds = int8.quantize_plain(prepared, target, data)
            layers = int8.layer_count(prepared)
        started = time.perf_counter()
        accuracy = score_file(target, reference, data.evaluation, run.request.threads)
        score_s = time.perf_counter() - started
        details["plain"] = {
            "file": INT8_ONNX,
            "accuracy": accuracy.to_dict(),
            "seconds": round(seconds, 3),
            "score_seconds": round(score_s, 3),
            "layers": layers,
            "method": f"static QDQ, {int8.CONFIG.method}, per-tensor",
            "calibration": f"{data.calib.count} samples from {data.calib.source}",
            "random_calibration": data.calibrated_on_random,
        }
        run.save()
    plain = details["plain"]
    assert isinstance(plain, dict)
    acc = Accuracy.from_dict(plain["accuracy"])
    note(run, "int8", f"plain INT8 ({plain['method']}, calibrated on {plain['calibration']}): {acc.metric} "
         f"{acc.value:.4f} vs FP32 {acc.fp32_value:.4f}, drop {acc.drop_pct:.2f} points "
         f"(budget {run.request.max_accuracy_drop_pct:g})")  # fmt: skip
    return [(INT8_ONNX, "INT8 static QDQ", acc)]


def _mixed(
    run: Run, data: EvalData, reference: Reference, fp32_onnx: Path, details: dict[str, object]
) -> tuple[str, str, Accuracy] | None:
    target = run.path(MIXED_ONNX)
    plain = details["plain"]
    assert isinstance(plain, dict)
    if "mixed" not in details or not target.is_file():
        layers = int(plain["layers"])
        # Each probe re-quantizes (calibration ranges cached) and re-scores the model: sensitivity ranks every
        # layer once, the greedy search may try as many again.
        per_probe = max(float(plain["seconds"]), 0.5) + float(plain.get("score_seconds", 1.0))
        estimate = 2 * layers * per_probe
        reason = run.budget.work_reason(
            "the sensitivity-guided mixed-precision search",
            estimate,
            f"2 x {layers} layers x {per_probe:.1f} s (one quantization and one scoring, as measured)",
        )
        if reason:
            skip(run, "int8", "mixed precision", reason)
            return None
        note(run, "int8", f"plain INT8 breaks the {run.request.max_accuracy_drop_pct:g}-point budget: ranking "
             f"{layers} layers by sensitivity, then keeping the most sensitive in float until it is met")  # fmt: skip

        def progress(message: str) -> None:
            run.emit(OptimizeEvent("phase", "int8", message, "mixed precision"))
            if run.budget.remaining_s() < 0:
                raise _OutOfBudget(message)

        try:
            with tempfile.TemporaryDirectory(prefix="infermeter-optimize-") as scratch:
                prepared = int8.prepare(fp32_onnx, Path(scratch))
                outcome = int8.search_mixed(
                    prepared, target, data, reference, run.request.max_accuracy_drop_pct, Path(scratch),
                    run.request.threads, progress,
                )  # fmt: skip
        except _OutOfBudget as stop:
            skip(run, "int8", "mixed precision", f"budget: spent while searching (stopped at {stop}); the estimate "
                 f"was {estimate:.0f} s")  # fmt: skip
            target.unlink(missing_ok=True)
            return None
        details["mixed"] = {
            "file": MIXED_ONNX,
            "accuracy": outcome.accuracy.to_dict(),
            "float_layers": list(outcome.float_nodes),
            "budget_met": outcome.budget_met,
            "frontier": outcome.frontier,
            "sensitivity_top": outcome.ranking,
        }
        run.save()
    mixed = details["mixed"]
    assert isinstance(mixed, dict)
    acc = Accuracy.from_dict(mixed["accuracy"])
    verdict = "meets" if mixed["budget_met"] else "still misses"
    note(run, "int8", f"mixed precision with {len(mixed['float_layers'])} layer(s) in float "
         f"({', '.join(mixed['float_layers'][:6]) or 'none'}): drop {acc.drop_pct:.2f} points, {verdict} the "
         "budget")  # fmt: skip
    return MIXED_ONNX, f"mixed ({len(mixed['float_layers'])} float layers)", acc


def _measure_artifact(run: Run, engines: list[str], ref: str, variant: str, accuracy: Accuracy, quantizer: str) -> None:
    spec = int8_spec(run, ref)
    order = sorted(engines, key=lambda b: p50(f) if (f := run.fp32_case_of(b)) is not None else float("inf"))
    for backend in order:
        fp32 = run.fp32_case_of(backend)
        best = best_case(run.measured(), run.request.max_accuracy_drop_pct, run.request.batch)
        reason = prune_reason("int8", backend, fp32, best, run.gains)
        if reason:
            skip(run, "int8", f"{backend} {variant}", reason)
            continue
        case = run.case(ref, backend, request_precision(backend), check_parity=False)
        result = run.measure("int8", spec, case, variant, ref)
        if result is None or not result.ok:
            continue
        annotate_int8(result)
        label_quantizer(result, quantizer)
        explain_if_slower(run, result, fp32, variant)
        scored = read_record(result, Accuracy) is not None
        if get_backend(backend).int8_quantizer == quantizer and not scored:
            # The artifact was scored by its own engine's runner (ONNX Runtime for QDQ, OpenVINO for NNCF's IR).
            write_record(result, accuracy)
        elif not scored:
            score_case(run, "int8", spec, result, case.precision)
        run.gains.record("int8", backend, fp32, result)
        run.save()
