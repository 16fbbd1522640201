"""The INT8 record of a case run at `--precision int8`: what was asked, what ran (read back from the engine), which
quantizer made the graph, how many compute layers ran in each precision, and, where the engine profiles per node,
where the time went (`int8` field; written by the measurement core, read by `optimize`, reports and
benchmarks/int8_engines.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Self

from infermeter.results.records.base import Record, known_fields

# The quantizer of a graph that came quantized (a QDQ ONNX or an NNCF IR given as the model).
GIVEN = "given"


@dataclass(frozen=True)
class LayerMix:
    """The compute layers (convolutions, matmuls, fully connected) of the compiled graph, counted by the precision
    the engine runs each in (`counts`: {"int8": 27, "fp32": 3}), and the names of those left in float."""

    counts: dict[str, int]
    float_layers: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """How many compute layers the graph has."""
        return sum(self.counts.values())

    def describe(self) -> str:
        """`27 int8, 3 fp32 of 30 compute layers`."""
        parts = ", ".join(f"{n} {p}" for p, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
        return f"{parts} of {self.total} compute layers" if self.counts else "no compute layers"


@dataclass(frozen=True)
class LayerTime:
    """One node of a per-node profile: name, type as the engine names it, the precision it ran in, mean ms."""

    name: str
    layer_type: str
    precision: str
    ms: float


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one kind in a profile (Reorder, Convert, quantize/dequantize, compute left in float): how many and
    their mean ms per inference together."""

    count: int = 0
    ms: float = 0.0

    @classmethod
    def of(cls, nodes: Iterable[LayerTime]) -> NodeGroup:
        """The group of `nodes`."""
        chosen = list(nodes)
        return cls(len(chosen), sum(n.ms for n in chosen))


@dataclass(frozen=True)
class LayerProfile:
    """A per-node breakdown from the engine's own counters (OpenVINO PERF_COUNT), mean per inference over
    `iterations` untimed runs: the total of the nodes, the reorders, converts and unfused quantize nodes, the
    compute layers that ran in float, and the `top` nodes by time."""

    total_ms: float
    iterations: int
    _: KW_ONLY  # the rest by keyword
    reorders: NodeGroup
    converts: NodeGroup
    quantize_nodes: NodeGroup
    float_compute: NodeGroup
    top: list[LayerTime] = field(default_factory=list)

    @classmethod
    def of(
        cls, nodes: list[LayerTime], iterations: int, kinds: Callable[[LayerTime], str | None], top: int = 5
    ) -> LayerProfile:
        """The profile of `nodes` (each with its mean ms per inference), grouped by `kinds(node)`: "reorder",
        "convert", "quantize", "compute" (an arithmetic layer) or None; the `top` slowest kept by name."""
        kind = [(node, kinds(node)) for node in nodes]
        return cls(
            total_ms=sum(n.ms for n in nodes),
            iterations=iterations,
            reorders=NodeGroup.of(n for n, k in kind if k == "reorder"),
            converts=NodeGroup.of(n for n, k in kind if k == "convert"),
            quantize_nodes=NodeGroup.of(n for n, k in kind if k == "quantize"),
            float_compute=NodeGroup.of(n for n, k in kind if k == "compute" and n.precision != "int8"),
            top=sorted(nodes, key=lambda n: -n.ms)[:top],
        )

    def overhead(self) -> NodeGroup:
        """Reorders, converts and unfused quantize nodes together: the time INT8 adds around its compute."""
        groups = (self.reorders, self.converts, self.quantize_nodes)
        return NodeGroup(sum(g.count for g in groups), sum(g.ms for g in groups))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "total_ms": self.total_ms,
            "iterations": self.iterations,
            "reorders": vars(self.reorders),
            "converts": vars(self.converts),
            "quantize_nodes": vars(self.quantize_nodes),
            "float_compute": vars(self.float_compute),
            "top": [vars(t) for t in self.top],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LayerProfile:
        """Inverse of `to_dict`."""
        groups = {k: NodeGroup(**known_fields(NodeGroup, data[k])) for k in _GROUPS}
        top = [LayerTime(**known_fields(LayerTime, t)) for t in data.get("top", [])]
        return cls(total_ms=float(data["total_ms"]), iterations=int(data["iterations"]), top=top, **groups)


_GROUPS = ("reorders", "converts", "quantize_nodes", "float_compute")


