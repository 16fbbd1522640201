"""Native TensorRT: an engine built from the cached ONNX, serialized into the infermeter cache and reused.

Written against the TensorRT 10.x Python API (and 11.x, where only strongly typed networks exist). Device
memory and the CUDA stream come from `cuda-python` (`cuda.bindings.runtime`), as in TensorRT's own samples.
The engine's profile, build options, cache key and builder call are in `_tensorrt_engine` (tested without a GPU);
the GPU path is verified only where a GPU is lent (see the closing note of the change that added this file).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from infermeter.backends._common import onnx_form_reason
from infermeter.backends._gpu import gpu_name, nvidia_gpu_reason
from infermeter.backends._tensorrt_engine import (
    FP32_LAYERS,
    SHAPE_OPTIONS,
    WORKSPACE_MB,
    ProfileShapes,
    build_engine,
    engine_cache_key,
    fp32_layers_of,
    profile_shapes,
)
from infermeter.backends.base import Backend, Session, package_version
from infermeter.backends.options import CACHE, QUANTIZE_OPTIONS
from infermeter.backends.triton import TritonTarget
from infermeter.core.case import Case
from infermeter.core.errors import BackendError
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, BuildOutput, Phase

_DISTRIBUTIONS = ("tensorrt", "tensorrt-cu12", "tensorrt-cu13", "tensorrt_cu12", "tensorrt_cu13")
INSTALL_HINT = "pip install tensorrt cuda-python (needs an NVIDIA GPU with its driver)"


def tensorrt_version() -> str | None:
    """The installed TensorRT version from package metadata (no import)."""
    for dist in _DISTRIBUTIONS:
        found = package_version(dist)
        if found:
            return found
    return None


def _cudart() -> Any:
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        from cuda import cudart  # cuda-python < 12.6
    return cudart


def _check(result: Any) -> Any:
    """cuda-python returns (error, value...) tuples; raise on an error, return the value(s)."""
    cudart = _cudart()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != cudart.cudaError_t.cudaSuccess:
        raise BackendError(f"CUDA runtime error: {cudart.cudaGetErrorName(err)[1]}")
    return values[0] if len(values) == 1 else values


class TensorRTSession(Session):
    """A TensorRT engine with one execution context on its own CUDA stream.

    `prepare` copies each feed set into its own device buffers (outside the timed region); `run` binds those
    buffers and enqueues the engine; `sync` waits for the stream; outputs are copied back only for parity."""

    def __init__(self, engine: Any, trt: Any, precision: str, profile: ProfileShapes) -> None:
        super().__init__()
        self._trt = trt
        self._engine = engine
        self._context = engine.create_execution_context()
        self._cudart = _cudart()
        self._stream = _check(self._cudart.cudaStreamCreate())
        self._precision = precision
        self._allocations: list[int] = []
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self._inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self._outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        # Output buffers sized for the profile's largest input shapes, shared by every run.
        for name, (_, _, high) in profile.items():
            self._context.set_input_shape(name, high)
        self._output_buffers: dict[str, tuple[int, Any]] = {}
        for name in self._outputs:
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            shape = tuple(self._context.get_tensor_shape(name))
            nbytes = max(1, int(np.prod(shape)) * dtype.itemsize)
            self._output_buffers[name] = (self._malloc(nbytes), dtype)
            self._context.set_tensor_address(name, self._output_buffers[name][0])

    def _malloc(self, nbytes: int) -> int:
        pointer = int(_check(self._cudart.cudaMalloc(nbytes)))
        self._allocations.append(pointer)
        return pointer

    def prepare(self, feeds: Feeds) -> Any:
        prepared = {}
        for name in self._inputs:
            dtype = np.dtype(self._trt.nptype(self._engine.get_tensor_dtype(name)))
            host = np.ascontiguousarray(feeds[name], dtype=dtype)
            pointer = self._malloc(max(1, host.nbytes))
            kind = self._cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
            _check(self._cudart.cudaMemcpy(pointer, host.ctypes.data, host.nbytes, kind))
            prepared[name] = (pointer, host.shape)
        return prepared

    def run(self, prepared: Any) -> Any:
        for name, (pointer, shape) in prepared.items():
            self._context.set_input_shape(name, shape)
            self._context.set_tensor_address(name, pointer)
        if not self._context.execute_async_v3(self._stream):
            raise BackendError("TensorRT execute_async_v3 failed (see the TensorRT log above)")
        return self._outputs

    def sync(self) -> None:
        _check(self._cudart.cudaStreamSynchronize(self._stream))

    def outputs_to_numpy(self, outputs: Any) -> list[np.ndarray]:
        self.sync()
        arrays = []
        for name in outputs:
            pointer, dtype = self._output_buffers[name]
            host = np.empty(tuple(self._context.get_tensor_shape(name)), dtype=dtype)
            kind = self._cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
            _check(self._cudart.cudaMemcpy(host.ctypes.data, pointer, host.nbytes, kind))
            arrays.append(host)
        return arrays

    def effective_precision(self) -> str:
        return self._precision

    def close(self) -> None:
        for pointer in self._allocations:
            self._cudart.cudaFree(pointer)
        self._allocations = []
        self._cudart.cudaStreamDestroy(self._stream)
        self._context = None
        self._engine = None


class TensorRTBackend(Backend):
    """Native TensorRT (`tensorrt`) on the first GPU.

    Precisions: fp32; fp16 (the FP16 builder flag on TensorRT 10; TensorRT 11 needs an fp16 graph); int8 from a
    quantized (Q/DQ) ONNX model, built strongly typed: one given, or, for a float model, the TensorRT-ready Q/DQ
    graph the build stage makes (`trt-qdq`: symmetric int8 activations and per-channel weights, calibrated on
    `quantize.calib`). Options: `tensorrt.min_shapes`/`opt_shapes`/
    `max_shapes` (trtexec syntax), `tensorrt.workspace_mb` (default 2048); `cache=off` rebuilds the engine."""

    name = "tensorrt"
    options = (*SHAPE_OPTIONS.values(), WORKSPACE_MB, FP32_LAYERS, CACHE, *QUANTIZE_OPTIONS)
    int8_quantizer: ClassVar[str | None] = "trt-qdq"
    consumes_onnx = True
    shape_aware = True
    runs_quantized_onnx = True
    model_files = (".onnx",)
    triton = TritonTarget("platform", "tensorrt_plan", filename="model.plan", writable=False, precision_in_file=True)
    device = "cuda"
    distribution = "tensorrt"
    precision_fallback: ClassVar[str | None] = "tensorrt-layer-precision"
    precisions = ("fp32", "fp16", "int8")
    description = "NVIDIA TensorRT (native builder, serialized engines)"

    @classmethod
    def version(cls) -> str | None:
        return tensorrt_version()

    @classmethod
    def available(cls) -> str | None:
        if tensorrt_version() is None:
            return f"TensorRT is not installed: {INSTALL_HINT}"
        if package_version("cuda-python") is None and package_version("cuda-bindings") is None:
            return f"TensorRT needs cuda-python for device memory and streams: {INSTALL_HINT}"
        return nvidia_gpu_reason()

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        reason = onnx_form_reason(model, cls.name)
        if reason:
            return reason
        if case.precision not in cls.precisions:
            return f"tensorrt supports {', '.join(cls.precisions)}; {case.precision} is not offered"
        version = tensorrt_version() or "10"
        if case.precision == "fp16" and int(version.split(".")[0]) >= 11:
            return "TensorRT 11 builds strongly typed networks only: fp16 needs an fp16 ONNX graph"
        return None

    artifact_suffix = ".engine"

    def artifact_key(self, model: ModelSpec, case: Case) -> dict[str, object] | None:
        # Always built ahead (with `cache=off`, into the case's own folder): an engine is the only way to run.
        profile = profile_shapes(model, case)
        key = engine_cache_key(model, case.precision, profile, tensorrt_version() or "", gpu_name())
        return {**key, "workspace_mb": WORKSPACE_MB.value(case)}

    def build(self, model: ModelSpec, case: Case, target: Path) -> BuildOutput:
        import tensorrt as trt

        source = onnx_for(model)
        if case.precision == "int8":
            from infermeter.models.spec import onnx_graph_precision

            if onnx_graph_precision(str(source.path)) != "int8":
                raise BackendError("TensorRT int8 needs Q/DQ nodes in the ONNX graph; quantize the model first")
        start = time.perf_counter()
        profile = profile_shapes(model, case)
        fp32 = fp32_layers_of(FP32_LAYERS.value(case))
        workspace = WORKSPACE_MB.value(case)
        target.write_bytes(build_engine(trt, str(source.path), case.precision, profile, workspace, fp32))
        return BuildOutput(
            {Phase.COMPILE: time.perf_counter() - start}, [f"engine built with TensorRT {trt.__version__}"]
        )

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        if artifact is None:
            raise BackendError("tensorrt loads an engine the build stage made; none was given (a bug if seen)")
        profile = profile_shapes(model, case)
        start = time.perf_counter()
        import tensorrt as trt

        imported = time.perf_counter()
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        engine = runtime.deserialize_cuda_engine(Path(artifact.path).read_bytes())
        if engine is None:
            raise BackendError("TensorRT could not deserialize the engine (built for another TensorRT or GPU?)")
        deserialized = time.perf_counter()
        session = TensorRTSession(engine, trt, case.precision, profile)
        session.load_phases_s = {
            Phase.IMPORT: imported - start,
            Phase.DESERIALIZE: deserialized - imported,
            Phase.SESSION_CREATE: time.perf_counter() - deserialized,
        }
        shown = ", ".join(f"{n}: {'/'.join('x'.join(map(str, s)) for s in p)}" for n, p in profile.items())
        session.notes.append(f"tensorrt profile min/opt/max {shown}; engine {artifact.cache}")
        return session
