"""The accuracy records: a reduced-precision model's task score next to FP32's, stored as a case's `accuracy`
field (written by `quantize` and `optimize`, read by `advise`, `report` and `deploy`), why it is missing when
scoring failed, and which `quantize` variant a case measured."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from infermeter.results.records.base import Record

_SCORE_FIELDS = ("metric", "value", "fp32_value", "drop_pct", "eval_samples")


@dataclass(frozen=True)
class Accuracy(Record):
    """A quantized model's score next to FP32's. `value`/`fp32_value` are on a 0..1 scale; `drop_pct` is
    `(fp32_value - value) * 100` percentage points. `details` holds secondary metrics (cosine, SQNR...), stored
    beside the score in the same JSON object."""

    KEY: ClassVar[str] = "accuracy"

    metric: str
    value: float
    fp32_value: float
    drop_pct: float
    eval_samples: int
    details: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The on-disk form (JSON-safe: an infinite SQNR is left out)."""
        return {
            "metric": self.metric,
            "value": self.value,
            "fp32_value": self.fp32_value,
            "drop_pct": self.drop_pct,
            "eval_samples": self.eval_samples,
            **{k: v for k, v in self.details.items() if math.isfinite(v)},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`: every numeric entry beside the score is a detail."""
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, found {type(data).__name__}")
        details = {
            k: float(v)
            for k, v in data.items()
            if k not in _SCORE_FIELDS and isinstance(v, int | float) and not isinstance(v, bool)
        }
        return cls(
            metric=str(data["metric"]),
            value=float(data["value"]),
            fp32_value=float(data["fp32_value"]),
            drop_pct=float(data["drop_pct"]),
            eval_samples=int(data["eval_samples"]),
            details=details,
        )


@dataclass(frozen=True)
class AccuracyError(Record):
    """Why a reduced-precision case has no `Accuracy` (scoring it failed), in its place."""

    KEY: ClassVar[str] = "accuracy_error"
    FLAT: ClassVar[bool] = True
    MARKER: ClassVar[str] = "accuracy_error"

    accuracy_error: str


@dataclass(frozen=True)
class QuantizedVariant(Record):
    """A row of `infermeter quantize`: its `role` (`fp32`, `int8`, `mixed`...), `label`, the model it was made
    from, the quantized `file` and the nodes left in float."""

    KEY: ClassVar[str] = "quantize"

    role: str
    label: str
    source_model: str
    file: str
    float_nodes: list[str] = field(default_factory=list)
