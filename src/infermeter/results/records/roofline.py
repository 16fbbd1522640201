"""The roofline record: FLOPs and bytes per inference, achieved GFLOP/s at the median latency, and where that
stands against this machine's measured ceiling (written by `graph.roofline`, read by the summary table, the
reports' roofline chart and the CSV). Flat: its fields sit at the case's top level, as they always have."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar

from infermeter.results.records.base import Record


@dataclass(frozen=True)
class Roofline(Record):
    """One ok case against the roofline. `peak_precision` names the ceiling compared with (`fp32_gflops`,
    `int8_gops`...), `peak_ceiling_gflops` its value (None when the peak lacks it, and then so is
    `peak_fraction`); `attainable_gflops` and `roofline_bound` (`memory` or `compute`) need the bandwidth too;
    `peak_exceeded` marks a figure above its ceiling (the ceiling is wrong); `uncounted_nodes` counts the graph's
    nodes whose shapes stayed unknown, so that `flops`, `achieved_gflops` and `peak_fraction` are lower bounds."""

    KEY: ClassVar[str] = "roofline"
    FLAT: ClassVar[bool] = True
    MARKER: ClassVar[str] = "flops"

    flops: int
    bytes_moved: int
    _: KW_ONLY  # the rest by keyword
    achieved_gflops: float
    arithmetic_intensity: float
    peak_precision: str
    peak_ceiling_gflops: float | None = None
    peak_fraction: float | None = None
    attainable_gflops: float | None = None
    roofline_bound: str | None = None
    peak_exceeded: bool = False
    uncounted_nodes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The case fields, as `graph.roofline` always wrote them: the bandwidth-derived pair only when known,
        `peak_exceeded` only when true, `uncounted_nodes` only when some are."""
        data: dict[str, Any] = {
            "flops": self.flops,
            "bytes_moved": self.bytes_moved,
            "achieved_gflops": self.achieved_gflops,
            "arithmetic_intensity": self.arithmetic_intensity,
            "peak_precision": self.peak_precision,
            "peak_ceiling_gflops": self.peak_ceiling_gflops,
            "peak_fraction": self.peak_fraction,
        }
        if self.attainable_gflops is not None:
            data["attainable_gflops"] = self.attainable_gflops
            data["roofline_bound"] = self.roofline_bound
        if self.peak_exceeded:
            data["peak_exceeded"] = True
        if self.uncounted_nodes:
            data["uncounted_nodes"] = self.uncounted_nodes
        return data


@dataclass(frozen=True)
class RooflineError(Record):
    """Why a case has no roofline figures (its model's graph could not be analysed), in place of `Roofline`."""

    KEY: ClassVar[str] = "roofline_error"
    FLAT: ClassVar[bool] = True
    MARKER: ClassVar[str] = "roofline_error"

    roofline_error: str
