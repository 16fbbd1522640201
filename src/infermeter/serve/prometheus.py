"""Prometheus metrics of one server (its own registry: no process-global state, several servers per process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from infermeter.serve.batcher import BatchStats

# Seconds: from 100 µs (an immediate answer) to 10 s (a deeply overloaded queue).
_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class ServerMetrics:
    """Request latency, queue time, compute time, batch sizes, in-flight and rejected requests."""

    def __init__(self, model_name: str, max_batch: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name = model_name
        labels = ["model"]
        self.request_seconds = Histogram(
            "infermeter_request_duration_seconds",
            "Time from receiving an inference request to sending its response.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue_seconds = Histogram(
            "infermeter_queue_duration_seconds",
            "Time a request waited in the batcher queue before its batch started.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.compute_seconds = Histogram(
            "infermeter_compute_duration_seconds",
            "Time one batch took in the backend (concatenate, run, split).",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        sizes = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, max_batch})
        self.batch_size = Histogram(
            "infermeter_batch_size",
            "Rows per executed batch.",
            labels,
            buckets=[float(s) for s in sizes],
            registry=self.registry,
        )
        self.requests = Counter(
            "infermeter_requests",
            "Inference requests answered, by HTTP status code.",
            [*labels, "code"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "infermeter_rejected_requests",
            "Inference requests refused before queueing, by reason (queue_full, shutting_down, not_ready).",
            [*labels, "reason"],
            registry=self.registry,
        )
        self.batch_failures = Counter(
            "infermeter_batch_failures",
            "Batches whose backend run raised an error (their requests got HTTP 500).",
            labels,
            registry=self.registry,
        )
        self.inflight = Gauge(
            "infermeter_inflight_requests",
            "Inference requests received and not yet answered.",
            labels,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "infermeter_queue_depth", "Requests waiting in the batcher queue.", labels, registry=self.registry
        )

    def observe_batch(self, stats: BatchStats) -> None:
        """Record one executed batch (called from a worker thread; prometheus_client is thread-safe)."""
        model = self.model_name
        self.batch_size.labels(model).observe(stats.rows)
        self.compute_seconds.labels(model).observe(stats.compute_s)
        queue = self.queue_seconds.labels(model)
        for seconds in stats.queue_s:
            queue.observe(seconds)
        if stats.failed:
            self.batch_failures.labels(model).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
