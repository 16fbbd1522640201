"""The soak records (`bench --soak N`): memory over a long stream of variable-shape requests (`soak` field), and
what a case would ship and spend (`footprint` field: disk size of what it loads and of the engine's runtime, energy
per inference where the machine exposes it)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import ClassVar

from infermeter.results.records.base import Record


@dataclass(frozen=True)
class SoakRecord(Record):
    """One case's soak. Requests run in phases: `warmup_requests`, then `exploration_requests` (until every size or
    bucket of the range has been fed once), then `replay_requests` (the exploration's sequence again, cyclically).
    `samples` are `[request, t_s, rss_mb, uss_mb]` rows (thinned); the growth slope (MB per 1,000 requests) and its
    95% interval are fitted over the replay, so compiling or caching new shapes is not called a leak. `plateau_at`
    is the request after which memory never rose more than `tolerance_mb` above its level there (None: no plateau).
    `windows` are latency percentiles per stretch of requests: `[first, last, p50_ms, p99_ms]`."""

    KEY: ClassVar[str] = "soak"

    requests: int
    warmup_requests: int
    _: KW_ONLY  # the rest by keyword
    exploration_requests: int
    replay_requests: int
    distinct_shapes: int
    lengths: str
    stopped_by: str
    samples: list[list[float]]
    slope_mb_per_1k: float | None
    slope_ci_mb_per_1k: list[float] | None
    growing: bool
    plateau_at: int | None
    tolerance_mb: float
    peak_rss_mb: float
    start_rss_mb: float
    end_rss_mb: float
    windows: list[list[float]]
    allocator: str = "glibc"
    size_range: dict[str, list[int]] = field(default_factory=dict)  # per --dynamic dim: [smallest, largest]
    buckets: dict[str, list[int]] = field(default_factory=dict)
    recycle_after: int = 0  # --soak-recycle: the session was reloaded every this many requests
    heap: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The distinct input sizes the stream asked for, and the distinct shapes the engine ran once `--buckets` padded
    # them (what a shape-specializing engine compiles and caches); `distinct_shapes` (kept for old readers) is the
    # first. None in files written before they were told apart.
    requested_shapes: int | None = None
    padded_shapes: int | None = None

    @property
    def replay_growth_mb(self) -> float | None:
        """The fitted growth over the whole replay (slope times its length), None without a fit."""
        if self.slope_mb_per_1k is None:
            return None
        return self.slope_mb_per_1k * self.replay_requests / 1000


@dataclass(frozen=True)
class Footprint(Record):
    """What a case ships and spends: `model_mb` (the model file or the built artifact the engine loads),
    `runtime_mb` (the engine's installed distributions on disk, with their names), and `energy_mj_per_inference`
    from the kernel's RAPL powercap counters, or `energy_reason` why there is none."""

    KEY: ClassVar[str] = "footprint"

    model_mb: float | None
    model_path: str | None
    runtime_mb: float | None
    runtime_packages: list[str] = field(default_factory=list)
    energy_mj_per_inference: float | None = None
    energy_reason: str | None = None
