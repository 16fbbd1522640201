"""What an explain run works with before its record: each engine's profiled units and its end-to-end time. The
record itself (`ExplainRecord`: engines, blocks, findings) is in `results.explain`, where the report reads it."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field


@dataclass
class Unit:
    """One execution unit an engine reports (an ONNX Runtime kernel, an OpenVINO primitive, a torch module):
    the original ONNX nodes it stands for, its median time over the profiled iterations, and what ran it.
    `kind` is compute, data_movement or other; `executed` is False for a unit the engine optimized out."""

    name: str
    nodes: tuple[str, ...]
    _: KW_ONLY  # the rest by keyword
    time_us: float
    kernel: str
    op_type: str
    precision: str = ""
    kind: str = "other"
    executed: bool = True
    provider: str = ""
    # A torch unit made of several modules (one the exporter folded into the next): each module's type and µs.
    parts: tuple[tuple[str, float], ...] = ()


@dataclass
class EngineProfile:
    """What one engine gave: its end-to-end P50 (a timed run apart from the profile), its units (empty when it
    has no per-unit profile) and the lines it said (notes, captured warnings) or the error that stopped it."""

    engine: str
    p50_us: float | None = None
    _: KW_ONLY  # the rest by keyword
    units: list[Unit] = field(default_factory=list)
    profiled: bool = False
    precision: str = ""
    # "kernel" when a unit is what the engine ran (fusions show), "module" when it is a framework scope (torch).
    unit_kind: str = "kernel"
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
