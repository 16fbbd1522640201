"""The KServe v2 gRPC service (`inference.GRPCInferenceService`, Triton's and KServe's protobufs, the modules
`tritonclient` generates) beside HTTP: same model, same batcher, same metrics and statistics.

It runs grpc.aio on an event loop of its own, in its own thread: uvicorn's loop may be uvloop, which grpc.aio does
not drive, and requests still meet in the one DynamicBatcher (whose futures resolve on the caller's loop).
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, NoReturn

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from infermeter import __version__
from infermeter.core.errors import UsageError
from infermeter.serve.grpc_protocol import encode_grpc_response, parse_grpc_request, status_code
from infermeter.serve.protocol import ProtocolError
from infermeter.serve.triton import repository_index

if TYPE_CHECKING:
    from infermeter.serve.state import ServerState

# Seconds a stopping server gives its accepted calls to finish (uvicorn waits for HTTP requests likewise).
STOP_GRACE_S = 30.0


async def _refuse(context: grpc.aio.ServicerContext, exc: ProtocolError) -> NoReturn:
    await context.abort(status_code(exc.status), exc.message)
    raise AssertionError("abort returned")  # context.abort always raises


class _Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """Every KServe v2 call plus Triton's model configuration, repository index and statistics; the rest
    (shared memory, trace, log settings, model load/unload, streaming) answer UNIMPLEMENTED."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def _check(self, context: grpc.aio.ServicerContext, model: str | None = None) -> None:
        metadata = {key.lower(): value for key, value in (context.invocation_metadata() or ())}
        self.state.check_key(_text(metadata.get("x-api-key")), _text(metadata.get("authorization")))
        if model is not None:
            self.state.check_model(model)

    async def ServerLive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return service_pb2.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return service_pb2.ServerReadyResponse(ready=self.state.ready)

    async def ModelReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check(context, request.name)
        except ProtocolError as exc:
            await _refuse(context, exc)
        return service_pb2.ModelReadyResponse(ready=self.state.ready)

    async def ServerMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        from infermeter.serve.app import EXTENSIONS

        try:
            self._check(context)
        except ProtocolError as exc:
            await _refuse(context, exc)
        return service_pb2.ServerMetadataResponse(name="infermeter", version=__version__, extensions=EXTENSIONS)

    async def ModelMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check(context, request.name)
        except ProtocolError as exc:
            await _refuse(context, exc)
        metadata = self.state.model.metadata()
        tensor = service_pb2.ModelMetadataResponse.TensorMetadata
        return service_pb2.ModelMetadataResponse(
            name=metadata["name"],
            versions=metadata["versions"],
            platform=metadata["platform"],
            inputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in metadata["inputs"]],
            outputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in metadata["outputs"]],
        )

    async def ModelInfer(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        state = self.state
        try:
            with state.tracked():
                self._check(context, request.model_name)
                parsed = parse_grpc_request(request)
                outputs = await state.infer(parsed.inputs, parsed.outputs)
        except ProtocolError as exc:
            await _refuse(context, exc)
        return encode_grpc_response(state.name, outputs, parsed.request_id)

    async def ModelConfig(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check(context, request.name)
        except ProtocolError as exc:
            await _refuse(context, exc)
        return service_pb2.ModelConfigResponse(config=self.state.model_config())

    async def ModelStatistics(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check(context, request.name or None)  # no name: every model's statistics
        except ProtocolError as exc:
            await _refuse(context, exc)
        return service_pb2.ModelStatisticsResponse(model_stats=[self.state.stats.message()])

    async def RepositoryIndex(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check(context)
        except ProtocolError as exc:
            await _refuse(context, exc)
        model_state, reason = self.state.model_state()
        models = repository_index(self.state.name, model_state, reason, self.state.model.config.repository)
        listed = [m for m in models if not request.ready or m.state == "READY"]
        return service_pb2.RepositoryIndexResponse(models=listed)


def _text(value: str | bytes | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class GrpcServer:
    """The gRPC service of `state` on host:port (0: a free one), in a thread with its own event loop."""

    def __init__(self, state: ServerState, host: str, port: int) -> None:
        self.state = state
        self.host = host
        self.port = port
        self._error: str | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="infermeter-grpc", daemon=True)

    @property
    def address(self) -> str:
        """host:port as gRPC clients take it (IPv6 hosts in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def start(self) -> int:
        """Bind and start serving; returns the bound port. UsageError when the port cannot be bound."""
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            raise UsageError(f"cannot listen for gRPC on {self.address}: {self._error}; choose another --grpc-port")
        return self.port

    def stop(self) -> None:
        """Stop accepting calls, let accepted ones finish (up to STOP_GRACE_S), and end the thread."""
        if self._loop is not None and self._stopping is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(STOP_GRACE_S + 5)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve(loop))
        finally:
            loop.close()

    async def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        limit = int(self.state.model.config.max_body_mb * 2**20)
        # No SO_REUSEPORT (gRPC's default): a second server on a port in use must fail, not share it.
        options = [
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", -1),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(_Servicer(self.state), server)  # type: ignore[no-untyped-call]
        try:
            self.port = server.add_insecure_port(self.address)
        except RuntimeError:  # its message only says "failed to bind" and suggests a debug variable
            self.port = 0
        if self.port == 0:
            self._error = "the address is in use or not available"
        if self._error is not None:
            self._started.set()
            return
        await server.start()
        self._loop, self._stopping = loop, asyncio.Event()
        self._started.set()
        await self._stopping.wait()
        await server.stop(STOP_GRACE_S)
