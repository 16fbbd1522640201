"""Accuracy metrics for quantized models: task metrics against labels and agreement with the FP32 model.

Every headline metric is on a 0..1 scale (1 is best), so that a drop is `(fp32 - value) * 100` percentage
points whatever the metric. SQNR (dB) is reported beside them, never as the headline.
"""

from __future__ import annotations

import numpy as np


def top1_accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples whose arg-max class equals the label."""
    return float(np.mean(np.argmax(logits.reshape(len(labels), -1), axis=1) == labels))


def top1_agreement(test: np.ndarray, reference: np.ndarray) -> float:
    """Fraction of samples whose arg-max class is the same in both outputs."""
    count = reference.shape[0]
    return float(np.mean(np.argmax(test.reshape(count, -1), 1) == np.argmax(reference.reshape(count, -1), 1)))


def cosine_similarities(test: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per-sample cosine similarity of the flattened outputs (1.0 for two all-zero rows)."""
    count = reference.shape[0]
    a = test.reshape(count, -1).astype(np.float64)
    b = reference.reshape(count, -1).astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.sum(a * b, axis=1)
    return np.where(norms > 0, dots / np.maximum(norms, 1e-300), 1.0)


def sqnr_db(test: np.ndarray, reference: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio, 10·log10(Σref² / Σ(ref-test)²) in dB; inf when identical."""
    ref = reference.astype(np.float64).reshape(-1)
    noise = float(np.sum((ref - test.astype(np.float64).reshape(-1)) ** 2))
    signal = float(np.sum(ref**2))
    if noise == 0.0:
        return float("inf")
    return float(10.0 * np.log10(max(signal, 1e-300) / noise))


def nearest_neighbours(embeddings: np.ndarray) -> np.ndarray:
    """For each row, the index of the most cosine-similar other row."""
    flat = embeddings.reshape(embeddings.shape[0], -1).astype(np.float64)
    unit = flat / np.maximum(np.linalg.norm(flat, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    return np.argmax(similarity, axis=1)


def retrieval_agreement(test: np.ndarray, reference: np.ndarray) -> float:
    """Fraction of samples whose nearest neighbour (cosine, among the other samples) is the same in both
    embedding spaces: does search over the quantized embeddings return what FP32 search returns?"""
    if reference.shape[0] < 2:
        return 1.0
    return float(np.mean(nearest_neighbours(test) == nearest_neighbours(reference)))


def mean_pool(hidden: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Sentence embeddings from token states (batch, tokens, dim): mean over the tokens the mask keeps."""
    if mask is None:
        return hidden.mean(axis=1)
    weights = mask.astype(hidden.dtype)[..., None]
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