@dataclass(frozen=True)
class Int8Run(Record):
    """A case run at `--precision int8`. `requested` is int8, `effective` the precision the engine read back;
    `quantizer` made the graph (`nncf`, `ort-qdq`, or `given` for a model that came quantized) and `source` says
    whose graph the engine ran (`own`: its own quantizer's; `cross-fed`: another engine's quantizer's, such as ONNX
    Runtime's QDQ graph on OpenVINO; `given`).
    `mix` is the per-layer precision mix read from the compiled graph; `profile` (and `fp32_profile`, the float
    model compiled the same way, when there is one) the per-node breakdown, or `profile_error` why it is missing."""

    KEY: ClassVar[str] = "int8"

    requested: str
    effective: str | None
    _: KW_ONLY  # the rest by keyword
    quantizer: str
    source: str
    mix: LayerMix | None = None
    profile: LayerProfile | None = None
    fp32_profile: LayerProfile | None = None
    profile_error: str | None = None

    def label(self) -> str:
        """`int8 (nncf; 27 int8, 3 fp32 of 30 compute layers)` for tables and notes."""
        made = self.quantizer if self.source != "cross-fed" else f"{self.quantizer}, cross-fed"
        return f"int8 ({made}" + (f"; {self.mix.describe()})" if self.mix else ")")

    def to_dict(self) -> dict[str, Any]:
        """The on-disk form."""
        return {
            "requested": self.requested,
            "effective": self.effective,
            "quantizer": self.quantizer,
            "source": self.source,
            "mix": None if self.mix is None else {"counts": self.mix.counts, "float_layers": self.mix.float_layers},
            "profile": None if self.profile is None else self.profile.to_dict(),
            "fp32_profile": None if self.fp32_profile is None else self.fp32_profile.to_dict(),
            "profile_error": self.profile_error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`."""
        mix, profile, fp32 = data.get("mix"), data.get("profile"), data.get("fp32_profile")
        return cls(
            requested=str(data["requested"]),
            effective=data.get("effective"),
            quantizer=str(data["quantizer"]),
            source=str(data["source"]),
            mix=None if mix is None else _mix(mix),
            profile=None if profile is None else LayerProfile.from_dict(profile),
            fp32_profile=None if fp32 is None else LayerProfile.from_dict(fp32),
            profile_error=data.get("profile_error"),
        )


def _mix(data: dict[str, Any]) -> LayerMix:
    return LayerMix({str(k): int(v) for k, v in data["counts"].items()}, [str(n) for n in data.get("float_layers", [])])


def why_int8(record: Int8Run, speedup: float | None = None) -> str:
    """One sentence on where an INT8 run's time went, from its profile (against the FP32 twin's when there is
    one); with `speedup` (FP32 P50 / INT8 P50) below 1 it reads as why INT8 lost:
    "INT8 was 4.2x slower: 38% of its time is in 27 Reorder/Convert/quantize nodes (FP32: 3), 2 of 30 compute
    layers stayed in float (11%)". Empty when there is no profile."""
    profile = record.profile
    if profile is None or profile.total_ms <= 0:
        return ""
    head = "INT8"
    if speedup is not None:
        if round(speedup, 1) == 1.0:
            head = f"INT8 ran at FP32's speed ({speedup:.2f}x)"
        else:
            head = f"INT8 was {1 / speedup:.1f}x slower" if speedup < 1 else f"INT8 was {speedup:.1f}x faster"
    overhead = profile.overhead()
    share = overhead.ms / profile.total_ms
    text = f"{head}: {share:.0%} of its time is in {overhead.count} Reorder/Convert/quantize nodes"
    if record.fp32_profile is not None:
        twin = record.fp32_profile.overhead()
        text += f" (FP32: {twin.count}, {twin.ms / max(record.fp32_profile.total_ms, 1e-9):.0%})"
    if profile.float_compute.count:
        total = record.mix.total if record.mix else profile.float_compute.count
        text += (
            f", {profile.float_compute.count} of {total} compute layers stayed in float "
            f"({profile.float_compute.ms / profile.total_ms:.0%} of the time)"
        )
    if profile.top:
        top = profile.top[0]
        text += f"; slowest node {top.name} ({top.layer_type}, {top.precision}, {top.ms / profile.total_ms:.0%})"
    return text
