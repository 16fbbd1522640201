"""The two models of the regression-gate calibration's slowed pairs (`benchmarks/gate_calibration.py`).

`resnet18` is the zoo's ResNet-18 (seed 0). `resnet18_extra_block` is the same network with one more residual block
(two 3x3 convolutions, 256 channels at 14x14) after the third stage: about 12.7% more multiply-adds, the size of a
real regression a model change brings. Use them as model sources: `bench benchmarks/gate_models.py:resnet18`.
"""

from __future__ import annotations

import torch

from infermeter.models.zoo_torch import BasicBlock, _init_weights, build

EXAMPLE = (torch.zeros(1, 3, 224, 224),)


def resnet18() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The zoo's ResNet-18 with its seed-0 weights, and an example input."""
    return build("resnet18", 0), EXAMPLE


def resnet18_extra_block() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-18 with one more 256-channel residual block after stage 3 (stage 3 ends at index 5 of `layers`)."""
    model = build("resnet18", 0)
    stages = list(model.layers)
    torch.manual_seed(1)
    extra = BasicBlock(256, 256, 1)
    _init_weights(extra)  # the zoo's initialisation, so activations keep their scale (no denormals)
    extra.eval()
    model.layers = torch.nn.Sequential(*stages[:6], extra, *stages[6:])
    return model.eval(), EXAMPLE


def resnet18_extra_convs(count: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-18 with `count` more 1x1 convolutions (256 channels at 14x14, each about 0.7% more multiply-adds, with
    a residual so activations keep their scale) after stage 3: more work in the graph, sized by `count`."""
    model = build("resnet18", 0)
    stages = list(model.layers)
    torch.manual_seed(2)
    convs = [torch.nn.Conv2d(256, 256, 1, bias=False) for _ in range(count)]
    for conv in convs:
        torch.nn.init.normal_(conv.weight, std=0.01)
    model.layers = torch.nn.Sequential(*stages[:6], _Residual(torch.nn.Sequential(*convs)), *stages[6:])
    return model.eval(), EXAMPLE


class _Residual(torch.nn.Module):
    def __init__(self, body: torch.nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)
