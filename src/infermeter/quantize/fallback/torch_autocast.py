"""PyTorch's reduced-precision path: CPU autocast in BF16 (FP16 only where the CPU computes it), computed by
torch itself; the search runs over the module's submodule paths (leaves and computing parents), each kept one
excluded from autocast."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np

from infermeter.models.torch_form import load_torch_module
from infermeter.quantize import accuracy_metrics as metrics
from infermeter.quantize.fallback.marks import MarkReadback, torch_marks
from infermeter.quantize.fallback.search import Layer, Verdict, find_fallback
from infermeter.quantize.fallback.study import EngineStudy, StudyContext, judgement_of, record_marks


def _predict(module: Any, ctx: StudyContext, dtype: Any, names: list[str]) -> np.ndarray:
    """The first output on every sample under autocast at `dtype` (None: plain FP32)."""
    import torch

    outputs = []
    for feeds in ctx.samples.batches(64):
        tensors = [torch.from_numpy(np.ascontiguousarray(feeds[name])) for name in names]
        with torch.inference_mode(), torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            out = module(*tensors)
        first = out[0] if isinstance(out, tuple | list) else out
        array = first.float().numpy()
        if array.ndim == 3:  # token states: mean-pooled into embeddings, as the ONNX runners do
            mask = next((v for k, v in feeds.items() if "mask" in k.lower()), None)
            array = metrics.mean_pool(array, mask)
        outputs.append(array)
    return np.concatenate(outputs)


# Modules whose forward only calls their children: keeping one in FP32 is keeping its children, searched anyway.
CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")


def fallback_modules(module: Any) -> list[Layer]:
    """Every submodule path autocast exclusion can keep, in definition order: the leaves and the parents whose own
    forward computes (a block that takes a variance with functional ops between its children); pure containers are
    left out."""
    paths = [(name, sub) for name, sub in module.named_modules() if name and type(sub).__name__ not in CONTAINERS]
    return [Layer(name, type(sub).__name__, index) for index, (name, sub) in enumerate(paths)]


def _marks(module: Any, ctx: StudyContext, dtype: Any, names: list[str], kept: list[str]) -> MarkReadback:
    """What torch ran each kept module in: one sample under autocast with the modules excluded, read by hooks."""
    from infermeter.backends.torch_eager import exclude_from_autocast

    restore = exclude_from_autocast(module, set(kept))
    try:
        return torch_marks(
            module, kept, lambda: _predict(module, replace(ctx, samples=ctx.samples.head(1)), dtype, names)
        )
    finally:
        for sub, forward in restore:
            sub.forward = forward


def torch_study(ctx: StudyContext) -> EngineStudy:
    """Autocast at ctx.precision, computed by torch; the modules to exclude searched when it misses the budget;
    the result written as the config `torch.fp32_modules` reads."""
    import torch

    from infermeter.backends._common import cpu_precision_reason
    from infermeter.backends.torch_eager import exclude_from_autocast
    from infermeter.quantize.fallback.study import arm

    study = EngineStudy("torch", ctx.precision)
    if not ctx.spec.has_torch_form:
        study.lines.append(f"torch: {ctx.spec.ref} has no PyTorch form (a graph file): no autocast path")
        return study
    reason = cpu_precision_reason(ctx.precision, "torch autocast")
    if reason:
        study.lines.append(f"torch: {reason}")
        return study
    module = load_torch_module(ctx.spec).eval()
    dtype, names = (
        getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[ctx.precision]),
        [i.name for i in ctx.spec.inputs],
    )
    how = f"computed by torch (autocast {ctx.precision})"

    def evaluate(keep: frozenset[str]) -> Verdict:
        restore = exclude_from_autocast(module, keep)
        try:
            judgement = ctx.judge(_predict(module, ctx, dtype, names), how)
        finally:
            for sub, forward in restore:
                sub.forward = forward
        return Verdict(judgement.meets(ctx.budget), judgement)

    study.fp32 = ctx.judge(_predict(module, ctx, None, names), "computed by torch (fp32)")
    full = evaluate(frozenset())
    study.full = judgement_of(full)
    fp32, autocast = ctx.spec, {"torch.autocast": "on"}
    full_label = f"full {ctx.precision.upper()}"
    study.arms = [arm(ctx, "FP32", fp32, "torch", "fp32"), arm(ctx, full_label, fp32, "torch", ctx.precision, autocast)]
    if full.meets:
        study.lines.append(f"full {ctx.precision} autocast (torch) is within the budget: no module needs FP32")
        return study
    study.search = find_fallback(fallback_modules(module), evaluate, (), ctx.max_evaluations)
    study.search_how = "torch autocast with the kept modules excluded (computed, not emulated)"
    kept = [layer.name for layer in study.search.kept]
    if not kept or not study.search.verdict.meets:
        study.lines.append("torch: no set of modules kept in FP32 meets the budget (the sensitive operators may "
                           "not be modules, or the budget sits below FP32's own noise)")  # fmt: skip
        return study
    if not record_marks(study, _marks(module, ctx, dtype, names, kept)):
        return study
    study.mixed = judgement_of(study.search.verdict)
    study.mixed_path = ctx.file(".torch-autocast.json")
    study.mixed_path.write_text(json.dumps({"autocast": ctx.precision, "fp32_modules": kept}, indent=1) + "\n")
    options = {**autocast, "torch.fp32_modules": str(study.mixed_path)}
    study.arms.append(arm(ctx, "mixed", fp32, "torch", ctx.precision, options))
    return study
