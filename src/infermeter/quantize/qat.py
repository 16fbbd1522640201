"""Quantization-aware fine-tuning (QAT) of a PyTorch model, with torch's own fake-quantize operators.

torch 2.13 no longer ships `torch.ao`'s PT2E quantizers, and NNCF's torch QAT compiles a C++ extension at
first use (minutes, and a compiler on every machine); so the simulation is done here, in plain torch:

* the input of every Conv/Linear is fake-quantized like ONNX Runtime's static QDQ does it: per-tensor,
  asymmetric int8, with the min/max range observed on the calibration samples (then frozen);
* its weight is fake-quantized symmetric int8 (per tensor, or per output channel), recomputed each step;
* gradients pass the rounding straight through (the fake-quantize operators' own backward);
* a few epochs at a small learning rate, BatchNorm/Dropout frozen (eval mode), seeded.

The fine-tuned float weights are then exported to ONNX and quantized by ONNX Runtime with the same
calibration data and settings as PTQ, so the QAT row differs from the PTQ row only by the fine-tuning.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.core.errors import ModelError, UsageError, describe_exception
from infermeter.models.inputs import InputSpec
from infermeter.models.samples import SampleSet

if TYPE_CHECKING:
    import torch

DEFAULT_EPOCHS = 3
DEFAULT_LR = 1e-4


def _weighted_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    import torch

    kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)
    return [m for m in model.modules() if isinstance(m, kinds)]


def _observe_ranges(model: torch.nn.Module, modules: Sequence[Any], calib: SampleSet, names: list[str]) -> list[Any]:
    """Min/max of each module's input over the calibration samples."""
    import torch

    ranges: list[list[float]] = [[float("inf"), float("-inf")] for _ in modules]

    def observer(index: int) -> Any:
        def hook(_module: Any, args: tuple[Any, ...]) -> None:
            value = args[0].detach()
            ranges[index][0] = min(ranges[index][0], float(value.min()))
            ranges[index][1] = max(ranges[index][1], float(value.max()))

        return hook

    handles = [m.register_forward_pre_hook(observer(i)) for i, m in enumerate(modules)]
    try:
        with torch.no_grad():
            for feeds in calib.batches(64):
                model(*(torch.from_numpy(feeds[name]) for name in names))
    finally:
        for handle in handles:
            handle.remove()
    return ranges


def _activation_qparams(low: float, high: float) -> tuple[float, int]:
    # Asymmetric int8 over a range that includes 0, as onnxruntime.quantization computes it.
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / 255.0 if high > low else 1.0
    zero_point = round(-128 - low / scale)
    return scale, max(-128, min(127, zero_point))


def finetune(
    model: torch.nn.Module,
    inputs: Sequence[InputSpec],
    train_samples: SampleSet,
    calib: SampleSet,
    epochs: int = DEFAULT_EPOCHS,
    lr: float = DEFAULT_LR,
    per_channel: bool = False,
    seed: int = 0,
) -> torch.nn.Module:
    """Fine-tune `model` in place through simulated int8 (see the module docstring); returns it with its
    fake quantization removed (float weights, ready to export and quantize)."""
    import torch
    from torch.nn.utils import parametrize

    if train_samples.labels is None:
        raise UsageError("--finetune needs labelled data: an .npz with a `labels` array (or a folder per class)")
    if len(inputs) != 1:
        raise UsageError("--finetune supports single-input models (class labels per sample)")
    names = [spec.name for spec in inputs]
    modules = _weighted_modules(model)
    if not modules:
        raise ModelError("--finetune found no Conv/Linear layer to quantize in the model")
    model.eval()
    qparams = [_activation_qparams(*r) for r in _observe_ranges(model, modules, calib, names)]

    class FakeQuantWeight(torch.nn.Module):
        """Symmetric int8 fake quantization of a weight (per tensor or per output channel)."""

        def forward(self, weight: torch.Tensor) -> torch.Tensor:
            if per_channel:
                flat = weight.detach().reshape(weight.shape[0], -1).abs().amax(dim=1)
                scale = torch.clamp(flat / 127.0, min=1e-12)
                zero = torch.zeros(weight.shape[0], dtype=torch.int32)
                return torch.fake_quantize_per_channel_affine(weight, scale, zero, 0, -127, 127)
            scale_value = max(float(weight.detach().abs().max()) / 127.0, 1e-12)
            return torch.fake_quantize_per_tensor_affine(weight, scale_value, 0, -127, 127)

    def input_quantizer(scale: float, zero_point: int) -> Any:
        def hook(_module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
            return (torch.fake_quantize_per_tensor_affine(args[0], scale, zero_point, -128, 127), *args[1:])

        return hook

    handles = [m.register_forward_pre_hook(input_quantizer(*q)) for m, q in zip(modules, qparams, strict=True)]
    for module in modules:
        parametrize.register_parametrization(module, "weight", FakeQuantWeight())
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    x = torch.from_numpy(train_samples.arrays[names[0]])
    y = torch.from_numpy(train_samples.labels)
    try:
        for _ in range(epochs):
            order = torch.randperm(len(x), generator=generator)
            for start in range(0, len(x), 64):
                batch = order[start : start + 64]
                optimizer.zero_grad()
                logits = model(x[batch])
                torch.nn.functional.cross_entropy(logits.reshape(len(batch), -1), y[batch]).backward()
                optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
        for module in modules:
            # Keep the trained latent float weights, drop the fake quantization.
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)
    model.eval()
    return model


def export_module(
    model: torch.nn.Module, inputs: Sequence[InputSpec], output_names: Sequence[str], target: Path
) -> None:
    """A torch module to ONNX with a dynamic batch axis (TorchScript-based exporter first, then torch.export)."""
    import torch

    from infermeter.models.samples import random_samples

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    sample = random_samples(inputs, 2, 0, sequence_length=8)
    args = tuple(torch.from_numpy(np.ascontiguousarray(sample.arrays[i.name])) for i in inputs)
    dynamic = {i.name: {0: "batch"} for i in inputs} | {name: {0: "batch"} for name in output_names}
    errors = []
    for dynamo in (False, True):
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    model,
                    args,
                    str(target),
                    input_names=[i.name for i in inputs],
                    output_names=list(output_names),
                    dynamic_axes=dynamic,
                    opset_version=18,
                    dynamo=dynamo,
                )
            return
        except Exception as exc:
            errors.append(describe_exception(exc))
    raise ModelError("could not export the fine-tuned model to ONNX: " + " | ".join(errors))
