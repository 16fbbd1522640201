"""The precision a case's weights were stored in and the precision the engine computed in, kept apart (flat fields
`precision_storage`, `precision_compute`, `precision_model_own`, `precision_evidence`; written by the measurement
core, read by reports). An FP16 graph that ONNX Runtime's CPU provider runs through inserted casts is
`fp16` storage, `fp32` compute: a speedup is only ever claimed for the compute precision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from infermeter.results.records.base import Record


@dataclass(frozen=True)
class ComputePrecision(Record):
    """Storage and compute precision of a case. `precision_model_own`: the storage precision is the model file's
    own (an FP16 or BF16 file, an INT8 graph), not a conversion asked for; `precision_evidence`: where the compute
    precision was read (`onnxruntime profile: 3 fp32 compute kernels`; empty when the engine said nothing more than
    its setting)."""

    KEY: ClassVar[str] = "precision_compute"
    FLAT: ClassVar[bool] = True
    MARKER: ClassVar[str] = "precision_compute"

    precision_storage: str
    precision_compute: str
    precision_model_own: bool = False
    precision_evidence: str = ""

    def model_own(self, requested: str) -> bool:
        """True when the engine computes the model's own precision although `requested` was another: the model's
        precision (an FP16 file benched at the default fp32), not a precision change of the engine's."""
        own = self.precision_model_own and self.precision_compute == self.precision_storage
        return own and requested != self.precision_compute

    def label(self) -> str:
        """`fp16 (model)` for a model run in its own precision; `fp32 (fp16 model)` when the engine computed the
        model's FP16 weights in FP32; `fp32 (fp16 storage)` for storage of ours; the compute precision alone
        otherwise."""
        if self.precision_model_own and self.precision_storage != "fp32":
            same = self.precision_storage == self.precision_compute
            return f"{self.precision_compute} ({'' if same else self.precision_storage + ' '}model)"
        if self.precision_storage != self.precision_compute and self.precision_storage in ("fp16", "bf16"):
            return f"{self.precision_compute} ({self.precision_storage} storage)"
        return self.precision_compute
