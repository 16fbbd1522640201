"""ONNX Runtime with the CPU execution provider, and an optimized-model cache.

With the cache on (the default; `cache=off` disables it), the graph ONNX Runtime optimizes at session creation
is saved (`SessionOptions.optimized_model_filepath`) under a key of model content, ONNX Runtime version,
optimization level, shapes and CPU ISA, and a later load reuses it with graph optimizations disabled.
The key holds the CPU's ISA because level `all` writes layout-specific (NCHWc) operators chosen for this CPU.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from infermeter.backends._common import case_shapes, onnx_form_reason
from infermeter.backends.base import Backend, Session, TritonTarget, package_version
from infermeter.backends.options import CACHE, QUANTIZE_OPTIONS, Choice
from infermeter.case import Case
from infermeter.errors import BackendError
from infermeter.models.convert import CachedArtifact, cached_build, onnx_for
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec

OPT_LEVELS = ("disable", "basic", "extended", "all")
OPT_LEVEL = Choice(key="onnxruntime.opt_level", choices=OPT_LEVELS, default="all",
                   help="graph optimization level (SessionOptions.graph_optimization_level)")  # fmt: skip


def onnx_graph_precision(path: str) -> str:
    """The precision an ONNX graph computes in, read from the graph itself: int8 when it holds quantization
    operators, fp16/bf16 when its float weights are stored so, else fp32."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    quant_ops = {
        "QuantizeLinear",
        "DequantizeLinear",
        "QLinearConv",
        "QLinearMatMul",
        "ConvInteger",
        "MatMulInteger",
    }
    if any(node.op_type in quant_ops for node in graph.node):
        return "int8"
    float_types = {init.data_type for init in graph.initializer} & {1, 10, 16}
    if float_types == {10}:
        return "fp16"
    if float_types == {16}:
        return "bf16"
    return "fp32"


class OnnxRuntimeSession(Session):
    """An `onnxruntime.InferenceSession`; inputs are made contiguous numpy arrays in `prepare`.

    For concurrent use (streams): `ort_session.run` is thread-safe in ONNX Runtime, so N threads may call
    `run(prepared)` on the same session at once (give each thread its own prepared feeds)."""

    def __init__(self, session: Any, precision: str) -> None:
        super().__init__()
        self.ort_session = session
        self._session = session
        self._precision = precision

    def prepare(self, feeds: Feeds) -> Any:
        return {name: np.ascontiguousarray(value) for name, value in feeds.items()}

    def run(self, prepared: Any) -> Any:
        return self._session.run(None, prepared)

    def effective_precision(self) -> str:
        return self._precision


