"""quantize's flags as typed groups, one per form of the command (INT8, `--to fp16|bf16`): each form reads its
group from click's keyword arguments, and the flags of the other form are refused by name."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, fields
from pathlib import Path
from typing import Any, Self


class _Flags:
    """A typed group of quantize's flags, read from click's keyword arguments by field name."""

    @classmethod
    def of(cls, flags: dict[str, Any]) -> Self:
        """The group's fields from the command's keyword arguments."""
        return cls(**{f.name: flags[f.name] for f in fields(cls)})  # type: ignore[arg-type]

    @classmethod
    def names(cls) -> set[str]:
        """The parameter names the group takes."""
        return {f.name for f in fields(cls)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Int8Flags(_Flags):
    """`quantize MODEL -o FILE`: INT8 with ONNX Runtime (QDQ) or OpenVINO (NNCF)."""

    output: Path | None
    engine: str
    _: KW_ONLY  # the rest by keyword
    mode: str
    calib: str | None
    data: str | None
    inputs: tuple[str, ...]
    reshape: tuple[str, ...]
    calib_size: int
    eval_size: int
    method: str
    activations: str
    per_channel: bool
    exclude: tuple[str, ...]
    eval_data: str | None
    sensitivity: bool
    max_drop: float | None
    finetune: str | None
    finetune_epochs: int
    no_latency: bool
    results: Path | None
    threads: int
    seed: int


@dataclass(frozen=True)
class StudyFlags(_Flags):
    """`quantize --to fp16|bf16`: the reduced-precision study with FP32 fallback."""

    to: str
    backends: tuple[str, ...]
    _: KW_ONLY  # the rest by keyword
    output: Path | None
    data: str | None
    threshold: float | None
    max_changed: int
    min_cosine: float | None
    max_evals: int
    samples: int
    no_latency: bool
    threads: int
    seed: int


# The flags every form takes; each form's own are its group's fields, and the others are refused.
COMMON_PARAMS = {"model"}
TO_ONLY = tuple(sorted(StudyFlags.names() - Int8Flags.names() - {"to"}))
