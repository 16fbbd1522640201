"""The ASGI application: Open Inference Protocol endpoints over a ServedModel and its DynamicBatcher."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from infermeter import __version__
from infermeter.serve.batcher import BatchFailed, DynamicBatcher, QueueFull, ShuttingDown
from infermeter.serve.metrics import ServerMetrics
from infermeter.serve.model import ServedModel, worker_threads
from infermeter.serve.protocol import HEADER_LENGTH, ProtocolError, encode_infer_response, parse_infer_request

log = logging.getLogger("infermeter.serve")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class ServerState:
    """What the endpoints share: the model, its batcher, metrics, and the load outcome."""

    def __init__(self, model: ServedModel, threads: int) -> None:
        self.model = model
        self.threads = threads
        self.metrics = ServerMetrics(model.name, model.config.max_batch)
        self.batcher: DynamicBatcher | None = None
        self.load_error: str | None = None
        self.loaded = threading.Event()
        self.on_load_failed: Callable[[str], None] | None = None

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
                observer=self.metrics.observe_batch,
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

    def close(self) -> None:
        """Finish queued requests, stop the workers, close the sessions."""
        if self.batcher is not None:
            self.batcher.close()
        self.model.close()


def build_app(state: ServerState) -> Starlette:
    """The Starlette app serving `state.model` under its protocol name."""
    model = state.model
    api_key = model.config.api_key
    max_body = int(model.config.max_body_mb * 2**20)
    metrics = state.metrics
    name = model.name

    def unauthorized(request: Request) -> JSONResponse | None:
        if not api_key:
            return None
        given = request.headers.get("x-api-key") or ""
        auth = request.headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        if hmac.compare_digest(given.encode(), api_key.encode()):
            return None
        return _error(401, "missing or wrong API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'")

    def model_or_404(request: Request) -> JSONResponse | None:
        requested = request.path_params["name"]
        if requested != name:
            return _error(404, f"unknown model {requested!r}; this server serves {name!r}")
        return None

    async def live(request: Request) -> Response:
        return JSONResponse({"live": True})

    async def ready(request: Request) -> Response:
        if model.ready and state.batcher is not None:
            return JSONResponse({"ready": True})
        return JSONResponse({"ready": False, "error": state.load_error}, status_code=503)

    async def server_metadata(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        return JSONResponse(
            {"name": "infermeter", "version": __version__, "extensions": ["binary_tensor_data"], "models": [name]}
        )

    async def model_metadata(request: Request) -> Response:
        if (denied := unauthorized(request) or model_or_404(request)) is not None:
            return denied
        return JSONResponse(model.metadata())

    async def model_ready(request: Request) -> Response:
        if (denied := unauthorized(request) or model_or_404(request)) is not None:
            return denied
        return await ready(request)

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body:
            raise ProtocolError(413, f"request body of {int(declared)} bytes exceeds the limit of {max_body} bytes")
        chunks = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise ProtocolError(413, f"request body exceeds the limit of {max_body} bytes (--max-body-mb)")
            chunks.append(chunk)
        return b"".join(chunks)

    async def infer(request: Request) -> Response:
        started = time.perf_counter()
        metrics.inflight.labels(name).inc()
        try:
            response = await _infer(request)
        finally:
            metrics.inflight.labels(name).dec()
        metrics.request_seconds.labels(name).observe(time.perf_counter() - started)
        metrics.requests.labels(name, str(response.status_code)).inc()
        return response

    async def _infer(request: Request) -> Response:
        if (denied := unauthorized(request) or model_or_404(request)) is not None:
            return denied
        batcher = state.batcher
        if not model.ready or batcher is None:
            metrics.rejected.labels(name, "not_ready").inc()
            return _error(503, f"model {name!r} is not ready (loading or failed: {state.load_error or 'loading'})")
        try:
            body = await read_body(request)
            parsed = parse_infer_request(body, request.headers.get(HEADER_LENGTH))
            prepared = model.validate(parsed.inputs)
            output_names = model.output_names(len(model.output_meta) or len(model.spec.output_names))
            unknown = sorted(set(parsed.outputs) - set(output_names))
            if unknown:
                raise ProtocolError(
                    400, f"unknown output(s) {', '.join(unknown)}; the model's outputs are {', '.join(output_names)}"
                )
        except ProtocolError as exc:
            return _error(exc.status, exc.message)
        try:
            metrics.queue_depth.labels(name).set(batcher.queued)
            outputs = await batcher.infer(prepared.feeds, prepared.rows, prepared.signature)
        except QueueFull as exc:
            metrics.rejected.labels(name, "queue_full").inc()
            return _error(503, str(exc))
        except ShuttingDown as exc:
            metrics.rejected.labels(name, "shutting_down").inc()
            return _error(503, str(exc))
        except BatchFailed as exc:
            return _error(500, f"inference failed in the backend: {exc}")
        outputs = model.unpad(outputs, prepared)
        names = model.output_names(len(outputs))
        chosen = {n: o for n, o in zip(names, outputs, strict=True) if not parsed.outputs or n in parsed.outputs}
        binary = {n: parsed.outputs.get(n, parsed.binary_default) for n in chosen}
        payload, headers = encode_infer_response(name, chosen, binary, parsed.request_id)
        media_type = headers.pop("content-type")
        return Response(payload, media_type=media_type, headers=headers)

    async def prometheus(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        if state.batcher is not None:
            metrics.queue_depth.labels(name).set(state.batcher.queued)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loader = threading.Thread(target=state.load, name="infermeter-load", daemon=True)
        loader.start()
        try:
            yield
        finally:
            # Uvicorn has already waited for open requests; anything still queued finishes here.
            await asyncio.to_thread(loader.join)
            await asyncio.to_thread(state.close)

    routes = [
        Route("/v2/health/live", live),
        Route("/v2/health/ready", ready),
        Route("/v2", server_metadata),
        Route("/v2/models/{name}", model_metadata),
        Route("/v2/models/{name}/versions/{version}", model_metadata),
        Route("/v2/models/{name}/ready", model_ready),
        Route("/v2/models/{name}/versions/{version}/ready", model_ready),
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]),
        Route("/metrics", prometheus),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={ProtocolError: _protocol_handler})


async def _protocol_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProtocolError)
    return _error(exc.status, exc.message)
