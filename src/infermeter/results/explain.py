"""The record of `infermeter explain` (`-o explain.json`): each engine's row, the blocks of the common partition
and the findings. `ExplainRecord.to_dict` writes the JSON form, `read_explain` reads it back (the HTML report's
Explain section, `infermeter report --explain explain.json`)."""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Any

from infermeter.core.errors import ResultsError
from infermeter.results.records.base import known_fields


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExplainRecord:
        """Inverse of `to_dict` (KeyError, TypeError or ValueError on data that is not such a record)."""
        fields = known_fields(cls, data)
        engines = data["engines"]
        if not isinstance(engines, dict) or not isinstance(data["blocks"], list):
            raise TypeError("engines must be an object keyed by engine, blocks a list")
        fields["engines"] = [EngineSummary(**known_fields(EngineSummary, e)) for e in engines.values()]
        fields["blocks"] = [Block(**known_fields(Block, b)) for b in data["blocks"]]
        fields["findings"] = [Finding(**known_fields(Finding, f)) for f in data["findings"]]
        return cls(**fields)


def read_explain(path: Path) -> ExplainRecord:
    """The explain record in a JSON file (`infermeter explain -o explain.json`); ResultsError saying why not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"cannot read explain record {str(path)!r}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ResultsError(
            f"{path} is not valid JSON ({exc}); write one with `infermeter explain -o FILE.json`"
        ) from exc
    try:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, found {type(data).__name__}")
        return ExplainRecord.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultsError(
            f"{path} is not an explain record ({type(exc).__name__}: {exc}); write one with "
            "`infermeter explain -o FILE.json`"
        ) from exc
