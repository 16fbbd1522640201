"""The parity record: how a backend's outputs compare with a reference's, stored as a case's `parity` field.
The metrics and the judgement live in `infermeter.parity` (which re-exports these names)."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Any, ClassVar, Self

from infermeter.results.records.base import Record, float_from_json, json_float, known_fields

STATUSES = ("pass", "fail", "error", "unavailable")


@dataclass(frozen=True)
class Tolerance:
    """What a candidate must meet against the reference. None disables a check.

    An element passes when |cand - ref| <= atol * scale + rtol * |ref|, `scale` being the output's max |ref|.
    The absolute term is scaled because float error grows with the magnitude of what is summed: a fixed
    absolute bound would fail logits of magnitude 100 computed to the same relative accuracy, and would pass
    anything on outputs of magnitude 1e-9 (the random-weight zoo's mobilenet_v2 emits such logits). For outputs
    of magnitude ~1 (probabilities, normalized embeddings, typical logits) `atol` reads as the usual absolute one.
    The defaults per precision, and why, are in `infermeter.parity.default_tolerance`.
    """

    precision: str
    atol: float | None
    rtol: float | None
    min_cosine: float | None = None
    min_top1: float | None = None

    def describe(self) -> str:
        """`atol 1e-05×scale, rtol 0.0001, cosine ≥ 0.99999` for tables and messages."""
        parts = []
        if self.atol is not None:
            parts.append(f"atol {self.atol:g}×scale")
        if self.rtol is not None:
            parts.append(f"rtol {self.rtol:g}")
        if self.min_cosine is not None:
            parts.append(f"cosine ≥ {self.min_cosine:g}")
        if self.min_top1 is not None:
            parts.append(f"top-1 ≥ {self.min_top1:g}")
        return ", ".join(parts) or "no checks"

    @property
    def elementwise(self) -> bool:
        """True when an element-wise bound applies (atol or rtol set)."""
        return self.atol is not None or self.rtol is not None


@dataclass(frozen=True)
class OutputMetrics:
    """How one output of a candidate compares with the reference (definitions in `infermeter.parity`).
    `problem` is set (and the numbers are not) when they cannot be compared at all (missing output, shape
    mismatch)."""

    name: str
    shape: tuple[int, ...]
    _: KW_ONLY  # the rest by keyword
    max_abs_err: float = 0.0
    mean_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mean_rel_err: float = 0.0
    cosine: float = 1.0
    sqnr_db: float = math.inf
    scale: float = 1.0
    worst_ratio: float | None = None
    outside: int = 0
    top1_agreement: float | None = None
    top5_agreement: float | None = None
    nonfinite_mismatch: int = 0
    exact_required: bool = False
    problem: str | None = None


# The metrics that may be infinite (an exact match has an infinite SQNR), stored as strings in strict JSON.
_FLOAT_FIELDS = (
    "max_abs_err",
    "mean_abs_err",
    "max_rel_err",
    "mean_rel_err",
    "cosine",
    "sqnr_db",
    "scale",
    "worst_ratio",
    "top1_agreement",
    "top5_agreement",
)


@dataclass
class ParityRecord(Record):
    """The parity verdict of one backend against the reference, as stored in a case's `parity` field."""

    KEY: ClassVar[str] = "parity"

    backend: str
    reference: str
    _: KW_ONLY  # the rest by keyword
    precision: str
    status: str  # one of STATUSES
    reason: str
    tolerance: Tolerance
    precision_effective: str | None = None
    outputs: list[OutputMetrics] = field(default_factory=list)
    samples: int = 0
    worst_output: str | None = None
    localization: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        """True when the backend ran and every output met the tolerance."""
        return self.status == "pass"

    def worst(self) -> OutputMetrics | None:
        """The metrics of the worst output, if any were compared."""
        return next((m for m in self.outputs if m.name == self.worst_output), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (strict JSON: infinities as strings), with `passed` for readers of the JSON."""
        data = asdict(self)
        data["passed"] = self.passed
        for out in data["outputs"]:
            out["shape"] = list(out["shape"])
            for key in _FLOAT_FIELDS:
                out[key] = json_float(out[key])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`."""
        outputs = []
        for out in data.get("outputs", []):
            values = dict(out)
            values["shape"] = tuple(values["shape"])
            for key in _FLOAT_FIELDS:
                if key in values:
                    values[key] = float_from_json(values[key])
            outputs.append(OutputMetrics(**known_fields(OutputMetrics, values)))
        plain = known_fields(cls, data)
        plain.update(tolerance=Tolerance(**known_fields(Tolerance, data["tolerance"])), outputs=outputs)
        return cls(**plain)
