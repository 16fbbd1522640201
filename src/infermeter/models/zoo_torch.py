"""PyTorch definitions of the built-in models. Imported only when a torch form of a zoo model is needed.

The architectures follow the published papers (MobileNetV2: Sandler et al. 2018; ResNet-18: He et al. 2016),
with seeded random weights: the speed of a network does not depend on the values of its weights, and no
weights can be downloaded here.
"""

from __future__ import annotations

import torch
from torch import nn


def _init_weights(module: nn.Module) -> None:
    # Kaiming-normal convolutions and unit BatchNorm keep activations in a sane range through deep stacks,
    # which keeps fp32 parity comparisons meaningful (no overflow, no all-zero outputs).
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d | nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def _conv_bn_act(cin: int, cout: int, kernel: int, stride: int, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 linear projection, residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = cin * expand_ratio
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(_conv_bn_act(cin, hidden, 1, 1))
        layers += [
            _conv_bn_act(hidden, hidden, 3, stride, groups=hidden),
            _conv_bn_act(hidden, cout, 1, 1, act=False),
        ]
        self.block = nn.Sequential(*layers)
        self.use_residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.use_residual else self.block(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (width 1.0, 224x224, 1000 classes): 3.5 M parameters, about 0.30 GMACs."""

    # (expansion t, output channels c, repeats n, first stride s), Table 2 of the paper.
    SETTINGS = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_act(3, 32, 3, 2)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn_act(cin, 1280, 1, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
        _init_weights(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convolutions with a (projected when needed) identity shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.downsample(x))


class ResNet18(nn.Module):
    """ResNet-18 (224x224, 1000 classes): 11.7 M parameters, 1.82 GMACs."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        stages: list[nn.Module] = []
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*stages)
        self.fc = nn.Linear(512, num_classes)
        _init_weights(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class TinyCNN(nn.Module):
    """A four-layer CNN on 3x32x32 inputs with 10 classes: small enough for tests to run every backend in seconds."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )  # fmt: skip
        self.head = nn.Linear(32, num_classes)
        _init_weights(self)
        nn.init.normal_(self.head.weight, 0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


FACTORIES = {"mobilenet_v2": MobileNetV2, "resnet18": ResNet18, "tiny_cnn": TinyCNN}


def build(name: str, seed: int) -> nn.Module:
    """The zoo model `name` in eval mode with weights drawn from `seed` (same seed, same weights); text models
    come from `zoo_text` (`minilm` has real pretrained weights, so `seed` does not apply to it)."""
    from infermeter.models import zoo_text

    if name == "minilm":
        return zoo_text.build_minilm()
    factories: dict[str, type[nn.Module]] = {**FACTORIES, **zoo_text.FACTORIES}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = factories[name]()
        if name in FACTORIES:
            _calibrate_batchnorm(model, name)
    return model.eval()


def _calibrate_batchnorm(model: nn.Module, name: str) -> None:
    """Set every BatchNorm's running statistics from one seeded batch of random images, as training would.

    With untrained statistics (mean 0, variance 1) the activations of a random deep CNN shrink layer after layer:
    MobileNetV2's logits fall to ~1e-9 and its middle layers into denormal floats, which some CPUs compute up
    to 100x slower, so eager PyTorch would be measured on a pathology no trained model has. Calibrated
    statistics keep every layer at unit scale, like a trained network's.
    """
    from infermeter.models.zoo import ZOO

    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    if not norms:
        return
    sizes = [d for d in ZOO[name].inputs[0].shape if isinstance(d, int)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: one batch sets the statistics exactly
    model.train()
    with torch.no_grad():
        model(torch.randn(8, *sizes))
    for norm in norms:
        norm.momentum = 0.1
    model.eval()
