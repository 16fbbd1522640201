"""The load records (`infermeter load`, `tune-batching`): one load-generator run against a server, judged
against its SLO (`load` field), and, for `tune-batching`, the batching policy a point was measured with
(`tune` field). `deploy --load` reads both."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from infermeter.results.records.base import Record


@dataclass(frozen=True)
class LoadRecord(Record):
    """A load run: its scenario (`server`, `single-stream`, `offline`), the rate it was offered and achieved,
    requests issued / ok / failed by kind, and VALID (`valid`) or INVALID with `reasons`. `lag_*` is the load
    generator's own lateness against its schedule (trusted under 1 ms at P99); `goodput_qps` the requests per second
    answered within `slo_latency_ms` (`load.slo`)."""

    KEY: ClassVar[str] = "load"

    target: str
    scenario: str
    _: KW_ONLY  # the rest by keyword
    target_qps: float | None
    offered_qps: float
    achieved_qps: float
    concurrency: int | None
    duration_s: float
    issued: int
    ok: int
    errors: dict[str, int]
    slo_p99_ms: float | None
    valid: bool
    reasons: list[str] = field(default_factory=list)
    lag_p99_ms: float | None = None
    lag_max_ms: float | None = None
    slo_latency_ms: float | None = None  # --slo latency_ms: the goodput bound
    slo_met: int | None = None  # requests answered within it
    goodput_qps: float | None = None  # those per second, over the run's wall time
    server_batches: dict[str, int] | None = None  # the server's statistics: batches it formed, by size
    server_queue_mean_ms: float | None = None  # and the mean wait of a request in its queue


@dataclass(frozen=True)
class TunePoint(Record):
    """A `tune-batching` point: the server's batching policy (`policy`, its label) and whether this point is the
    one the tuner picked (`pick`). The pick's point also says what it was raced against on paired rounds
    (`runner_up`, a policy label) and the sequential decision's record (`race`, `compare.decision.Decision`'s
    JSON form), when that race ran (`load.tune_race`)."""

    KEY: ClassVar[str] = "tune"

    policy: str
    pick: bool = False
    runner_up: str | None = None
    race: dict[str, Any] | None = None
