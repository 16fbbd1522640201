"""The load generator's gRPC side (`load grpc://HOST:PORT`): the model's metadata over KServe v2 gRPC, and a
pool with the HTTP pool's `request(bytes, done)` contract that sends pre-serialized ModelInferRequests.

Requests go out as bytes already serialized (no protobuf work per request in the issuer), over one channel: gRPC
multiplexes every request in flight on one HTTP/2 connection, as tritonclient.grpc and perf_analyzer do.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

from infermeter.core.errors import BackendError, UsageError
from infermeter.load.http_client import DoneCallback

INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"
# The largest response a load run accepts (gRPC's own default of 4 MiB is smaller than some models' outputs).
MAX_MESSAGE_BYTES = 256 * 2**20


def split_grpc_url(url: str, model_name: str | None) -> tuple[str, str | None]:
    """(host:port, model name) from `grpc://host:port[/v2/models/NAME]` and an optional --model-name."""
    parts = urlsplit(url)
    if parts.scheme != "grpc" or not parts.hostname or not parts.port:
        raise UsageError(f"TARGET {url!r}: write a gRPC target as grpc://HOST:PORT (e.g. grpc://127.0.0.1:8001)")
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) >= 3 and segments[:2] == ["v2", "models"]:
        model_name = model_name or segments[2]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port}", model_name


def call_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata that carries the API key (as `serve` reads it)."""
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()


def grpc_model_metadata(address: str, model_name: str | None, api_key: str | None) -> tuple[str, dict[str, Any]]:
    """The model's name and its metadata as the HTTP endpoint's dict (name, platform, inputs, outputs), plus
    `parameters.backend` from its Triton configuration when the server has one (Triton's platform names read as
    the backend that runs them here)."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    metadata = call_metadata(api_key)
    with grpc.insecure_channel(address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            if model_name is None:
                index = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True), metadata=metadata)
                if not index.models:
                    raise UsageError(f"grpc://{address} lists no ready model; give the model with --model-name NAME")
                model_name = str(index.models[0].name)
            answer = stub.ModelMetadata(service_pb2.ModelMetadataRequest(name=model_name), metadata=metadata)
        except grpc.RpcError as exc:
            raise BackendError(f"grpc://{address}: {exc.code().name}: {exc.details()}") from None  # type: ignore[attr-defined]
        backend = "remote"
        try:
            config = stub.ModelConfig(service_pb2.ModelConfigRequest(name=model_name), metadata=metadata).config
            backend = config.backend or config.platform or backend
            from infermeter.backends.triton import servable_engines

            backend = servable_engines().get(backend, backend)  # Triton's onnxruntime_onnx: our onnxruntime
        except grpc.RpcError:
            pass  # a KServe server without Triton's configuration extension
    tensors = [
        [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in group]
        for group in (answer.inputs, answer.outputs)
    ]
    found = {"name": answer.name, "platform": answer.platform, "inputs": tensors[0], "outputs": tensors[1]}
    return model_name, {**found, "parameters": {"backend": backend}}


class GrpcPool:
    """ModelInfer calls on one channel; `request(bytes, done)` as the HTTP ConnectionPool's (done gets 200 for OK,
    else the gRPC status name as the error kind)."""

    def __init__(self, address: str, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        import grpc

        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", -1)]
        self._channel = grpc.aio.insecure_channel(address, options=options)
        self._infer = self._channel.unary_unary(INFER_METHOD)  # bytes in, bytes out: requests are pre-serialized
        self._metadata = metadata
        self._tasks: set[asyncio.Task[None]] = set()
        self.messages: dict[str, str] = {}  # the first refusal's details of each status

    def request(self, request: bytes, done: DoneCallback) -> None:
        """Send `request` (a serialized ModelInferRequest) now; `done` is called when it answers."""
        task = asyncio.get_running_loop().create_task(self._call(request, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, request: bytes, done: DoneCallback) -> None:
        import grpc

        try:
            await self._infer(request, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            kind = f"grpc_{exc.code().name.lower()}"
            self.messages.setdefault(kind, " ".join(str(exc.details() or "").split())[:200])
            done(None, kind, time.perf_counter_ns())
            return
        done(200, None, time.perf_counter_ns())

    async def aclose(self) -> None:
        """Cancel calls still open and close the channel (on the loop it was opened on)."""
        for task in list(self._tasks):
            task.cancel()
        await self._channel.close()
