"""The results file schema (versioned dataclasses <-> JSON). Later commands read these names; keep them stable.

A case's identity and outcome are flat; its measurements are grouped (`timing`, `memory`, `loading`, `shapes`).
Version-1 files, with those fields flat on the case, are read into the groups and written as the current version.
Fields added by a later version land in `extra` when an older reader loads the file, and are written back
unchanged (a group's inside its group), so no reader loses another's data.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from infermeter.core.case import DataSource
from infermeter.results.artifact import Artifact

# 2: the measurements by group (`timing`, `memory`, `loading`, `shapes`); version 1 had them flat on the case.
SCHEMA_VERSION = 2


def now_iso() -> str:
    """The current UTC time, ISO 8601 at seconds resolution: how results files stamp `created` and `started`."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# `lost`: the case's node died under it, twice (`bench --cluster`; the node record says where and why).
# `oom`: stopped by its --memory-limit (measure.memlimit), with the peak it reached.
# `build_invalid`: its built artifact (a quantized graph, an IR, a compiled model) failed a check before timing
# (`build.validate`).
# `short_outputs`: an LLM serving level whose responses came back shorter than asked (`llm.short_outputs`).
STATUSES = ("ok", "failed", "crashed", "timeout", "unavailable", "lost", "oom", "build_invalid", "short_outputs")


@dataclass(frozen=True)
class CaseWarning:
    """A reason to doubt a number, with the remedy in the message. `code` is one of stats.WARNING_CODES."""

    code: str
    message: str
    detail: str = ""  # the short fact alone (e.g. "CV 21%"), for grouped displays


@dataclass(frozen=True)
class LatencyStats:
    """Latency statistics in milliseconds over the timed loop (definitions in infermeter.figures.latency_stats)."""

    p50: float
    p90: float
    _: KW_ONLY  # the rest by keyword
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


@dataclass(frozen=True)
class Interference:
    """Other work during a case's timed loop (measured by `infermeter.machine.interference`), over `wall_s`
    seconds on `cpus` usable CPUs: other processes' CPU seconds, steal seconds and PSI `some` stall seconds."""

    wall_s: float
    cpus: float
    own_cpu_s: float
    other_cpu_s: float
    steal_s: float
    pressure_s: float | None

    @property
    def other_share(self) -> float:
        """Other processes' CPU time plus steal, over the CPU time available (wall × cpus)."""
        available = self.wall_s * self.cpus
        return (self.other_cpu_s + self.steal_s) / available if available > 0 else 0.0

    @property
    def pressure_share(self) -> float | None:
        """Fraction of wall time some runnable task waited for a CPU (PSI `some`); None without PSI."""
        if self.pressure_s is None or self.wall_s <= 0:
            return None
        return self.pressure_s / self.wall_s

    def __add__(self, other: Interference) -> Interference:
        pressure = None if self.pressure_s is None or other.pressure_s is None else self.pressure_s + other.pressure_s
        return Interference(
            self.wall_s + other.wall_s,
            max(self.cpus, other.cpus),
            self.own_cpu_s + other.own_cpu_s,
            self.other_cpu_s + other.other_cpu_s,
            self.steal_s + other.steal_s,
            pressure,
        )


