"""Steps 1-3 and 5 of optimize: baseline, verified ONNX export, every backend at FP32 (parity-checked), static vs
dynamic shapes and batching. Each step records what it did and why, and what it skipped and why."""

from __future__ import annotations

import shutil
from pathlib import Path

from infermeter.backends.registry import get_backend
from infermeter.models.spec import file_sha256
from infermeter.optimize.candidates import admissible, hardware_precision_reason, p50, plan_backends
from infermeter.optimize.pipeline import FP32_ONNX, Run, case_variant_label
from infermeter.optimize.steps.fallback import fallback_candidate
from infermeter.optimize.steps.log import begin, finish, note, skip
from infermeter.results.records import Accuracy, OptimizeStep, copy_record, read_record
from infermeter.results.schema import CaseResult


def baseline_backend(run: Run) -> str:
    """torch for models with a PyTorch form, else the backend that reads the model's file as it is (onnxruntime
    for ONNX files, openvino for an OpenVINO IR)."""
    if run.spec.has_torch_form:
        return "torch"
    from infermeter.backends.registry import backend_for_file

    return backend_for_file(Path(run.spec.path or run.spec.ref).suffix)


def fp32_artifact(run: Run, backend: str) -> str | None:
    """The artifact a float case of `backend` loads: the FP32 ONNX one for ONNX-reading engines, else (or for a
    model that has no ONNX form, an OpenVINO IR) the model itself."""
    graph_file = run.spec.kind in ("openvino_ir", "tflite")  # read as they are (OpenVINO, LiteRT)
    return FP32_ONNX if get_backend(backend).consumes_onnx and not graph_file else None


def step_baseline(run: Run) -> CaseResult | None:
    """1. The model as it runs today, measured in this run: every gain is relative to it."""
    backend = baseline_backend(run)
    suffix = Path(run.spec.path or run.spec.ref).suffix
    what = "PyTorch eager FP32" if run.spec.has_torch_form else f"{backend} FP32 (the input is a {suffix} file)"
    begin(run, "baseline", f"{what} is the reference every later step is measured against, in this same run")
    result = run.measure("baseline", run.spec, run.case(run.spec.ref, backend, check_parity=False), "baseline")
    finish(run, "baseline", "done" if result is not None and result.ok else "failed")
    return result


def step_export(run: Run) -> Path | None:
    """2. The FP32 ONNX artifact every ONNX engine loads (the same bytes), checked and verified against PyTorch
    (outputs within 1e-5, every dynamic axis run at other sizes). Returns its path, None when there is none."""
    from infermeter.models.convert import onnx_for

    begin(
        run,
        "export",
        "ONNX is the portable form every non-PyTorch engine reads; an export that changed the outputs or froze a "
        "dynamic axis would make every later figure meaningless",
    )
    target = run.path(FP32_ONNX)
    details = run.journal.details("export")
    if run.spec.kind == "openvino_ir":
        skip(run, "export", "ONNX export", "an OpenVINO IR has no ONNX form: OpenVINO runs it as it is, the "
             "ONNX engines are not tried, and NNCF makes its INT8")  # fmt: skip
        finish(run, "export", "skipped")
        return None
    if run.spec.kind == "tflite":
        skip(run, "export", "ONNX export", "a .tflite file has no ONNX form: LiteRT and OpenVINO (its TFLite "
             "frontend) run it as it is, the ONNX engines are not tried")  # fmt: skip
        finish(run, "export", "skipped")
        return None
    try:
        source = onnx_for(run.spec)
    except Exception as exc:
        skip(run, "export", "ONNX export", f"export failed: {type(exc).__name__}: {str(exc).strip()[:300]}")
        finish(run, "export", "failed")
        return None
    sha = file_sha256(source.path)
    if details.get("sha256") == sha and target.is_file() and details.get("checks"):
        note(run, "export", "resumed: this export was verified earlier")
        finish(run, "export", "done" if details.get("ok") else "failed")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source.path, target)
    details.update({"sha256": sha, "file": FP32_ONNX, "note": source.note})
    if run.spec.has_torch_form:
        _verify_export(run, target, details)
    else:
        _check_onnx(run, target, details)
    ok = all(check["status"] != "fail" for check in details["checks"])
    details["ok"] = ok
    for check in details["checks"]:
        note(run, "export", f"{check['name']}: {check['status']} — {check['detail']}")
    finish(run, "export", "done" if ok else "failed")
    return target


