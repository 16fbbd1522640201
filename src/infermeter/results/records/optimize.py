"""The optimize record: which step of an `optimize` run measured a case, and on which artifact. (The run's
story, with every step and skip, is the results file's own `optimize` journal: `optimize.journal`.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from infermeter.results.records.base import Record


@dataclass(frozen=True)
class OptimizeStep(Record):
    """`step` is the optimize step (`baseline`, `fp32`, `int8`, `half`, `shapes`, `batching`...), `variant` the
    configuration's label within it (`INT8 QDQ per-channel`, `mixed (3 float)`; `""` for a plain backend run)
    and `artifact` the model file measured, relative to the optimize folder (None: the source model)."""

    KEY: ClassVar[str] = "optimize"

    step: str
    variant: str = ""
    artifact: str | None = None

    @property
    def quantized_file(self) -> bool:
        """True when the artifact is an INT8 or mixed-precision file (its precision is fixed by the file)."""
        return self.variant.startswith(("INT8", "mixed"))
