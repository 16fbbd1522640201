"""The results file schema (versioned dataclasses <-> JSON). Later commands read these names; keep them stable.

Fields added by a later version land in `extra` when an older reader loads the file, and are written back
unchanged, so no reader loses another's data.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


def now_iso() -> str:
    """The current UTC time, ISO 8601 at seconds resolution: how results files stamp `created` and `started`."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


STATUSES = ("ok", "failed", "crashed", "timeout", "unavailable")


@dataclass(frozen=True)
class CaseWarning:
    """A reason to doubt a number, with the remedy in the message. `code` is one of stats.WARNING_CODES."""

    code: str
    message: str
    detail: str = ""  # the short fact alone (e.g. "CV 21%"), for grouped displays


@dataclass(frozen=True)
class LatencyStats:
    """Latency statistics in milliseconds over the timed loop (definitions in infermeter.stats)."""

    p50: float
    p90: float
    p95: float
    p99: float
    p999: float
    mean: float
    std: float
    min: float
    max: float
    cv: float
    p50_ci95: tuple[float, float]
    p99_ci95: tuple[float, float]
    outliers: int
    count: int


@dataclass
class CaseResult:
    """Everything measured for one case. Latency fields are None unless `status` is `ok`."""

    id: str
    model: str
    backend: str
    backend_version: str | None
    device: str
    batch: int
    shape_mode: str
    precision: str
    precision_effective: str | None
    threads: int
    status: str
    error: str | None = None
    latency_ms: LatencyStats | None = None
    samples_ms: list[float] = field(default_factory=list)
    iterations: int = 0
    warmup_iterations: int = 0
    throughput: float | None = None
    peak_rss_mb: float | None = None
    rss_before_load_mb: float | None = None
    load_s: float | None = None
    load_phases_s: dict[str, float] = field(default_factory=dict)
    cache_hit: bool | None = None
    process_start_s: float | None = None  # isolated runs: process creation to the start of the case's work
    first_inference_ms: float | None = None
    warmup_ms: list[float] = field(default_factory=list)
    warnings: list[CaseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    isolated: bool = True
    synthetic: bool = False  # from the `null` test backend: its latencies are made up, not measured work
    streams: int = 1
    dynamic: dict[str, list[int]] = field(default_factory=dict)
    per_shape: list[dict[str, Any]] = field(default_factory=list)
    rss_timeline_mb: list[list[float]] = field(default_factory=list)
    started: str | None = None
    duration_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the case ran and has statistics."""
        return self.status == "ok" and self.latency_ms is not None


@dataclass
class ResultsFile:
    """A whole results file: environment plus cases, in the order they ran."""

    created: str
    environment: dict[str, Any]
    cases: list[CaseResult] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)


def _round_list(values: list[float]) -> list[float]:
    # Nanosecond resolution is all the clock gives; more digits only bloat the file.
    return [round(v, 6) for v in values]


def case_to_dict(case: CaseResult) -> dict[str, Any]:
    """JSON-ready dict of a case; `extra` fields are merged back at the top level."""
    data = dataclasses.asdict(case)
    extra = data.pop("extra")
    data["samples_ms"] = _round_list(case.samples_ms)
    data["warmup_ms"] = _round_list(case.warmup_ms)
    if case.latency_ms is not None:
        stats = data["latency_ms"]
        for key in ("p50_ci95", "p99_ci95"):
            stats[key] = list(stats[key])
    data.update(extra)
    return data


def _known_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def case_from_dict(data: dict[str, Any]) -> CaseResult:
    """Inverse of case_to_dict; unknown keys are kept in `extra`."""
    known = _known_fields(CaseResult) - {"extra"}
    kwargs = {k: v for k, v in data.items() if k in known}
    extra = {k: v for k, v in data.items() if k not in known}
    stats = kwargs.get("latency_ms")
    if stats is not None:
        stats = dict(stats)
        for key in ("p50_ci95", "p99_ci95"):
            stats[key] = tuple(stats[key])
        stats.setdefault("outliers", 0)
        stats.setdefault("count", len(kwargs.get("samples_ms", [])))
        kwargs["latency_ms"] = LatencyStats(**{k: v for k, v in stats.items() if k in _known_fields(LatencyStats)})
    kwargs["warnings"] = [CaseWarning(**w) for w in kwargs.get("warnings", [])]
    return CaseResult(**kwargs, extra=extra)


def results_to_dict(results: ResultsFile) -> dict[str, Any]:
    """JSON-ready dict of a results file, `schema_version` first."""
    data: dict[str, Any] = {
        "schema_version": results.schema_version,
        "created": results.created,
        "command": results.command,
        "environment": results.environment,
        "cases": [case_to_dict(c) for c in results.cases],
    }
    data.update(results.extra)
    return data


def results_from_dict(data: dict[str, Any]) -> ResultsFile:
    """Inverse of results_to_dict. The caller checks `schema_version` first (see results.io)."""
    known = {"schema_version", "created", "command", "environment", "cases"}
    return ResultsFile(
        created=data["created"],
        environment=data.get("environment", {}),
        cases=[case_from_dict(c) for c in data.get("cases", [])],
        command=list(data.get("command", [])),
        schema_version=int(data["schema_version"]),
        extra={k: v for k, v in data.items() if k not in known},
    )
