"""The ASGI application: Open Inference Protocol endpoints over a ServedModel and its DynamicBatcher."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from infermeter import __version__
from infermeter.serve.protocol import HEADER_LENGTH, ProtocolError, encode_infer_response, parse_infer_request
from infermeter.serve.state import ServerState
from infermeter.serve.triton import message_json, repository_index

__all__ = ["EXTENSIONS", "ServerState", "build_app"]

# The protocol extensions this server implements (server metadata lists them, as Triton's does).
EXTENSIONS = ["binary_tensor_data", "model_configuration", "model_repository", "statistics"]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def build_app(state: ServerState) -> Starlette:
    """The Starlette app serving `state.model` under its protocol name."""
    model = state.model
    max_body = int(model.config.max_body_mb * 2**20)
    metrics = state.metrics
    name = model.name

    def unauthorized(request: Request) -> JSONResponse | None:
        try:
            state.check_key(request.headers.get("x-api-key"), request.headers.get("authorization"))
        except ProtocolError as exc:
            return _error(exc.status, exc.message)
        return None

    def model_or_404(request: Request) -> JSONResponse | None:
        try:
            state.check_model(request.path_params["name"])
        except ProtocolError as exc:
            return _error(exc.status, exc.message)
        return None

    async def live(request: Request) -> Response:
        return JSONResponse({"live": True})

    async def ready(request: Request) -> Response:
        if state.ready:
            return JSONResponse({"ready": True})
        return JSONResponse({"ready": False, "error": state.load_error}, status_code=503)

    async def server_metadata(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        return JSONResponse({"name": "infermeter", "version": __version__, "extensions": EXTENSIONS, "models": [name]})

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
        try:
            with state.tracked():
                state.check_key(request.headers.get("x-api-key"), request.headers.get("authorization"))
                state.check_model(request.path_params["name"])
                body = await read_body(request)
                parsed = parse_infer_request(body, request.headers.get(HEADER_LENGTH))
                chosen = await state.infer(parsed.inputs, parsed.outputs)
        except ProtocolError as exc:
            return _error(exc.status, exc.message)
        binary = {n: parsed.outputs.get(n, parsed.binary_default) for n in chosen}
        payload, headers = encode_infer_response(name, chosen, binary, parsed.request_id)
        media_type = headers.pop("content-type")
        return Response(payload, media_type=media_type, headers=headers)

    async def model_config(request: Request) -> Response:
        if (denied := unauthorized(request) or model_or_404(request)) is not None:
            return denied
        return JSONResponse(message_json(state.model_config()))

    async def model_stats(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        requested = request.path_params.get("name")
        if requested is not None and (denied := model_or_404(request)) is not None:
            return denied
        return JSONResponse({"model_stats": [message_json(state.stats.message())]})

    async def index(request: Request) -> Response:
        if (denied := unauthorized(request)) is not None:
            return denied
        ready_only = False
        body = await request.body()
        if body.strip():
            try:
                document = json.loads(body)
            except ValueError:
                return _error(400, 'the repository index request body must be JSON, e.g. {"ready": true}')
            ready_only = isinstance(document, dict) and bool(document.get("ready"))
        model_state, reason = state.model_state()
        models = repository_index(name, model_state, reason, model.config.repository)
        listed = [message_json(m) for m in models if not ready_only or m.state == "READY"]
        # Triton leaves out empty fields here: a model that is not loaded has no version.
        return JSONResponse([{k: v for k, v in entry.items() if v} for entry in listed])

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
        Route("/v2/models/stats", model_stats),
        Route("/v2/models/{name}", model_metadata),
        Route("/v2/models/{name}/versions/{version}", model_metadata),
        Route("/v2/models/{name}/ready", model_ready),
        Route("/v2/models/{name}/versions/{version}/ready", model_ready),
        Route("/v2/models/{name}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", infer, methods=["POST"]),
        Route("/v2/models/{name}/config", model_config),
        Route("/v2/models/{name}/versions/{version}/config", model_config),
        Route("/v2/models/{name}/stats", model_stats),
        Route("/v2/models/{name}/versions/{version}/stats", model_stats),
        Route("/v2/repository/index", index, methods=["POST"]),
        Route("/metrics", prometheus),
    ]
    handlers = {ProtocolError: _protocol_handler, HTTPException: _http_handler}
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)


async def _protocol_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProtocolError)
    return _error(exc.status, exc.message)


async def _http_handler(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, wrong method) in Triton's error shape too."""
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": f"{exc.detail}: {request.method} {request.url.path}"}, status_code=exc.status_code,
                        headers=exc.headers)  # fmt: skip
