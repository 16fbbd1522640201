"""The offline test LLM: a tiny Llama-architecture model with a BPE tokenizer trained on a text shipped here.

Nothing is downloaded. The tokenizer is a byte-level BPE (GPT-2 style) trained with `tokenizers` on
`data/corpus.txt`; the model is `LlamaForCausalLM` with tiny dimensions and seeded random weights, trained for a few
seconds on the same text so that its next-token choices are
not noise and a quantization's quality loss shows up in perplexity and top-1 agreement. Dimensions are
multiples of 256 so that llama.cpp's k-quants (super-blocks of 256) apply to every matrix.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class TinyLlamaConfig:
    """Dimensions and training of the tiny model (part of its cache key)."""

    vocab_size: int = 512
    hidden_size: int = 256
    _: KW_ONLY  # the rest by keyword
    intermediate_size: int = 512
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    max_positions: int = 1024
    train_steps: int = 60
    train_seq_len: int = 64
    seed: int = 0

    def key(self) -> dict[str, object]:
        """The cache key: every field plus a format version."""
        return {"format": 1, **asdict(self)}


def corpus_text() -> str:
    """The public-domain text shipped with infermeter (tokenizer training, perplexity)."""
    return resources.files("infermeter.llm").joinpath("data/corpus.txt").read_text(encoding="utf-8")


def train_tokenizer(text: str, vocab_size: int) -> object:
    """A byte-level BPE `tokenizers.Tokenizer` trained on `text`; ids 0 and 1 are <s> and </s>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([text], trainer)
    return tokenizer


def build_tiny_llama(folder: Path, config: TinyLlamaConfig) -> str:
    """Write a Hugging Face model folder (config, safetensors, tokenizer) into `folder`; returns a note."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    text = corpus_text()
    raw_tokenizer = train_tokenizer(text, config.vocab_size)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw_tokenizer, bos_token="<s>", eos_token="</s>")
    tokenizer.pad_token = tokenizer.eos_token
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    torch.manual_seed(config.seed)
    model_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.kv_heads,
        max_position_embeddings=config.max_positions,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(model_config)
    loss = _train(model, ids, config)
    model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return f"tiny Llama trained {config.train_steps} steps on the shipped text (final loss {loss:.2f})"


def _train(model: object, ids: list[int], config: TinyLlamaConfig) -> float:
    import torch

    data = torch.tensor(ids, dtype=torch.long)
    # One thread: this model is too small for two to help, and OpenMP threads spinning against other
    # processes on a busy 2-core machine made a 5-second training take minutes.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)  # type: ignore[attr-defined]
    model.train()  # type: ignore[attr-defined]
    loss_value = float("nan")
    seq = min(config.train_seq_len, len(ids) - 1)
    for _ in range(config.train_steps):
        starts = torch.randint(0, len(ids) - seq - 1, (8,), generator=generator)
        batch = torch.stack([data[s : s + seq] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss  # type: ignore[operator]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
    torch.set_num_threads(threads)
    return loss_value