def _cpu_signature() -> dict[str, object]:
    import platform

    from infermeter.results.env import cpu_isa

    return {"arch": platform.machine(), "isa": cpu_isa()}


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime, CPU execution provider (`onnxruntime`).

    Options: `onnxruntime.opt_level` disable | basic | extended | all (default all); `cache=off` disables the
    optimized-model cache; `quantize.*` tune int8 made on the fly."""

    name = "onnxruntime"
    options = (OPT_LEVEL, CACHE, *QUANTIZE_OPTIONS)
    consumes_onnx = True
    shape_aware = True
    runs_quantized_onnx = True
    quantizer = True
    model_files = (".onnx",)
    # As the parity reference it runs the graph as written: no fusion, no layout change.
    reference_options: ClassVar[tuple[tuple[str, str], ...] | None] = ((OPT_LEVEL.key, "disable"),)
    triton = TritonTarget("platform", "onnxruntime_onnx", "model.onnx", aliases=("onnxruntime",))
    distribution = "onnxruntime"
    install_extra: ClassVar[str | None] = "onnxruntime"
    description = "ONNX Runtime, CPU execution provider"
    # Execution providers in preference order, as (name, provider options) pairs.
    providers: ClassVar[tuple[str, ...]] = ("CPUExecutionProvider",)
    # Whether `load` keeps ORT's optimized graph in the cache (CPU only: GPU graphs are partitioned per session).
    optimized_model_cache: ClassVar[bool] = True
    quantizes_on_the_fly = True

    @classmethod
    def available(cls) -> str | None:
        if package_version("onnxruntime") is None and package_version("onnxruntime-gpu") is None:
            return cls.not_installed("ONNX Runtime")
        return None

    @classmethod
    def version(cls) -> str | None:
        return package_version("onnxruntime") or package_version("onnxruntime-gpu")

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        reason = onnx_form_reason(model, cls.name)
        if reason:
            return reason
        if case.precision in ("fp16", "bf16"):
            return (
                f"ONNX Runtime's CPU execution provider has no x86 {case.precision} kernels for convolutions and "
                f"matmuls: a {case.precision} graph would fail or run through inserted casts; use openvino or a "
                "GPU execution provider for reduced precision"
            )
        if case.precision == "int8":
            return None  # a QDQ graph runs as it is; a float model is quantized on the fly by the measure core
        return super().unsupported_reason(model, case)

    def provider_options(self, case: Case) -> list[tuple[str, dict[str, str]]]:
        """The providers handed to `InferenceSession`, with their options (subclasses add GPU providers)."""
        return [(name, {}) for name in self.providers]

    def session_options(self, ort: Any, model: ModelSpec, case: Case, level_name: str) -> Any:
        """SessionOptions for `case`: threads, optimization level and (static mode) fixed symbolic dims."""
        options = ort.SessionOptions()
        options.intra_op_num_threads = case.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[level_name]
        if case.shape_mode == "static":
            # Fix every symbolic dimension to its size for this case, so ORT plans memory and kernels statically.
            shapes = case_shapes(model, case)
            for spec in model.inputs:
                for axis, dim in enumerate(spec.shape):
                    if isinstance(dim, str):
                        options.add_free_dimension_override_by_name(dim, shapes[spec.name][axis])
        return options

    def create(self, ort: Any, path: str, options: Any, case: Case, model: ModelSpec) -> Any:
        """An InferenceSession on `path`; ONNX Runtime's own errors become BackendError."""
        try:
            return ort.InferenceSession(path, options, providers=self.provider_options(case))
        except Exception as exc:
            raise BackendError(f"ONNX Runtime could not load {model.ref}: {str(exc).strip()}") from exc

    def load(self, model: ModelSpec, case: Case) -> Session:
        level_name = OPT_LEVEL.value(case)
        use_cache = self.optimized_model_cache and CACHE.value(case) and level_name != "disable"
        start = time.perf_counter()
        import onnxruntime as ort

        imported = time.perf_counter()
        artifact = onnx_for(model)
        converted = time.perf_counter()
        optimized: CachedArtifact | None = None
        if use_cache:
            session, optimized = self._load_cached(ort, model, case, str(artifact.path), level_name)
        else:
            session = self.create(
                ort, str(artifact.path), self.session_options(ort, model, case, level_name), case, model
            )
        created = time.perf_counter()
        self.check_providers(session)
        result = OnnxRuntimeSession(session, self.effective_precision(str(artifact.path), case))
        result.load_phases_s = {
            "import_s": imported - start,
            "convert_s": converted - imported,
            "session_create_s": created - converted,
        }
        result.cache_hit = optimized.cache_hit if optimized is not None else None
        result.notes.append(f"onnx: {'cache hit' if artifact.cache_hit else 'built'}; {artifact.note}".rstrip("; "))
        result.notes.append(f"graph optimization level: {level_name}; providers: {', '.join(session.get_providers())}")
        if optimized is not None:
            how = "loaded from cache" if optimized.cache_hit else "optimized and saved to cache"
            result.notes.append(f"optimized model {how}" + (f" ({optimized.note})" if optimized.note else ""))
        return result

    def _load_cached(
        self, ort: Any, model: ModelSpec, case: Case, onnx_path: str, level_name: str
    ) -> tuple[Any, CachedArtifact]:
        shapes: object = case_shapes(model, case) if case.shape_mode == "static" else "dynamic"
        key = {
            "model": model.content_hash,
            "onnx": onnx_path.rsplit("/", 1)[-1] if model.kind != "onnx" else model.content_hash,
            "onnxruntime": self.version(),
            "opt_level": level_name,
            "shapes": shapes,
            "providers": list(self.providers),
            **_cpu_signature(),
        }
        built: dict[str, Any] = {}

        def build(target: Any) -> str:
            options = self.session_options(ort, model, case, level_name)
            options.optimized_model_filepath = str(target)
            # ORT warns that a level-`all` graph is hardware-specific: the cache key holds the ISA for that reason.
            options.log_severity_level = 3
            built["session"] = self.create(ort, onnx_path, options, case, model)
            return f"level {level_name}"

        entry = cached_build("onnxruntime", key, ".onnx", build)
        if "session" in built:
            return built["session"], entry
        # A hit: the saved graph is already optimized, so ORT must not optimize it again.
        options = self.session_options(ort, model, case, "disable")
        return self.create(ort, str(entry.path), options, case, model), entry

    def effective_precision(self, onnx_path: str, case: Case) -> str:
        """What the session computes in: the CPU provider runs the graph in the precision it is stored in."""
        return onnx_graph_precision(onnx_path)

    def check_providers(self, session: Any) -> None:
        """Refuse a session that silently fell back from the requested execution provider."""
        used = session.get_providers()
        if used[:1] != [self.providers[0]]:
            raise BackendError(
                f"ONNX Runtime did not use {self.providers[0]} (it chose {', '.join(used)}): refusing a silent "
                "fallback; check the GPU build, CUDA/cuDNN libraries and driver"
            )
