"""Models built with a deliberately fragile layer for `benchmarks/precision_fallback.py` (infermeter factories:
`benchmarks/precision_models.py:fragile_layernorm`): a LayerNorm written out as ReduceMean/Sub/Pow/ReduceMean/
Add/Sqrt/Div over activations near 1e3, as older exporters wrote it, so that x² (about 1e6) overflows FP16's
65504; and the same model with the fused LayerNorm, which needs nothing kept in FP32."""

from __future__ import annotations

import torch
from torch import nn

DIM = 64
CLASSES = 10


class LayerNormClassifier(nn.Module):
    """Linear (gain ~1e3) → LayerNorm (written out, or fused) → ReLU → Linear: ten class scores."""

    def __init__(self, fused: bool) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.fused = fused
        self.fc1, self.fc2 = nn.Linear(DIM, DIM), nn.Linear(DIM, CLASSES)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.randn(DIM, DIM, generator=generator) * 100.0)
            self.fc2.weight.copy_(torch.randn(CLASSES, DIM, generator=generator) * 0.3)
            # Every parameter from the seeded generator: the ONNX export and the torch module must be the same model.
            self.fc1.bias.copy_(torch.randn(DIM, generator=generator))
            self.fc2.bias.copy_(torch.randn(CLASSES, generator=generator) * 0.1)
        self.norm = nn.LayerNorm(DIM, elementwise_affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        if self.fused:
            h = self.norm(h)
        else:
            centred = h - h.mean(-1, keepdim=True)
            h = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.fc2(torch.relu(h))


def fragile_layernorm() -> tuple[nn.Module, dict[str, tuple[str, tuple[object, ...]]]]:
    """The written-out LayerNorm classifier (breaks in FP16)."""
    return LayerNormClassifier(fused=False), {"x": ("float32", ("batch", DIM))}


def fused_layernorm() -> tuple[nn.Module, dict[str, tuple[str, tuple[object, ...]]]]:
    """The same classifier with the fused LayerNorm (nothing to keep in FP32)."""
    return LayerNormClassifier(fused=True), {"x": ("float32", ("batch", DIM))}


class _Centre(nn.Module):
    """Subtracts the offset the first layer added."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - 1000.0


def bf16_offset() -> tuple[nn.Module, dict[str, tuple[str, tuple[object, ...]]]]:
    """A model that breaks in BF16 (8 bits of mantissa): its first Linear adds 1000 to small values, which BF16
    rounds away before `centre` subtracts it. For `optimize -b torch`: its bf16 case misses the budget and the
    FP32-fallback variant (fc1 excluded from autocast) becomes the candidate."""
    generator = torch.Generator().manual_seed(0)
    fc1, fc2 = nn.Linear(16, 32), nn.Linear(32, 4)
    with torch.no_grad():
        for layer in (fc1, fc2):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) * 0.25)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=generator) * 0.1)
        fc1.bias.add_(1000.0)
    model = nn.Sequential()
    model.add_module("fc1", fc1)
    model.add_module("centre", _Centre())
    model.add_module("fc2", fc2)
    return model, {"x": ("float32", ("batch", 16))}
