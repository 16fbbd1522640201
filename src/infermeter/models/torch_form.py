"""A model's PyTorch form, for the torch engines and the exporter: built from code (zoo), loaded from a Python
factory or a `.pt2` program, or built from a Hugging Face folder's config and weights."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from infermeter.models.spec import ModelSpec, NoTorchForm
from infermeter.models.zoo import ZOO

if TYPE_CHECKING:
    import torch


def load_torch_module(spec: ModelSpec) -> torch.nn.Module:
    """The model as a torch module in eval mode (zoo models are built from code with their seeded weights)."""
    if spec.kind == "zoo":
        from infermeter.models import zoo_torch

        return zoo_torch.build(spec.name, ZOO[spec.name].seed)
    if spec.kind == "python":
        from infermeter.models.sources import load_python_module

        return load_python_module(spec)
    if spec.kind == "pt2":
        from infermeter.models.sources import load_pt2_module

        return load_pt2_module(spec)
    if spec.kind == "torchscript":
        from infermeter.models.torchscript import load_torchscript_module

        return load_torchscript_module(spec)  # type: ignore[no-any-return]
    if spec.kind == "hf":
        from infermeter.models.hf_torch import build_hf_module

        return build_hf_module(spec)
    raise NoTorchForm(f"{spec.ref!r} is a {spec.kind} model and has no PyTorch form", _suffix(spec))


def _suffix(spec: ModelSpec) -> str:
    return Path(spec.path).suffix.lower() if spec.path else ""
