"""The torch form of a Hugging Face model folder (`models/hf_folder.py`): the class its config names, loaded
offline by `zoo_text.load_pretrained`, wrapped so that it takes its inputs positionally, in the spec's order, and
returns one tensor: the pooled, normalised embedding of a sentence-transformers folder (the zoo `minilm`'s
wrapping), else the model's first output (logits, or the last hidden state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from infermeter.core.errors import ModelError
from infermeter.models.spec import ModelSpec


class FirstOutput(nn.Module):
    """Calls a Hugging Face model with its inputs by name and returns its first output."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *args: torch.Tensor) -> Any:
        return self.model(**dict(zip(self.names, args, strict=True)), return_dict=False)[0]


def build_hf_module(spec: ModelSpec) -> nn.Module:
    """The module of an `hf` spec, in eval mode."""
    from infermeter.models.hf_folder import architecture, read_json
    from infermeter.models.zoo_text import SentenceEmbedder, load_pretrained

    assert spec.path is not None
    folder = Path(spec.path)
    config = folder / "config.json"
    names = tuple(i.name for i in spec.inputs)
    if spec.task == "embedding":
        if names[:2] != ("input_ids", "attention_mask") or names[2:] not in ((), ("token_type_ids",)):
            raise ModelError(f"{spec.ref}: a sentence embedder takes input_ids, attention_mask[, token_type_ids]")
        return SentenceEmbedder(load_pretrained(folder, "AutoModel")).eval()
    return FirstOutput(load_pretrained(folder, architecture(read_json(config), config)), names).eval()