def _verify_export(run: Run, target: Path, details: dict[str, object]) -> None:
    from dataclasses import asdict

    from infermeter.export.torch_export import ExportReport, write_report
    from infermeter.export.verify import verify_onnx
    from infermeter.models.onnx_export import DEFAULT_OPSET, default_dynamic_axes
    from infermeter.models.torch_form import load_torch_module

    axes = default_dynamic_axes(run.spec)
    report = ExportReport(run.spec.ref, str(target), opset=DEFAULT_OPSET, dynamic_axes=axes, atol=1e-5, rtol=1e-4)
    _checker(report, target)
    if report.ok:
        verify_onnx(report, run.spec, load_torch_module(run.spec), target, axes, samples=3, seed=run.request.seed)
    write_report(report, target)
    details["dynamic_axes"] = {name: {str(a): label for a, label in named.items()} for name, named in axes.items()}
    details["checks"] = [asdict(check) for check in report.checks]
    details["max_abs_error"] = report.max_abs_error


def _checker(report: object, target: Path) -> None:
    import onnx

    try:
        onnx.checker.check_model(str(target), full_check=True)
        report.add("onnx checker", True, "full check passed")  # type: ignore[attr-defined]
    except Exception as exc:
        report.add("onnx checker", False, f"{type(exc).__name__}: {str(exc).strip()[:300]}")  # type: ignore[attr-defined]


def _check_onnx(run: Run, target: Path, details: dict[str, object]) -> None:
    from dataclasses import asdict

    from infermeter.export.torch_export import ExportReport

    report = ExportReport(run.spec.ref, str(target), opset=0, dynamic_axes={}, atol=1e-5, rtol=1e-4)
    report.add("export", None, "the input is already an ONNX file: nothing to export")
    _checker(report, target)
    symbolic = {i.name: [d for d in i.shape if isinstance(d, str)] for i in run.spec.inputs}
    details["dynamic_axes"] = {name: dims for name, dims in symbolic.items() if dims}
    details["checks"] = [asdict(check) for check in report.checks]


def step_fp32(run: Run, baseline: str) -> None:
    """3. Every available backend of the device at FP32, each case's outputs checked against the reference."""
    begin(
        run,
        "fp32",
        "the same FP32 arithmetic on every engine: any gain here is free (no accuracy risk), and the parity check "
        "proves the outputs are the baseline's",
    )
    plan = plan_backends(run.request.device, run.request.backends)
    for name, reason in plan.skipped:
        skip(run, "fp32", name, reason)
    for name in plan.usable:
        if name == baseline:
            continue
        case = run.case(run.spec.ref, name)
        unsupported = get_backend(name).unsupported_reason(run.spec, case)
        if unsupported:
            skip(run, "fp32", name, unsupported)
            continue
        run.measure("fp32", run.spec, case, artifact=fp32_artifact(run, name))
    finish(run, "fp32")


def step_half(run: Run) -> None:
    """4b. BF16 and FP16 on the backends that offer them, where the CPU computes them natively; each case is
    parity-checked at that precision's tolerance and scored on the evaluation data."""
    from infermeter.optimize.candidates import prune_reason

    begin(
        run,
        "half",
        "16-bit floats halve the bytes moved and, with AMX/AVX512-BF16/FP16, multiply the arithmetic rate; they "
        "keep FP32's range (BF16) or most of its precision (FP16), so no calibration is needed",
    )
    if run.spec.default_precision != "fp32":
        skip(run, "half", "bf16, fp16", f"the model is {run.spec.default_precision} by design: no float to halve")
        return finish(run, "half", "skipped")
    backends = [c.backend for c in sorted(_fp32_cases(run), key=p50)]
    for precision in ("bf16", "fp16"):
        reason = hardware_precision_reason(precision, run.request.device)
        if reason:
            skip(run, "half", precision, reason)
            continue
        for backend in backends:
            cls = get_backend(backend)
            if precision not in cls.precisions:
                skip(run, "half", f"{backend} {precision}", f"{backend} offers no {precision} here")
                continue
            case = run.case(run.spec.ref, backend, precision)
            reason = cls.unsupported_reason(run.spec, case)
            fp32 = run.fp32_case_of(backend)
            reason = reason or prune_reason(precision, backend, fp32, run.best_to_beat(), run.gains)
            if reason:
                skip(run, "half", f"{backend} {precision}", reason)
                continue
            result = run.measure("half", run.spec, case, artifact=fp32_artifact(run, backend))
            if result is not None and result.ok:
                run.gains.record(precision, backend, fp32, result)
                _score_half(run, result)
                fallback_candidate(run, result)
    finish(run, "half")


def _fp32_cases(run: Run) -> list[CaseResult]:
    # Failed ones too: the reduced-precision step says why it builds nothing on them.
    return run.journal.step_cases("baseline") + run.journal.step_cases("fp32")