NO_INTERFERENCE = Interference(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class PairedSpeedup:
    """A speedup from interleaved rounds: per round, the baseline's median over this case's median; `ratio` is
    their geometric mean and (`ci_low`, `ci_high`) its 95% Student-t interval over `rounds` rounds."""

    baseline_id: str
    ratio: float
    ci_low: float
    ci_high: float
    rounds: int

    @property
    def no_difference(self) -> bool:
        """True when the interval contains 1.0: no difference can be claimed."""
        return self.ci_low <= 1.0 <= self.ci_high


@dataclass
class TimingFigures:
    """The timed loop: every sample and the warm-up apart (ms), throughput, and how the loop was judged: the
    stop rule's target, the medians of interleaved rounds, the paired speedup over them, other work meanwhile."""

    samples_ms: list[float] = field(default_factory=list)  # every timed iteration, in order
    warmup_ms: list[float] = field(default_factory=list)
    _: KW_ONLY  # the rest by keyword
    iterations: int = 0
    warmup_iterations: int = 0
    throughput: float | None = None  # samples (not batches) per second
    rounds_p50_ms: list[float] = field(default_factory=list)  # interleaved runs: the case's median per round
    target_ci: float | None = None  # the stop rule's target for the P50 interval's half-width (a fraction)
    interference: Interference | None = None
    paired: PairedSpeedup | None = None


@dataclass
class MemoryFigures:
    """The worker's resident memory: its high-water mark, before loading, and through the timed loop."""

    peak_rss_mb: float | None = None
    rss_before_load_mb: float | None = None
    rss_timeline_mb: list[list[float]] = field(default_factory=list)  # [t_s, rss_mb] rows


@dataclass
class LoadingFigures:
    """Loading the model until it is ready to run (not the serving load of `infermeter load`)."""

    load_s: float | None = None
    load_phases_s: dict[str, float] = field(default_factory=dict)
    cache_hit: bool | None = None
    build: Artifact | None = None  # the artifact the case loaded (case_build): cache state, build phases
    process_start_s: float | None = None  # isolated runs: process creation to the start of the case's work
    first_inference_ms: float | None = None


@dataclass
class ShapeFigures:
    """The shapes fed: each input's shape, the dynamic sizes drawn from, and the statistics per fed shape."""

    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    dynamic: dict[str, list[int]] = field(default_factory=dict)
    per_shape: list[dict[str, Any]] = field(default_factory=list)


# The measurement groups of a case, by their key in the JSON (version 1 had their fields flat on the case).
GROUPS: dict[str, type] = {
    "timing": TimingFigures,
    "memory": MemoryFigures,
    "loading": LoadingFigures,
    "shapes": ShapeFigures,
}


@dataclass
class CaseResult:
    """Everything measured for one case: identity and outcome flat, the measurements by group. Latency
    statistics are None unless `status` is `ok`."""

    id: str
    model: str
    _: KW_ONLY  # the rest by keyword
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
    timing: TimingFigures = field(default_factory=TimingFigures)
    memory: MemoryFigures = field(default_factory=MemoryFigures)
    loading: LoadingFigures = field(default_factory=LoadingFigures)
    shapes: ShapeFigures = field(default_factory=ShapeFigures)
    warnings: list[CaseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    isolated: bool = True
    synthetic: bool = False  # from the `null` test backend: its latencies are made up, not measured work
    streams: int = 1
    started: str | None = None
    duration_s: float | None = None
    # Real inputs (`--data`) and constant inputs (`--input NAME=VALUE`): part of the comparison group. Written only
    # when set, so a file without them reads (and is written) as before.
    data: DataSource | None = None
    input_values: dict[str, str] = field(default_factory=dict)
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
    """JSON-ready dict of a case, its measurements nested by group; `extra` fields are merged back where they were
    read: at the top level, or inside their group."""
    data = dataclasses.asdict(case)
    extra = data.pop("extra")
    timing = data["timing"]
    timing["samples_ms"] = _round_list(case.timing.samples_ms)
    timing["warmup_ms"] = _round_list(case.timing.warmup_ms)
    if case.latency_ms is not None:
        stats = data["latency_ms"]
        for key in ("p50_ci95", "p99_ci95"):
            stats[key] = list(stats[key])
    if case.loading.build is not None:
        data["loading"]["build"] = case.loading.build.to_dict()
    for name in ("data", "input_values"):
        if not data[name]:
            del data[name]
    interference = case.timing.interference
    if interference is not None:  # the derived shares too, for readers of the JSON
        timing["interference"]["other_share"] = round(interference.other_share, 4)
        pressure = interference.pressure_share
        timing["interference"]["pressure_share"] = None if pressure is None else round(pressure, 4)
    for key, value in extra.items():
        if key in GROUPS and isinstance(value, dict):  # a later version's fields of a group
            data[key].update({k: v for k, v in value.items() if k not in data[key]})
        else:
            data[key] = value
    return data


def _known_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _flat_to_groups(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 case (its measurements flat on the case) in the current layout."""
    data = dict(data)
    for key, record in GROUPS.items():
        data[key] = {name: data.pop(name) for name in _known_fields(record) if name in data}
    return data


def _group(key: str, values: dict[str, Any], extra: dict[str, Any]) -> Any:
    """One measurement group from its JSON; fields it does not know are kept in `extra[key]`."""
    record = GROUPS[key]
    known = _known_fields(record)
    if unknown := {k: v for k, v in values.items() if k not in known}:
        extra[key] = unknown
    kwargs = {k: v for k, v in values.items() if k in known}
    for name, nested in (("interference", Interference), ("paired", PairedSpeedup)):
        if kwargs.get(name) is not None:
            kwargs[name] = nested(**{k: v for k, v in kwargs[name].items() if k in _known_fields(nested)})
    if kwargs.get("build") is not None:
        kwargs["build"] = Artifact.from_dict(kwargs["build"])
    return record(**kwargs)


def case_from_dict(data: dict[str, Any], version: int = SCHEMA_VERSION) -> CaseResult:
    """Inverse of case_to_dict; a case of results file version 1 (its measurements flat) is read into the
    groups. Unknown keys are kept in `extra`, and written back by case_to_dict."""
    if version < 2:
        data = _flat_to_groups(data)
    known = _known_fields(CaseResult) - {"extra"}
    kwargs = {k: v for k, v in data.items() if k in known}
    extra = {k: v for k, v in data.items() if k not in known}
    for key in GROUPS:
        kwargs[key] = _group(key, dict(kwargs.get(key) or {}), extra)
    stats = kwargs.get("latency_ms")
    if stats is not None:
        stats = dict(stats)
        for key in ("p50_ci95", "p99_ci95"):
            stats[key] = tuple(stats[key])
        stats.setdefault("outliers", 0)
        stats.setdefault("count", len(kwargs["timing"].samples_ms))
        kwargs["latency_ms"] = LatencyStats(**{k: v for k, v in stats.items() if k in _known_fields(LatencyStats)})
    kwargs["warnings"] = [CaseWarning(**w) for w in kwargs.get("warnings", [])]
    if kwargs.get("data") is not None:
        kwargs["data"] = DataSource(**{k: v for k, v in kwargs["data"].items() if k in _known_fields(DataSource)})
    kwargs["input_values"] = {str(k): str(v) for k, v in (kwargs.get("input_values") or {}).items()}
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
    """Inverse of results_to_dict, for any version up to SCHEMA_VERSION (the caller checks, see results.io); the
    result is in the current layout, and is written as the current version."""
    known = {"schema_version", "created", "command", "environment", "cases"}
    version = int(data["schema_version"])
    return ResultsFile(
        created=data["created"],
        environment=data.get("environment", {}),
        cases=[case_from_dict(c, version) for c in data.get("cases", [])],
        command=list(data.get("command", [])),
        extra={k: v for k, v in data.items() if k not in known},
    )
