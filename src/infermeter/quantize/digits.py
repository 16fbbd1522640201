"""A real, offline accuracy case: a small CNN trained in seconds on scikit-learn's digits (1,797 real 8x8
handwritten digits that ship inside scikit-learn), deterministically (seeded, CPU, single thread).

`write_case(OUT_DIR)` (run by benchmarks/quantize_digits.py and the tests) writes `digits_cnn.onnx`, `train.npz`
and `test.npz` (arrays `input` and `labels`), ready for
`infermeter quantize OUT_DIR/digits_cnn.onnx --calib train.npz --eval test.npz`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from infermeter.models.inputs import InputSpec

if TYPE_CHECKING:
    import torch

TEST_FRACTION = 0.3
DEFAULT_EPOCHS = 30
INPUTS = (InputSpec("input", "float32", shape=("batch", 1, 8, 8)),)


@dataclass(frozen=True)
class DigitsData:
    """The digits split in two, images scaled to 0..1 as float32 (N, 1, 8, 8), labels int64."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_split(seed: int = 0) -> DigitsData:
    """The real digits data set, shuffled with `seed` and split 70/30 (stratified by class)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=TEST_FRACTION, random_state=seed, stratify=labels
    )
    return DigitsData(x_train, y_train, x_test, y_test)


def build_model() -> torch.nn.Module:
    """Three convolutions and a linear head (~25k parameters)."""
    import torch
    from torch import nn

    class DigitsCNN(nn.Module):
        """conv16 → conv32 → pool → conv64 → global average → linear(10)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
            self.head = nn.Linear(64, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.conv1(x))
            x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
            x = torch.relu(self.conv3(x))
            return self.head(x.mean(dim=(2, 3)))

    return DigitsCNN()


def train(
    data: DigitsData, epochs: int = DEFAULT_EPOCHS, seed: int = 0, model: torch.nn.Module | None = None
) -> torch.nn.Module:
    """Train (or continue training) the CNN with Adam, batch 64, fixed shuffling: same seed, same weights."""
    import torch

    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: float reductions in a fixed order, so runs repeat bit for bit
    try:
        net = model if model is not None else build_model()
        optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
        x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
        generator = torch.Generator().manual_seed(seed)
        net.train()
        for _ in range(epochs):
            order = torch.randperm(len(x), generator=generator)
            for start in range(0, len(x), 64):
                batch = order[start : start + 64]
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(net(x[batch]), y[batch]).backward()
                optimizer.step()
        net.eval()
        return net
    finally:
        torch.set_num_threads(threads)


def accuracy(model: torch.nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    """Top-1 accuracy (0..1) of a torch model."""
    import torch

    with torch.no_grad():
        logits = model(torch.from_numpy(x)).numpy()
    return float(np.mean(np.argmax(logits, axis=1) == y))


def export(model: torch.nn.Module, target: Path) -> None:
    """ONNX with input `input` (batch, 1, 8, 8) and output `logits`, dynamic batch."""
    from infermeter.quantize.qat import export_module

    export_module(model, INPUTS, ("logits",), target)


def write_case(folder: Path, epochs: int = DEFAULT_EPOCHS, seed: int = 0) -> tuple[Path, Path, Path, float]:
    """Train, export and write the data: returns (model.onnx, train.npz, test.npz, torch test accuracy)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = load_split(seed)
    model = train(data, epochs, seed)
    model_path, train_path, test_path = folder / "digits_cnn.onnx", folder / "train.npz", folder / "test.npz"
    export(model, model_path)
    np.savez(train_path, input=data.x_train, labels=data.y_train)
    np.savez(test_path, input=data.x_test, labels=data.y_test)
    return model_path, train_path, test_path, accuracy(model, data.x_test, data.y_test)