def _score_half(run: Run, result: CaseResult) -> None:
    from infermeter.optimize.accuracy import score_case

    if read_record(result, Accuracy) is not None:
        return
    if get_backend(result.backend).scorer_recompiles:
        note(run, "half", f"{result.backend} {result.precision}: accuracy from the parity check only (scoring would "
             "compile the model again in this process)")  # fmt: skip
        return
    score_case(run, "half", run.spec, result, result.precision)


def _top(run: Run, count: int, batch: int) -> list[CaseResult]:
    """The best `count` admissible cases at `batch` (by the objective), one per backend and precision."""
    pool = [c for c in run.measured() if c.batch == batch and admissible(c, run.request.max_accuracy_drop_pct)]
    if run.request.objective == "throughput":
        pool.sort(key=lambda c: -(c.timing.throughput or 0.0))
    else:
        pool.sort(key=p50)
    chosen: list[CaseResult] = []
    for case in pool:
        if all((c.backend, c.precision, c.model) != (case.backend, case.precision, case.model) for c in chosen):
            chosen.append(case)
    return chosen[:count]


def step_shapes(run: Run) -> None:
    """5a. The best configurations again with dynamic shapes (symbolic dims kept in the compiled engine)."""
    begin(
        run,
        "shapes",
        "an engine compiled for fixed shapes can plan memory and pick kernels ahead; one kept dynamic serves any "
        "size — the difference is measured, not assumed",
    )
    if not any(isinstance(d, str) for i in run.spec.inputs for d in i.shape):
        skip(run, "shapes", "dynamic shapes", "the model has no dynamic axes: static shapes are the only choice")
        finish(run, "shapes", "skipped")
        return
    for case in _top(run, 2, run.request.batch):
        if case.shape_mode != "static":
            continue
        if not get_backend(case.backend).shape_aware:
            skip(run, "shapes", case_variant_label(case), f"{case.backend} runs any shape it is given: no "
                 "static-shape compilation to compare")  # fmt: skip
            continue
        _remeasure(run, "shapes", case, shape_mode="dynamic")
    finish(run, "shapes")


def step_batching(run: Run) -> None:
    """5b. The best configurations at the other batch sizes (throughput objective or several --batch)."""
    begin(
        run,
        "batching",
        "batching amortizes per-call overhead and fills wide vector units: more inferences per second at the cost "
        "of latency per request",
    )
    extra = [b for b in run.request.batches if b != run.request.batch]
    if not extra:
        reason = (
            f"objective {run.request.objective} at batch {run.request.batch}: batching raises each request's "
            "latency; use --objective throughput or --batch 1,8 to explore it"
        )
        skip(run, "batching", "larger batches", reason)
        finish(run, "batching", "skipped")
        return
    for case in _top(run, 2, run.request.batch):
        for batch in extra:
            _remeasure(run, "batching", case, batch=batch)
    finish(run, "batching")


def _remeasure(run: Run, step: str, base: CaseResult, shape_mode: str | None = None, batch: int | None = None) -> None:
    """`base` again with another shape mode or batch: same model artifact, backend and precision."""
    from infermeter.optimize.accuracy import score_case
    from infermeter.optimize.engine_quantizers import annotate_int8, int8_spec, request_precision
    from infermeter.report.tuning import tune_s

    info = read_record(base, OptimizeStep) or OptimizeStep(step)
    if tune_s(base) > 0:
        skip(run, step, case_variant_label(base, info.variant), "its kernels were tuned for these shapes: tuning "
             "again for others is a bench run's job (-b NAME:tune_trials=N)")  # fmt: skip
        return
    artifact = info.artifact
    is_int8_file = info.quantized_file
    spec = int8_spec(run, base.model) if is_int8_file else run.spec
    precision = request_precision(base.backend) if is_int8_file else base.precision
    case = run.case(
        base.model,
        base.backend,
        precision,
        batch or base.batch,
        shape_mode or base.shape_mode,
        check_parity=not is_int8_file,
    )
    result = run.measure(step, spec, case, info.variant, artifact)
    if result is None or not result.ok:
        return
    if is_int8_file:
        annotate_int8(result)
        copy_record(base, result, Accuracy)  # the same artifact on the same engine: the same accuracy evidence
    elif base.precision not in ("fp32", run.spec.default_precision) and not copy_record(base, result, Accuracy):
        # The base was not scored: score this one (a model's own precision is its reference: nothing to score).
        score_case(run, step, spec, result, base.precision)
    run.save()
