"""Triton's statistics extension: per-model counts and cumulative durations since the server started, kept as the
batcher and the endpoints observe them, and handed out as Triton's `ModelStatistics` message (gRPC) or its JSON
(HTTP `GET /v2/models/NAME/stats`).

Field meanings follow Triton's `extension_statistics.md`: `success` and `fail` time whole requests (from the
endpoint's start, the HTTP headers or gRPC call already parsed, to its response); `queue` is the wait in the
batcher; `compute_input` / `compute_infer` / `compute_output` are the concatenation of the batch's feeds, the
backend run and the split of its outputs, each counted once per request of the batch (as Triton adds a batch's
durations to every request in it); `inference_count` counts rows, `execution_count` batches; `batch_stats` has
one entry per executed batch size.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infermeter.serve.batcher import BatchStats

if TYPE_CHECKING:
    from tritonclient.grpc import service_pb2


@dataclass
class Duration:
    """Triton's StatisticDuration: how many times, and nanoseconds in all."""

    count: int = 0
    ns: int = 0

    def add(self, seconds: float, times: int = 1) -> None:
        """Add `times` occurrences of `seconds` each."""
        self.count += times
        self.ns += int(seconds * 1e9) * times


@dataclass
class _BatchSize:
    compute_input: Duration
    compute_infer: Duration
    compute_output: Duration


class ModelStats:
    """The cumulative statistics of one served model (thread-safe: batch workers and the event loops update it)."""

    def __init__(self, name: str, version: str = "1") -> None:
        self.name = name
        self.version = version
        self._lock = threading.Lock()
        self.success = Duration()
        self.fail = Duration()
        self.queue = Duration()
        self.compute_input = Duration()
        self.compute_infer = Duration()
        self.compute_output = Duration()
        self.inference_count = 0
        self.execution_count = 0
        self.last_inference_ms = 0
        self._batches: dict[int, _BatchSize] = {}

    def observe_batch(self, stats: BatchStats) -> None:
        """One executed batch (from a worker thread); failed batches count in `fail` through their requests."""
        if stats.failed:
            return
        with self._lock:
            self.execution_count += 1
            self.inference_count += stats.rows
            for seconds in stats.queue_s:
                self.queue.add(seconds)
            self.compute_input.add(stats.input_s, stats.requests)
            self.compute_infer.add(stats.infer_s, stats.requests)
            self.compute_output.add(stats.output_s, stats.requests)
            size = self._batches.setdefault(stats.rows, _BatchSize(Duration(), Duration(), Duration()))
            size.compute_input.add(stats.input_s)
            size.compute_infer.add(stats.infer_s)
            size.compute_output.add(stats.output_s)

    def observe_request(self, ok: bool, seconds: float) -> None:
        """One inference request answered (`ok`) or refused, `seconds` after it was received."""
        with self._lock:
            (self.success if ok else self.fail).add(seconds)
            self.last_inference_ms = int(time.time() * 1000)

    def message(self) -> service_pb2.ModelStatistics:
        """Triton's ModelStatistics message of these figures."""
        from tritonclient.grpc import service_pb2

        def duration(value: Duration) -> service_pb2.StatisticDuration:
            return service_pb2.StatisticDuration(count=value.count, ns=value.ns)

        with self._lock:
            inference = service_pb2.InferStatistics(
                success=duration(self.success),
                fail=duration(self.fail),
                queue=duration(self.queue),
                compute_input=duration(self.compute_input),
                compute_infer=duration(self.compute_infer),
                compute_output=duration(self.compute_output),
                cache_hit=duration(Duration()),
                cache_miss=duration(Duration()),
            )
            batches = [
                service_pb2.InferBatchStatistics(
                    batch_size=rows,
                    compute_input=duration(size.compute_input),
                    compute_infer=duration(size.compute_infer),
                    compute_output=duration(size.compute_output),
                )
                for rows, size in sorted(self._batches.items())
            ]
            return service_pb2.ModelStatistics(
                name=self.name,
                version=self.version,
                last_inference=self.last_inference_ms,
                inference_count=self.inference_count,
                execution_count=self.execution_count,
                inference_stats=inference,
                batch_stats=batches,
            )
