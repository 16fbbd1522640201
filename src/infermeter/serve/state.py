"""What the HTTP and gRPC endpoints share: the served model, its dynamic batcher, the Prometheus metrics and
Triton's statistics, and the one inference path both protocols call."""

from __future__ import annotations

import contextlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.serve.batcher import BatchFailed, BatchStats, DynamicBatcher, QueueFull, ShuttingDown
from infermeter.serve.model import ServedModel, worker_threads
from infermeter.serve.prometheus import ServerMetrics
from infermeter.serve.protocol import ProtocolError
from infermeter.serve.triton_statistics import ModelStats

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2

log = logging.getLogger("infermeter.serve")


@dataclass
class Outcome:
    """The status an inference request ended with (HTTP's code; gRPC answers map to the same codes)."""

    status: int = 200


class ServerState:
    """The model, its batcher, metrics and statistics, and the load outcome."""

    def __init__(self, model: ServedModel, threads: int) -> None:
        self.model = model
        self.threads = threads
        self.metrics = ServerMetrics(model.name, model.config.max_batch)
        self.stats = ModelStats(model.name)
        self.batcher: DynamicBatcher | None = None
        self.load_error: str | None = None
        self.loaded = threading.Event()
        self.on_load_failed: Callable[[str], None] | None = None
        # Stopped before the batcher closes, so that its accepted requests are answered too (the gRPC server).
        self.on_close: list[Callable[[], None]] = []
        self._config: model_config_pb2.ModelConfig | None = None

    @property
    def name(self) -> str:
        """The model's protocol name."""
        return self.model.name

    @property
    def ready(self) -> bool:
        """Loaded, warmed up and batching."""
        return self.model.ready and self.batcher is not None

    def load(self) -> None:
        """Load, warm up and start the batcher (runs in a thread so that liveness answers meanwhile)."""
        model = self.model
        try:
            model.load(worker_threads(self.threads, model.config.workers))
            self.batcher = DynamicBatcher(
                self._run_batch,
                model.config.max_batch,
                model.config.max_delay_ms,
                model.config.max_queue,
                model.config.workers,
                observer=self._observe_batch,
                unbatched=frozenset(spec.name for spec in model.spec.inputs) - model.batched,
            )
            for error in model.warmup_errors[:1]:
                log.warning("warm-up with generated inputs failed (%s); serving anyway", error)
            log.info("model %s ready (backend %s, load %.2f s)", model.name, model.config.backend, model.load_s or 0)
        except Exception as exc:
            self.load_error = (
                f"{type(exc).__name__}: {exc}" if not str(exc).startswith(type(exc).__name__) else str(exc)
            )
            model.ready = False
            log.error("loading %s failed: %s", model.config.model, self.load_error)
            if self.on_load_failed is not None:
                self.on_load_failed(self.load_error)
        finally:
            self.loaded.set()

    def _run_batch(self, worker: int, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        outputs = self.model.run(self.model.sessions[worker], feeds)
        if self.model.count_and_recycle(worker, worker_threads(self.threads, self.model.config.workers)):
            log.info("worker %d recycled its session (%d recycles so far)", worker, self.model.recycles)
        return outputs

    def _observe_batch(self, stats: BatchStats) -> None:
        self.metrics.observe_batch(stats)
        self.stats.observe_batch(stats)

    def model_state(self) -> tuple[str, str]:
        """Triton's model state and its reason: READY, LOADING or UNAVAILABLE (load failed)."""
        if self.ready:
            return "READY", ""
        if self.load_error:
            return "UNAVAILABLE", self.load_error
        return "LOADING", "loading and warming up"

    def model_config(self) -> model_config_pb2.ModelConfig:
        """Triton's ModelConfig: the repository's config.pbtxt, else the equivalent of the served model."""
        from infermeter.serve.triton import derived_config, read_config

        given = self.model.config.triton_config
        if not given:
            return derived_config(self.model)  # cheap, and its outputs are known only after the warm-up
        if self._config is None:
            self._config = read_config(Path(given))
        return self._config

    def check_key(self, x_api_key: str | None, authorization: str | None) -> None:
        """ProtocolError(401) unless the request carries the server's API key (when it has one), as
        `X-API-Key: KEY` or `Authorization: Bearer KEY` (HTTP headers, gRPC metadata)."""
        api_key = self.model.config.api_key
        if not api_key:
            return
        given = x_api_key or ""
        auth = authorization or ""
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        if not hmac.compare_digest(given.encode(), api_key.encode()):
            raise ProtocolError(
                401, "missing or wrong API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
            )

    def check_model(self, requested: str) -> None:
        """ProtocolError(404) unless `requested` is the served model's name."""
        if requested != self.name:
            raise ProtocolError(404, f"unknown model {requested!r}; this server serves {self.name!r}")

    @contextlib.contextmanager
    def tracked(self) -> Iterator[Outcome]:
        """Time one inference request into the metrics and statistics; a ProtocolError sets its status."""
        metrics, name = self.metrics, self.name
        started = time.perf_counter()
        outcome = Outcome()
        metrics.inflight.labels(name).inc()
        try:
            yield outcome
        except ProtocolError as exc:
            outcome.status = exc.status
            raise
        except BaseException:
            outcome.status = 500
            raise
        finally:
            seconds = time.perf_counter() - started
            metrics.inflight.labels(name).dec()
            metrics.request_seconds.labels(name).observe(seconds)
            metrics.requests.labels(name, str(outcome.status)).inc()
            if outcome.status not in (401, 404):  # refused before reaching this model
                self.stats.observe_request(outcome.status == 200, seconds)

    async def infer(self, inputs: dict[str, np.ndarray], wanted: dict[str, Any]) -> dict[str, np.ndarray]:
        """Validate, batch and run one request; its outputs by name (all of them when `wanted` is empty, else the
        ones it names). ProtocolError says why a request is refused (HTTP status; gRPC maps it)."""
        metrics, name, model = self.metrics, self.name, self.model
        batcher = self.batcher
        if not model.ready or batcher is None:
            metrics.rejected.labels(name, "not_ready").inc()
            raise ProtocolError(503, f"model {name!r} is not ready (loading or failed: {self.load_error or 'loading'})")
        prepared = model.validate(inputs)
        output_names = model.output_names(len(model.output_meta) or len(model.spec.output_names))
        unknown = sorted(set(wanted) - set(output_names))
        if unknown:
            raise ProtocolError(
                400, f"unknown output(s) {', '.join(unknown)}; the model's outputs are {', '.join(output_names)}"
            )
        try:
            metrics.queue_depth.labels(name).set(batcher.queued)
            outputs = await batcher.infer(prepared.feeds, prepared.rows, prepared.signature)
        except QueueFull as exc:
            metrics.rejected.labels(name, "queue_full").inc()
            raise ProtocolError(503, str(exc)) from None
        except ShuttingDown as exc:
            metrics.rejected.labels(name, "shutting_down").inc()
            raise ProtocolError(503, str(exc)) from None
        except BatchFailed as exc:
            raise ProtocolError(500, f"inference failed in the backend: {exc}") from None
        outputs = model.unpad(outputs, prepared)
        names = model.output_names(len(outputs))
        return {n: o for n, o in zip(names, outputs, strict=True) if not wanted or n in wanted}

    def close(self) -> None:
        """Stop the other listeners, finish queued requests, stop the workers, close the sessions."""
        for stop in self.on_close:
            stop()
        if self.batcher is not None:
            self.batcher.close()
        self.model.close()
