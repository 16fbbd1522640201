"""Hugging Face model folders as MODEL: a local folder with `config.json` and weights (what `save_pretrained` writes).

The architecture and the task come from the config (`architectures`); the inputs from what feeds the model: a
text model takes its tokenizer's outputs (`input_ids`, `attention_mask`, and `token_type_ids` when the config has
token types), [batch, seq], fed real sentences through the folder's own tokenizer (`text_feeds`); a vision model
takes `pixel_values` [batch, channels, height, width] at its image processor's size, fed images normalised as its
processor says. A sentence-transformers folder (`modules.json` with mean pooling) is the embedding model that
sentence-transformers computes, as the zoo's `minilm` is. No torch import here: the module is built by
`models/hf_torch.py` when a torch form is needed (export, PyTorch backends, parity's reference).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.core.errors import ModelError
from infermeter.models.inputs import Feeds, InputSpec

if TYPE_CHECKING:
    from infermeter.models.spec import ModelSpec

TEXT_HOOK = "infermeter.models.text_feeds:sentence_feeds"
IMAGE_HOOK = "infermeter.models.hf_folder:image_feeds"
DEFAULT_SEQ_LEN = 128
# The files that make the model what it is (weights, config, tokenizer, processor); a README edit is not one.
_IDENTITY_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".msgpack", ".h5")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file of the folder as a dict (ModelError when it is not one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path} is not readable JSON ({type(exc).__name__}: {exc})") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path} does not hold a JSON object")
    return data


def is_sentence_embedder(folder: Path) -> bool:
    """True for a sentence-transformers folder whose pooling is the mean over real tokens."""
    modules = folder / "modules.json"
    if not modules.is_file():
        return False
    for entry in json.loads(modules.read_text(encoding="utf-8")):
        if str(entry.get("type", "")).endswith("Pooling"):
            pooling = folder / str(entry.get("path", "")) / "config.json"
            return pooling.is_file() and bool(read_json(pooling).get("pooling_mode_mean_tokens"))
    return False


def architecture(config: dict[str, Any], where: Path) -> str:
    """The model class the config names (its first `architectures` entry)."""
    names = config.get("architectures")
    if not isinstance(names, list) or not names or not isinstance(names[0], str):
        raise ModelError(f'{where} names no architecture ("architectures": [...]); save it with save_pretrained')
    return names[0]


def task_of(arch: str, folder: Path) -> tuple[str, tuple[str, ...]]:
    """(task, output names) from the architecture: classifiers give logits, a bare encoder its last hidden
    state, a sentence-transformers folder its pooled, normalised embedding."""
    if is_sentence_embedder(folder):
        return "embedding", ("sentence_embedding",)
    if arch.endswith(("ForSequenceClassification", "ForImageClassification", "ForAudioClassification")):
        return "classification", ("logits",)
    if arch.endswith("Model"):
        return "feature-extraction", ("last_hidden_state",)
    return "generic", ("logits",)


def _image_size(folder: Path, config: dict[str, Any]) -> tuple[int, int]:
    processor = (
        read_json(folder / "preprocessor_config.json") if (folder / "preprocessor_config.json").is_file() else {}
    )
    for key in ("crop_size", "size"):
        size = processor.get(key)
        if isinstance(size, int):
            return size, size
        if isinstance(size, dict) and "height" in size and "width" in size:
            return int(size["height"]), int(size["width"])
        if isinstance(size, dict) and "shortest_edge" in size:
            return int(size["shortest_edge"]), int(size["shortest_edge"])
    size = config.get("image_size")
    if isinstance(size, int):
        return size, size
    raise ModelError(f"{folder}: neither preprocessor_config.json nor config.json gives the image size")


def _inputs(folder: Path, config: dict[str, Any]) -> tuple[InputSpec, ...]:
    source = str(folder)
    if "image_size" in config or (folder / "preprocessor_config.json").is_file():
        height, width = _image_size(folder, config)
        shape = ("batch", int(config.get("num_channels", 3)), height, width)
        return (InputSpec("pixel_values", "float32", shape=shape, feeds_hook=IMAGE_HOOK, feeds_source=source),)
    if not (folder / "tokenizer.json").is_file():
        raise ModelError(
            f"{folder} has neither a tokenizer (tokenizer.json) nor an image processor (preprocessor_config.json) "
            "to feed it; save them into the folder with save_pretrained"
        )
    tokenizer_config = folder / "tokenizer_config.json"
    names = read_json(tokenizer_config).get("model_input_names") if tokenizer_config.is_file() else None
    if not isinstance(names, list):
        names = ["input_ids", "attention_mask", *(["token_type_ids"] if config.get("type_vocab_size") else [])]
    seq_len = min(DEFAULT_SEQ_LEN, int(config.get("max_position_embeddings", DEFAULT_SEQ_LEN)))
    vocab = int(config.get("vocab_size", 30522))
    return tuple(
        InputSpec(
            str(name),
            "int64",
            shape=("batch", "seq"),
            int_range=(0, vocab),
            dim_defaults=(("seq", seq_len),),
            feeds_hook=TEXT_HOOK,
            feeds_source=source,
        )
        for name in names
    )


def _content_hash(folder: Path) -> str:
    from infermeter.models.spec import file_sha256

    digest = hashlib.sha256(b"hf-folder")
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _IDENTITY_SUFFIXES):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(file_sha256(path).encode())
    return digest.hexdigest()[:16]


def hf_spec(ref: str, folder: Path) -> ModelSpec:
    """The ModelSpec of a Hugging Face model folder (kind `hf`), or ModelError saying what is missing."""
    from infermeter.models.spec import ModelSpec

    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelError(
            f"{ref} is a folder without config.json: a Hugging Face model folder holds config.json and its weights "
            "(model.save_pretrained(folder)); other models are .onnx, .pt2 or .tflite files or file.py:factory"
        )
    config = read_json(config_path)
    arch = architecture(config, config_path)
    if not any(p.suffix in (".safetensors", ".bin") for p in folder.iterdir()):
        raise ModelError(f"{ref} holds no weights (model.safetensors or pytorch_model.bin)")
    task, outputs = task_of(arch, folder)
    return ModelSpec(
        ref=ref,
        name=folder.resolve().name,
        kind="hf",
        inputs=_inputs(folder, config),
        output_names=outputs,
        content_hash=_content_hash(folder),
        task=task,
        path=str(folder.resolve()),
    )


def image_feeds(inputs: Sequence[InputSpec], shapes: dict[str, tuple[int, ...]], count: int, seed: int) -> list[Feeds]:
    """`count` feed sets of seeded random RGB images, rescaled and normalised as the folder's image processor
    says (`rescale_factor`, `image_mean`, `image_std` of preprocessor_config.json)."""
    spec = inputs[0]
    folder = Path(spec.feeds_source or ".")
    processor = folder / "preprocessor_config.json"
    settings = read_json(processor) if processor.is_file() else {}
    shape = shapes[spec.name]
    channels = shape[1]
    scale = float(settings.get("rescale_factor", 1 / 255)) if settings.get("do_rescale", True) else 1.0
    mean = np.asarray(settings.get("image_mean", [0.5] * channels), dtype=np.float32).reshape(1, -1, 1, 1)
    std = np.asarray(settings.get("image_std", [0.5] * channels), dtype=np.float32).reshape(1, -1, 1, 1)
    if not settings.get("do_normalize", True):
        mean, std = np.zeros_like(mean), np.ones_like(std)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        pixels = rng.integers(0, 256, size=shape).astype(np.float32) * scale
        out.append({spec.name: ((pixels - mean) / std).astype(spec.dtype)})
    return out
