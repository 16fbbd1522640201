"""The built-in model zoo: metadata here (no torch import), architectures in `zoo_torch`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from infermeter.models.inputs import InputSpec

# Bump when an architecture or its weight initialisation changes: it invalidates cached conversions.
ZOO_VERSION = 1
DEFAULT_MODEL = "mobilenet_v2"


@dataclass(frozen=True)
class ZooEntry:
    """A built-in model: its inputs (batch first and symbolic), task and a one-line description."""

    name: str
    description: str
    inputs: tuple[InputSpec, ...]
    output_names: tuple[str, ...]
    task: str
    seed: int = 0

    @property
    def content_hash(self) -> str:
        """Identifies the weights: same name, zoo version and seed give the same model."""
        return hashlib.sha256(f"zoo:{self.name}:v{ZOO_VERSION}:seed{self.seed}".encode()).hexdigest()[:16]


def _image(size: int) -> tuple[InputSpec, ...]:
    return (InputSpec("input", "float32", ("batch", 3, size, size)),)


ZOO: dict[str, ZooEntry] = {
    entry.name: entry
    for entry in (
        ZooEntry(
            "mobilenet_v2",
            "MobileNetV2 1.0, 224x224, 1000 classes (seeded random weights)",
            _image(224),
            ("logits",),
            "classification",
        ),
        ZooEntry(
            "resnet18",
            "ResNet-18, 224x224, 1000 classes (seeded random weights)",
            _image(224),
            ("logits",),
            "classification",
        ),
        ZooEntry(
            "tiny_cnn",
            "Four-layer CNN, 32x32, 10 classes (seeded random weights; for tests and smoke runs)",
            _image(32),
            ("logits",),
            "classification",
        ),
    )
}
