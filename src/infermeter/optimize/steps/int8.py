"""Step 4a of optimize: INT8 with calibration, accuracy-checked, made by each engine's own quantizer from one shared
calibration set and scored on one evaluation set (`optimize.engine_quantizers`): ONNX Runtime's QDQ graph, with the
sensitivity-guided mixed precision when plain INT8 breaks the accuracy budget, for the engines that run it; NNCF's
IR for OpenVINO. The data, reference, plain graph and mixed search are the INT8 study `quantize` runs
(`quantize.study_data`, `quantize.study`)."""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from infermeter.backends.registry import get_backend
from infermeter.core.interrupts import deferred_interrupts
from infermeter.optimize.accuracy import eval_data, score_case
from infermeter.optimize.candidates import p50, plan_backends, prune_reason
from infermeter.optimize.engine_quantizers import (
    CONFIG,
    NNCF,
    annotate_int8,
    explain_if_slower,
    int8_engines,
    int8_spec,
    label_quantizer,
    nncf_plain,
    quantizer_groups,
    request_precision,
)
from infermeter.optimize.pipeline import INT8_ONNX, MIXED_ONNX, OptimizeEvent, Run
from infermeter.optimize.steps.log import begin, finish, note, skip
from infermeter.quantize import study
from infermeter.quantize.study import MixedSearch, Reference, score_file
from infermeter.quantize.study_data import StudyData
from infermeter.results.records import Accuracy, read_record, write_record


class _OutOfBudget(Exception):
    """Raised from the mixed search's progress callback when the time budget is spent: stops the search."""


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
    data, reference = eval_data(run, "int8")
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
    run: Run, data: StudyData, reference: Reference, fp32_onnx: Path, details: dict[str, object]
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
    run: Run, data: StudyData, reference: Reference, fp32_onnx: Path, details: dict[str, object]
) -> list[tuple[str, str, Accuracy]]:
    target = run.path(INT8_ONNX)
    if "plain" not in details or not target.is_file():
        calib = data.calib
        assert calib is not None  # optimize quantizes statically: its data always has a calibration set
        with tempfile.TemporaryDirectory(prefix="infermeter-optimize-") as scratch:
            prepared = study.prepare(fp32_onnx, Path(scratch))
            seconds = study.quantize_plain(prepared, CONFIG, calib, target)
            layers = study.layer_count(prepared)
        started = time.perf_counter()
        accuracy = score_file(target, reference, data.evaluation, run.request.threads)
        score_s = time.perf_counter() - started
        details["plain"] = {
            "file": INT8_ONNX,
            "accuracy": accuracy.to_dict(),
            "seconds": round(seconds, 3),
            "score_seconds": round(score_s, 3),
            "layers": layers,
            "method": f"static QDQ, {CONFIG.method}, per-tensor",
            "calibration": f"{calib.count} samples from {calib.source}",
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
    run: Run, data: StudyData, reference: Reference, fp32_onnx: Path, details: dict[str, object]
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
                prepared = study.prepare(fp32_onnx, Path(scratch))
                search = study.search_mixed(
                    prepared, CONFIG, data, reference, run.request.max_accuracy_drop_pct, Path(scratch),
                    on_progress=progress,
                )  # fmt: skip
                study.write_model(search.chosen.path, target)
        except _OutOfBudget as stop:
            skip(run, "int8", "mixed precision", f"budget: spent while searching (stopped at {stop}); the estimate "
                 f"was {estimate:.0f} s")  # fmt: skip
            target.unlink(missing_ok=True)
            return None
        # Scored again from the written file: the evidence is about the artifact that ships, not a scratch copy.
        with deferred_interrupts():
            accuracy = score_file(target, reference, data.evaluation, run.request.threads)
        details["mixed"] = _mixed_details(search, accuracy)
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
        reason = prune_reason("int8", backend, fp32, run.best_to_beat(), run.gains)
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


def _mixed_details(search: MixedSearch, accuracy: Accuracy) -> dict[str, Any]:
    """The mixed search as the journal keeps it (for the report and a resume): the written model's accuracy,
    its float layers, the frontier and the ten most sensitive layers."""
    return {
        "file": MIXED_ONNX,
        "accuracy": accuracy.to_dict(),
        "float_layers": list(search.chosen.float_nodes),
        "budget_met": search.budget_met,
        "frontier": [
            {
                "float_layers": len(p.float_nodes),
                "drop_pct": _finite(p.accuracy.drop_pct),
                "value": _finite(p.accuracy.value),
            }
            for p in search.frontier
        ],
        "sensitivity_top": [
            {
                "layer": s.node,
                "op": s.op_type,
                "recovered_pct": _finite(s.recovered_pct),
                "sqnr_gain_db": _finite(s.output_sqnr_gain_db),
            }
            for s in search.ranking[:10]
        ],
    }


def _finite(value: float) -> float | None:
    # Results files are strict JSON: an infinite SQNR gain (a layer whose float copy is exact) becomes null.
    return value if math.isfinite(value) else None
