"""The typed record of an explain run: each engine's profiled units, the aligned blocks, the findings. Serialized
to JSON by `ExplainRecord.to_dict` (the keys of `-o explain.json`)."""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Any


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


@dataclass
class EngineSummary:
    """An engine's row of the record: end-to-end P50, the time its units account for, the part of that which
    moves data (reorders, layout conversions, memcpy), and the rest of the P50 (negative: units overlap or the
    profiler's own runs were slower than the timed ones). `coverage` is the share of the original nodes the engine
    accounts for: in its units, or folded at load (`folded_nodes`: shape computations no unit ran)."""

    engine: str
    p50_us: float | None
    _: KW_ONLY  # the rest by keyword
    attributed_us: float | None
    data_movement_us: float | None
    unattributed_us: float | None
    profiled: bool
    precision: str
    coverage: float | None
    uncovered_nodes: list[str]
    folded_nodes: list[str]
    notes: list[str]
    warnings: list[str]
    error: str | None


@dataclass
class Block:
    """A block of the common partition: a union of whole units on every engine. `time_us` and `share` hold only
    the engines that profiled; `difference_us` is the slowest minus the fastest of them, `difference_share` its
    part of the summed differences of all blocks."""

    nodes: list[str]
    op_types: list[str]
    _: KW_ONLY  # the rest by keyword
    time_us: dict[str, float]
    kernels: dict[str, str]
    share: dict[str, float]
    units: dict[str, int]
    difference_us: float
    difference_share: float
    flops: int | None = None
    gflops_per_s: dict[str, float] = field(default_factory=dict)
    peak_fraction: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The block as a reader names it: its first node, and how many more."""
        more = f" +{len(self.nodes) - 1}" if len(self.nodes) > 1 else ""
        return f"{self.nodes[0]}{more}"


@dataclass
class Finding:
    """One thing found, in plain words: the block it concerns (its label, or "" for the whole engine), the
    engine, a stable code and the text. `time_us` is the time it explains (the ranking key)."""

    block: str
    engine: str
    code: str
    text: str
    time_us: float = 0.0


@dataclass
class ExplainRecord:
    """The whole answer of `infermeter explain`."""

    model: str
    batch: int
    _: KW_ONLY  # the rest by keyword
    threads: int
    precision: str
    iterations: int
    engines: list[EngineSummary]
    blocks: list[Block]
    findings: list[Finding]
    node_count: int
    notes: list[str] = field(default_factory=list)
    peak_gflops: float | None = None

    def profiled_engines(self) -> list[str]:
        """The engines with a per-unit profile."""
        return [e.engine for e in self.engines if e.profiled]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`-o explain.json`): engines keyed by name, blocks and findings as lists."""
        data = asdict(self)
        data["engines"] = {e["engine"]: e for e in data["engines"]}
        for block, typed in zip(data["blocks"], self.blocks, strict=True):
            block["label"] = typed.label
        return data
