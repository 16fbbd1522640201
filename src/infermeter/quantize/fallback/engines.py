"""Each engine's own way to keep chosen layers in FP32 at reduced precision (`Backend.precision_fallback` names
one of `FALLBACK_PATHS`): ONNX Runtime's FP16 graph with a node block list, OpenVINO's inference precision hint
with its runtime model read back, PyTorch's CPU autocast with modules excluded, TensorRT's per-layer precision
constraints. Each returns an `EngineStudy`; what an engine cannot do is one line in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from infermeter.backends.compute_precision import ort_model_precision
from infermeter.core.errors import BuildInvalid
from infermeter.models.resolve import resolve_model
from infermeter.quantize.emulate import write_mixed_fp16
from infermeter.quantize.evaluate import ModelRunner
from infermeter.quantize.fallback.marks import (
    mark_openvino,
    onnxruntime_marks,
    openvino_marks,
    openvino_runtime_layers,
)
from infermeter.quantize.fallback.study import (
    EngineStudy,
    StudyContext,
    arm,
    emulated_outputs,
    emulated_search,
    judgement_of,
    parity_line,
    record_marks,
)


def _kept(study: EngineStudy) -> set[str]:
    return {layer.name for layer in study.search.kept} if study.search else set()


def _with_search(ctx: StudyContext, study: EngineStudy) -> None:
    search = emulated_search(ctx)
    study.search, study.full = search, judgement_of(search.full)
    study.search_how = f"emulated {ctx.precision} on the ONNX graph (reduced-precision storage, FP32 accumulation)"
    if search.full.meets:
        study.lines.append(f"full {ctx.precision} (emulated) is within the budget: no layer needs FP32")
    elif search.kept and search.verdict.meets:
        study.mixed = judgement_of(search.verdict)


def onnxruntime_study(ctx: StudyContext) -> EngineStudy:
    """The search on the emulated graph; ONNX Runtime's FP16 graph written with the kept nodes blocked, FP32
    inputs and outputs; on a CPU that computes FP16 in FP32, its speed is storage only and says so."""
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend

    study = EngineStudy("onnxruntime", ctx.precision)
    if ctx.precision != "fp16":
        study.lines.append("onnxruntime: no bf16 path here (no bf16 CPU kernels; its converter writes fp16 only)")
        return study
    optimized = ModelRunner(ctx.fp32_onnx, ctx.threads).predict(ctx.samples)
    study.fp32 = ctx.judge(optimized, "computed by onnxruntime (fp32, graph optimized)")
    _with_search(ctx, study)
    full_path = write_mixed_fp16(ctx.fp32_onnx, (), ctx.file(".onnx"))
    # What ONNX Runtime really computes the FP16 graph in (a profiled run), never the CPU's flags: where it is not
    # fp16, its outputs are FP32 outputs and the accuracy figure stays the emulated one.
    reading = ort_model_precision(str(full_path), next(ctx.samples.head(1).batches(1)), threads=ctx.threads)
    storage = OnnxRuntimeBackend().storage_note("fp16", reading.precision if reading is not None else "fp32")
    keep = _kept(study) if study.mixed is not None else set()
    study.arms = [arm(ctx, "FP32", resolve_model(str(ctx.fp32_onnx)), "onnxruntime", "fp32"),
                  arm(ctx, "full FP16", resolve_model(str(full_path)), "onnxruntime", "fp32")]  # fmt: skip
    study.speed_note = storage
    if keep:
        study.mixed_path = write_mixed_fp16(ctx.fp32_onnx, keep, ctx.file(".mixed.onnx"))
        # Which blocked nodes ONNX Runtime really ran in FP32 once it optimized the graph, read from its kernels.
        feeds = next(ctx.samples.head(1).batches(1))
        if not record_marks(study, onnxruntime_marks(study.mixed_path, keep, feeds, ctx.threads)):
            return study
        outputs = ModelRunner(study.mixed_path, ctx.threads).predict(ctx.samples)
        study.parity = parity_line(outputs, emulated_outputs(ctx, keep), "mixed FP16 graph run by onnxruntime")
        if storage is None:  # a provider that computes FP16: its own figure is the one to report
            study.mixed = ctx.judge(outputs, "computed by onnxruntime")
        study.arms.append(arm(ctx, "mixed", resolve_model(str(study.mixed_path)), "onnxruntime", "fp32"))
    return study


def openvino_study(ctx: StudyContext) -> EngineStudy:
    """The precision hint, read back with every layer's runtime precision; when the full run misses the budget,
    the layers found on the emulated graph marked FP32 (the DisableFP16Compression rt_info, written into the IR)
    and what the runtime really did with each mark read back."""
    import openvino as ov

    from infermeter.backends.openvino_backend import read_back_precision

    study = EngineStudy("openvino", ctx.precision)
    core = ov.Core()
    fp32_config = {"INFERENCE_NUM_THREADS": ctx.threads, "INFERENCE_PRECISION_HINT": "f32"}
    fp32_compiled = core.compile_model(core.read_model(str(ctx.fp32_onnx)), "CPU", fp32_config)
    study.fp32 = ctx.judge(ModelRunner.of_compiled(fp32_compiled).predict(ctx.samples), "computed by openvino (f32)")
    config = {
        "INFERENCE_NUM_THREADS": ctx.threads,
        "INFERENCE_PRECISION_HINT": {"fp16": "f16"}.get(ctx.precision, "bf16"),
    }
    compiled = core.compile_model(core.read_model(str(ctx.fp32_onnx)), "CPU", config)
    ran = read_back_precision(compiled)
    if ran == "fp32":
        study.lines.append(
            f"openvino: {ctx.precision} requested, the CPU plugin runs fp32 (no reduced arithmetic here)"
        )
        return study
    if ran != ctx.precision:
        study.lines.append(f"openvino: {ctx.precision} requested, the CPU plugin runs {ran} (read back)")
    study.full = ctx.judge(ModelRunner.of_compiled(compiled).predict(ctx.samples), f"computed by openvino ({ran})")
    counts: dict[str, int] = {}
    for _names, precision in openvino_runtime_layers(compiled):
        counts[precision] = counts.get(precision, 0) + 1
    study.lines.append(
        "openvino runtime model, layers by precision: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    fp32_spec = resolve_model(str(ctx.fp32_onnx))
    study.arms = [
        arm(ctx, "FP32", fp32_spec, "openvino", "fp32"),
        arm(ctx, f"full {ran.upper()}", fp32_spec, "openvino", ran),
    ]
    if study.full.meets(ctx.budget):
        study.lines.append(f"full {ran} (openvino) is within the budget: no layer needs FP32")
        return study
    search = emulated_search(replace(ctx, precision=ran))
    study.search, study.search_how = search, f"emulated {ran} on the ONNX graph; the result computed by openvino"
    keep = _kept(study)
    if not keep or not search.verdict.meets:
        return study  # the search's notes say why (the budget is out of reach even with every layer in FP32)
    study.mixed_path = ctx.file(".openvino-mixed.xml")
    mixed = openvino_marked(core, ctx.fp32_onnx, keep, study.mixed_path, config)
    if _marked_ir_invalid(ctx, study, config):
        return study
    if record_marks(study, openvino_marks(mixed, compiled, keep)):
        study.mixed = ctx.judge(ModelRunner.of_compiled(mixed).predict(ctx.samples), f"computed by openvino ({ran})")
        study.arms.append(arm(ctx, "mixed", resolve_model(str(study.mixed_path)), "openvino", ran))
    return study


def _marked_ir_invalid(ctx: StudyContext, study: EngineStudy, config: dict[str, Any]) -> bool:
    """The marked IR checked as a built artifact (`build.validate`) with the study's precision hint, against FP32 on
    two samples: True, with the line why, when it computes something else. Seen: OpenVINO 2026.4 reads resnet18's IR
    with the mark on a residual block's Convolution (`layers.0.conv2`) into a model that returns no rows at bf16
    (the same marks on the model in memory, never written, run right)."""
    from infermeter.build.validate import check_build, openvino_checks, ort_fp32_output

    feeds = next(ctx.samples.head(2).batches(2))
    assert study.mixed_path is not None
    try:
        check_build("the marked IR", openvino_checks(study.mixed_path, feeds, config),
                    lambda: ort_fp32_output(ctx.fp32_onnx, feeds, ctx.threads), ctx.threads,
                    lambda _node: "no mixed model on openvino (torch or ONNX Runtime keep these layers in FP32)",
                    "OpenVINO reads the marked IR into another model")  # fmt: skip
    except BuildInvalid as exc:
        study.mixed_refused = str(exc)
        study.lines.append(f"openvino: build_invalid: {exc}")
        study.mixed_path = None
        return True
    return False


def openvino_marked(core: Any, fp32_onnx: Path, keep: set[str], target: Path, config: dict[str, Any]) -> Any:
    """The `keep` nodes marked FP32 (every operation OpenVINO made of them) in an IR written at `target`, read
    back and compiled with `config` (the precision hint)."""
    import openvino as ov

    model = core.read_model(str(fp32_onnx))
    mark_openvino(model, keep)
    ov.save_model(model, str(target), compress_to_fp16=False)
    return core.compile_model(core.read_model(str(target)), "CPU", config)


def tensorrt_study(ctx: StudyContext) -> EngineStudy:
    """The layers found on the emulated FP16 graph (TensorRT's FP16 numerics) written as per-layer precision
    constraints (`tensorrt.fp32_layers`); built and timed only where TensorRT and a GPU are here."""
    from infermeter.backends._gpu import nvidia_gpu_reason
    from infermeter.backends.tensorrt_backend import TensorRTBackend

    study = EngineStudy("tensorrt", ctx.precision)
    if ctx.precision != "fp16":
        study.lines.append("tensorrt: bf16 per-layer constraints are not written here (fp16 only)")
        return study
    _with_search(ctx, study)
    keep = sorted(_kept(study)) if study.mixed is not None else []
    study.mixed_path = ctx.file(".tensorrt-layers.json")
    study.mixed_path.write_text(json.dumps({"precision": "fp16", "fp32_layers": keep}, indent=1) + "\n")
    reason = TensorRTBackend.available() or nvidia_gpu_reason()
    if reason:
        study.lines.append(f"tensorrt: {len(keep)} FP32 layer constraint(s) written to {study.mixed_path.name}; "
                           f"not built here: {reason}")  # fmt: skip
        return study
    study.lines.append("tensorrt: its FP32 marks are not read back; OBEY_PRECISION_CONSTRAINTS fails the build "
                       "where one cannot hold")  # fmt: skip
    spec = resolve_model(str(ctx.fp32_onnx))
    study.arms = [arm(ctx, "FP32", spec, "tensorrt", "fp32"), arm(ctx, "full FP16", spec, "tensorrt", "fp16")]
    if keep:
        study.arms.append(arm(ctx, "mixed", spec, "tensorrt", "fp16", {"tensorrt.fp32_layers": str(study.mixed_path)}))
    return study


def _torch_study(ctx: StudyContext) -> EngineStudy:
    from infermeter.quantize.fallback.torch_autocast import torch_study

    return torch_study(ctx)


FALLBACK_PATHS: dict[str, Callable[[StudyContext], EngineStudy]] = {
    "ort-fp16-graph": onnxruntime_study,
    "openvino-hint": openvino_study,
    "torch-autocast": _torch_study,
    "tensorrt-layer-precision": tensorrt_study,
}
