"""The serving-sweep records (`llm load`): where one level sits in its sweep (`ServingLevel`) and the
server's own state sampled from its metrics endpoint while that level ran (`ServerMetrics`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Self

from infermeter.results.records.base import Record, known_fields

# The two kinds of sweep: closed-loop clients (`concurrency`) or open-loop Poisson arrivals (`rate`, requests/s).
SWEEP_MODES = ("concurrency", "rate")


@dataclass(frozen=True)
class ServingLevel(Record):
    """One level of a serving sweep. `series` names the sweep (the engine and its settings; the URL by default),
    `level` is the concurrency or the request rate per second. `slo_attainment` is the fraction of the level's
    requests, failures included, that met the SLO (None when no SLO was set); the SLO holds at the level when it
    is at least `slo_target`. `failure` is the level's one-line reason when requests failed."""

    KEY: ClassVar[str] = "serving"

    series: str
    mode: str
    level: float
    slo_attainment: float | None = None
    slo_target: float = 0.9
    failure: str | None = None

    @property
    def slo_held(self) -> bool | None:
        """Whether the SLO held at this level (None without an SLO)."""
        return None if self.slo_attainment is None else self.slo_attainment >= self.slo_target


@dataclass(frozen=True)
class ServerSample:
    """The server's metrics at one moment: `t_s` seconds since the sweep started, one value per metric name
    (summed over label sets)."""

    t_s: float
    values: dict[str, float]


@dataclass(frozen=True)
class ServerMetrics(Record):
    """The server's own state while a level ran, read from `sources` (its Prometheus `/metrics`, llama.cpp's
    `/slots`) every `interval_s`; `unavailable` says, once per source, why a source gave nothing."""

    KEY: ClassVar[str] = "server_metrics"

    sources: tuple[str, ...]
    interval_s: float
    samples: tuple[ServerSample, ...]
    unavailable: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (tuples as lists)."""
        data = asdict(self)
        data["samples"] = [{"t_s": s.t_s, "values": dict(s.values)} for s in self.samples]
        data["sources"] = list(self.sources)
        data["unavailable"] = list(self.unavailable)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`."""
        values = known_fields(cls, data)
        values["samples"] = tuple(
            ServerSample(float(s["t_s"]), {str(k): float(v) for k, v in s["values"].items()})
            for s in values.get("samples") or []
        )
        values["sources"] = tuple(values.get("sources") or ())
        values["unavailable"] = tuple(values.get("unavailable") or ())
        return cls(**values)

    def names(self) -> list[str]:
        """Every metric name seen in any sample, sorted."""
        return sorted({name for sample in self.samples for name in sample.values})
