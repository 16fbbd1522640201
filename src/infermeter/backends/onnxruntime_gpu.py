"""ONNX Runtime with the CUDA and TensorRT execution providers (the `onnxruntime-gpu` build and a GPU).

`sync()` is a no-op for these sessions on purpose: `InferenceSession.run` with numpy inputs and outputs
returns only after the outputs were copied back to host memory, so the device work is finished when run()
returns. The timed figure therefore includes the host<->device copies of inputs and outputs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from infermeter.backends._common import onnx_form_reason
from infermeter.backends._gpu import nvidia_gpu_reason
from infermeter.backends.base import Session, package_version
from infermeter.backends.compute_precision import ComputeReading
from infermeter.backends.onnxruntime import OPT_LEVEL, TRITON_THREADS, OnnxRuntimeBackend, OnnxRuntimeSession
from infermeter.backends.options import CACHE, Option, Switch
from infermeter.backends.triton import TritonTarget
from infermeter.core.case import Case
from infermeter.models.convert import cache_root
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact

# Fail session creation when any node would be placed on the CPU: a partly-CPU graph is not a GPU figure.
CPU_FALLBACK = Switch(key="onnxruntime.cpu_fallback", default=False, help="allow nodes to fall back to the CPU")
_GPU_BUILD_HINT = "pip uninstall onnxruntime && pip install onnxruntime-gpu (needs CUDA 12 and cuDNN 9 libraries)"


class _OnnxRuntimeGpuBackend(OnnxRuntimeBackend):
    device = "cuda"
    distribution = "onnxruntime-gpu"
    install_extra = None  # the GPU build replaces the CPU one; no extra installs it
    optimized_model_cache = False
    options: ClassVar[tuple[Option, ...]] = (OPT_LEVEL, CPU_FALLBACK)
    # Not the CPU backend's: int8 graphs, quantization and the parity reference are the CPU provider's business.
    int8_quantizer: ClassVar[str | None] = None
    quantizer = False
    precisions: ClassVar[tuple[str, ...]] = ("fp32",)
    reference_options = None
    # The CPU backend's platform; config.pbtxt keeps Triton's default graph level for GPU cases.
    triton: ClassVar[TritonTarget | None] = TritonTarget(
        "platform", "onnxruntime_onnx", filename="model.onnx", aliases=("onnxruntime",), parameters=TRITON_THREADS
    )

    @classmethod
    def version(cls) -> str | None:
        return package_version("onnxruntime-gpu")

    @classmethod
    def available(cls) -> str | None:
        if package_version("onnxruntime-gpu") is None:
            return f"{cls.providers[0]} needs the GPU build of ONNX Runtime: {_GPU_BUILD_HINT}"
        gpu = nvidia_gpu_reason()
        if gpu:
            return f"{cls.name}: {gpu}"
        try:
            import onnxruntime as ort

            providers = ort.get_available_providers()
        except Exception as exc:  # a broken install must not crash the listing
            return f"onnxruntime could not be imported ({type(exc).__name__}: {exc}): {_GPU_BUILD_HINT}"
        if cls.providers[0] not in providers:
            return f"this onnxruntime build has no {cls.providers[0]} (it has {', '.join(providers)})"
        return None

    def session_options(self, ort: Any, model: ModelSpec, case: Case, level_name: str) -> Any:
        options = super().session_options(ort, model, case, level_name)
        if not CPU_FALLBACK.value(case):
            # `onnxruntime.cpu_fallback=on` allows a partly-CPU graph (and the note says so).
            options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        return options

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        session = super().load(model, case, artifact)
        assert isinstance(session, OnnxRuntimeSession)
        if CPU_FALLBACK.value(case):
            session.notes.append("onnxruntime.cpu_fallback=on: some nodes may run on the CPU")
        session.notes.append("timed run() includes host<->device copies (numpy inputs and outputs)")
        return session


class OnnxRuntimeCudaBackend(_OnnxRuntimeGpuBackend):
    """ONNX Runtime, CUDA execution provider (`onnxruntime-cuda`); fp32 graphs (int8/fp16 from the graph)."""

    name = "onnxruntime-cuda"
    description = "ONNX Runtime, CUDA execution provider"
    providers: ClassVar[tuple[str, ...]] = ("CUDAExecutionProvider",)
    runs_quantized_onnx = False  # the CUDA provider runs a QDQ graph's float path, not int8 kernels

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        reason = onnx_form_reason(model, cls.name)
        if reason:
            return reason
        if case.precision != "fp32":
            return (
                f"onnxruntime-cuda runs the graph in the precision it is stored in; {case.precision} needs a "
                f"{case.precision} ONNX model (or use onnxruntime-tensorrt / tensorrt with --precision fp16)"
            )
        return None

    def provider_options(self, case: Case) -> list[tuple[str, dict[str, str]]]:
        return [("CUDAExecutionProvider", {"device_id": "0"})]


class OnnxRuntimeTensorRTBackend(_OnnxRuntimeGpuBackend):
    """ONNX Runtime, TensorRT execution provider (`onnxruntime-tensorrt`); fp32 or fp16 (trt_fp16_enable).
    With the cache on, TensorRT engines are kept under the infermeter cache (`ort-tensorrt/`)."""

    name = "onnxruntime-tensorrt"
    description = "ONNX Runtime, TensorRT execution provider"
    providers: ClassVar[tuple[str, ...]] = ("TensorrtExecutionProvider",)
    precisions = ("fp32", "fp16")
    options = (OPT_LEVEL, CPU_FALLBACK, CACHE)
    triton: ClassVar[TritonTarget | None] = TritonTarget(
        "platform", "onnxruntime_onnx", filename="model.onnx", aliases=("onnxruntime",), parameters=TRITON_THREADS,
        accelerator="tensorrt",
    )  # fmt: skip

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        reason = onnx_form_reason(model, cls.name)
        if reason:
            return reason
        if case.precision not in cls.precisions:
            return "onnxruntime-tensorrt supports fp32 and fp16 here; int8 needs a calibration table or Q/DQ model"
        return None

    def provider_options(self, case: Case) -> list[tuple[str, dict[str, str]]]:
        options = {"device_id": "0", "trt_fp16_enable": "True" if case.precision == "fp16" else "False"}
        if CACHE.value(case):
            folder = cache_root() / "ort-tensorrt"
            folder.mkdir(parents=True, exist_ok=True)
            options |= {"trt_engine_cache_enable": "True", "trt_engine_cache_path": str(folder)}
        return [("TensorrtExecutionProvider", options)]

    def computed_precision(self, stored: str, reading: ComputeReading | None, case: Case) -> str:
        # TensorRT's builder flag is what we can read back (its engine is one node to ONNX Runtime's profiler):
        # fp16 allows (not forces) fp16 kernels.
        return "fp16" if case.precision == "fp16" else super().computed_precision(stored, reading, case)
