"""The processes record (`bench --repeat N`): each fresh worker process a case ran in, with its own figures
(`processes` field). The case's headline P50 and its interval, its paired speedups and `compare` use the processes
as replicates (`measure.repeat`, `compare_stats.process_replicates`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Self

from infermeter.results.records.base import Record, known_fields
from infermeter.results.schema import CaseResult


@dataclass(frozen=True)
class ProcessRun:
    """One worker process of a repeated case: `index` is its pass over the plan (0 first), `status` the process's
    own (`ok`, or how it ended), its P50 and P99 in ms, `samples` timed iterations, the interleaved rounds it ran
    (0: timed alone), its throughput (inferences/s), its load and first-inference times, its peak memory and when
    it started (ISO)."""

    index: int
    status: str
    _: KW_ONLY  # the rest by keyword
    p50_ms: float | None = None
    p99_ms: float | None = None
    samples: int = 0
    rounds: int = 0
    throughput: float | None = None
    load_s: float | None = None
    first_inference_ms: float | None = None
    peak_rss_mb: float | None = None
    started: str | None = None
    duration_s: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the process measured the case."""
        return self.status == "ok" and self.p50_ms is not None and self.p50_ms > 0

    @classmethod
    def of(cls, result: CaseResult, index: int) -> ProcessRun:
        """The figures of one process's result."""
        stats = result.latency_ms if result.ok else None
        return cls(
            index=index,
            status=result.status,
            p50_ms=None if stats is None else stats.p50,
            p99_ms=None if stats is None else stats.p99,
            samples=result.timing.iterations,
            rounds=len(result.timing.rounds_p50_ms),
            throughput=result.timing.throughput if result.ok else None,
            load_s=result.loading.load_s,
            first_inference_ms=result.loading.first_inference_ms,
            peak_rss_mb=result.memory.peak_rss_mb,
            started=result.started,
            duration_s=result.duration_s,
            error=result.error,
        )


@dataclass(frozen=True)
class ProcessRecord(Record):
    """A case measured in `repeat` fresh processes spread over the run (one per pass over the plan); `runs` are the
    processes done so far, in order (fewer than `repeat` in a file whose run was interrupted: `bench --resume`
    runs the rest)."""

    KEY: ClassVar[str] = "processes"

    repeat: int
    runs: tuple[ProcessRun, ...] = ()

    @property
    def ok_runs(self) -> tuple[ProcessRun, ...]:
        """The processes that measured the case."""
        return tuple(run for run in self.runs if run.ok)

    @property
    def medians_ms(self) -> tuple[float, ...]:
        """The P50 of each process that measured the case: the case's replicates."""
        return tuple(run.p50_ms for run in self.ok_runs if run.p50_ms is not None)

    def to_dict(self) -> dict[str, Any]:
        """The `processes` block."""
        return {"repeat": self.repeat, "runs": [vars(run).copy() for run in self.runs]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`."""
        runs = tuple(ProcessRun(**known_fields(ProcessRun, entry)) for entry in data.get("runs", []))
        return cls(repeat=int(data["repeat"]), runs=runs)


def most_processes(cases: Sequence[CaseResult]) -> int:
    """The most processes that measured any one of `cases` (`bench --repeat`; 0 when none was repeated)."""
    from infermeter.results.records.base import read_record

    counts = [len(record.ok_runs) for case in cases if (record := read_record(case, ProcessRecord)) is not None]
    return max(counts, default=0)
