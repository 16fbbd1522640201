"""Judging a reduced-precision (FP16/BF16) model against its FP32 reference: the usual output errors (the INT8
path's `score`), and the decisions it changes, because that is what broke in the seeds: a text classifier whose
probabilities moved by 0.02 in FP16 flipped a few samples across its 0.5 threshold."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.core.errors import UsageError
from infermeter.quantize.evaluate import Accuracy, score

# With no decision to count (an embedding model) and no --min-cosine, the budget is this mean cosine.
DEFAULT_MIN_COSINE = 0.999
PRECISIONS = ("fp16", "bf16")


@dataclass(frozen=True)
class Budget:
    """What a reduced-precision model must keep: at most `max_changed` decisions changed (top-1 flips, or
    crossings of `threshold` on a probability output), and a mean cosine of at least `min_cosine` when given."""

    max_changed: int = 0
    min_cosine: float | None = None
    threshold: float | None = None

    def check(self) -> None:
        """UsageError for a budget that cannot be meant."""
        if self.max_changed < 0:
            raise UsageError(f"--max-changed {self.max_changed} must be zero or more")
        if self.min_cosine is not None and not -1.0 <= self.min_cosine <= 1.0:
            raise UsageError(f"--min-cosine {self.min_cosine:g} must be between -1 and 1")

    def describe(self) -> str:
        """The budget in words."""
        parts = [f"at most {self.max_changed} decision(s) changed"] if self.min_cosine is None else []
        if self.min_cosine is not None:
            parts.append(f"mean cosine ≥ {self.min_cosine:g}")
        return " and ".join(parts)


@dataclass(frozen=True)
class Judgement:
    """One reduced-precision run against FP32: errors, decisions changed (None: the output has none), and how
    the figure was obtained (`emulated` on the ONNX graph, or computed by the engine)."""

    accuracy: Accuracy
    decisions_changed: int | None
    decision_rule: str
    how: str
    max_abs_error: float

    @property
    def cosine(self) -> float:
        """Mean cosine similarity with FP32."""
        return float(self.accuracy.details["cosine_mean"])

    def meets(self, budget: Budget) -> bool:
        """Whether this run is within `budget` (a NaN output never is)."""
        if not np.isfinite(self.max_abs_error):
            return False
        if budget.min_cosine is not None:
            if self.cosine < budget.min_cosine:
                return False
        elif self.decisions_changed is None:
            return self.cosine >= DEFAULT_MIN_COSINE
        return self.decisions_changed is None or self.decisions_changed <= budget.max_changed


def decisions_changed(
    reference: np.ndarray, output: np.ndarray, threshold: float | None, kind: str = "classification"
) -> tuple[int | None, str]:
    """(count, rule): the samples whose decision differs from FP32's. With `threshold`, a sample changes when any
    of its outputs lies on the other side of it; else, for class scores (2-D, several columns, not an embedding),
    when its top-1 class changes; else there is no decision to count (None)."""
    count = reference.shape[0]
    ref, out = reference.reshape(count, -1), output.reshape(count, -1)
    if threshold is not None:
        crossed = (ref > threshold) != (out > threshold)
        return int(np.sum(crossed.any(axis=1) | ~np.isfinite(out).all(axis=1))), f"threshold {threshold:g}"
    if kind != "embedding" and reference.ndim == 2 and reference.shape[1] > 1:
        flips = (np.argmax(ref, axis=1) != np.argmax(out, axis=1)) | ~np.isfinite(out).all(axis=1)
        return int(np.sum(flips)), "top-1"
    return None, "none (no class output: judged by cosine)"


def judge(kind: str, reference: np.ndarray, output: np.ndarray, labels: np.ndarray | None, threshold: float | None,
          how: str) -> Judgement:  # fmt: skip
    """`output` scored against the FP32 `reference` (errors, decisions changed), tagged with `how`."""
    changed, rule = decisions_changed(reference, output, threshold, kind)
    finite = np.nan_to_num(output.astype(np.float64), nan=np.inf)
    error = float(np.max(np.abs(finite - reference.astype(np.float64)))) if output.size else 0.0
    return Judgement(score(kind, reference, np.nan_to_num(output), labels), changed, rule, how, error)
