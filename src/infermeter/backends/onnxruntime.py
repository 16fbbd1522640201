"""ONNX Runtime with the CPU execution provider; its build is the optimized graph.

With the cache on (the default; `cache=off` disables it), the build stage has ONNX Runtime optimize the graph
once and save it (`SessionOptions.optimized_model_filepath`) under a key of model content, ONNX Runtime version,
optimization level, shapes and CPU ISA (`case_build`); `load` then creates the session from the saved graph
with graph optimizations disabled. The key holds the ISA because level `all` writes layout-specific (NCHWc)
operators chosen for this CPU. Without the cache, `load` creates the session from the model and optimizes it there.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from infermeter.backends._common import case_shapes, onnx_form_reason
from infermeter.backends.base import Backend, Session, package_version
from infermeter.backends.compute_precision import ComputeReading
from infermeter.backends.options import CACHE, QUANTIZE_OPTIONS, Choice, Switch
from infermeter.backends.triton import THREADS, TritonGraphLevel, TritonParameter, TritonTarget
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, engine_message
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import Feeds, dims_by_name
from infermeter.models.spec import ModelSpec, onnx_graph_precision
from infermeter.results.artifact import Artifact, BuildOutput, Phase
from infermeter.results.records.int8_run import LayerMix, LayerProfile

OPT_LEVELS = ("disable", "basic", "extended", "all")
CUSTOM_DOMAIN = "ai.onnx.contrib"  # onnxruntime-extensions' operators (tokenizers, string and audio ops)
OPT_LEVEL = Choice(key="onnxruntime.opt_level", choices=OPT_LEVELS, default="all",
                   help="graph optimization level (SessionOptions.graph_optimization_level)")  # fmt: skip
# Every ONNX Runtime backend's threads as Triton's onnxruntime_backend parameters.
TRITON_THREADS = (
    TritonParameter("intra_op_thread_count", THREADS),
    TritonParameter(
        "inter_op_thread_count", THREADS, fixed="1", why="infermeter's ONNX Runtime sessions run inter_op_num_threads 1"
    ),
)
PROFILE = Switch(key="onnxruntime.profile", default=False,
                 help="SessionOptions.enable_profiling: per-node kernel times (the untimed INT8 profile pass "
                      "turns it on)")  # fmt: skip
# Memory settings (issue 32's soak compares them): the CPU arena grows by powers of two and never gives back.
CPU_ARENA = Switch(key="onnxruntime.cpu_arena", default=True, help="SessionOptions.enable_cpu_mem_arena")
MEM_PATTERN = Switch(key="onnxruntime.mem_pattern", default=True, help="SessionOptions.enable_mem_pattern")
ARENA_EXTEND = Choice(key="onnxruntime.arena_extend", choices=("next_power_of_two", "same_as_requested"),
                      default="next_power_of_two",
                      help="the CPU arena's arena_extend_strategy (an OrtArenaCfg, per process)")  # fmt: skip
ARENA_SHRINK = Switch(key="onnxruntime.arena_shrink", default=False,
                      help="run option memory.enable_memory_arena_shrinkage=cpu:0: give arena memory back after "
                           "each run")  # fmt: skip


def folded_graph(model: ModelSpec, case: Case, target: Path) -> Path:
    """`model`'s ONNX form with ONNX Runtime's basic graph optimizations, saved at `target`: constants folded, the
    shape arithmetic folded at the case's shapes in static mode, redundant nodes removed, standard ONNX operators
    only. For a compiler whose importer cannot fold shape arithmetic itself (TVM's Relax importer leaves such tensors
    without a shape, and its lowering then fails on bert_tiny)."""
    import onnxruntime as ort

    backend = OnnxRuntimeBackend()
    options = backend.session_options(ort, model, case, "basic")
    options.optimized_model_filepath = str(target)
    options.log_severity_level = 3
    backend.create(ort, str(onnx_for(model).path), options, case, model)
    return target


def _register_arena(ort: Any, strategy: str) -> None:
    """A CPU arena allocator with `strategy` registered on ONNX Runtime's process-wide environment (the only way
    to set a CPU arena's extend strategy from Python); sessions use it through `session.use_env_allocators`.
    Registered once per process: a second registration is refused by ONNX Runtime and ignored here."""
    info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    config = ort.OrtArenaCfg(0, 1 if strategy == "same_as_requested" else 0, -1, -1)
    try:
        ort.create_and_register_allocator(info, config)
    except Exception as exc:  # already registered in this process
        if "already" not in str(exc).lower():
            raise BackendError(f"ONNX Runtime refused the arena setting {strategy}: {exc}") from exc


class OnnxRuntimeSession(Session):
    """An `onnxruntime.InferenceSession`; inputs are made contiguous numpy arrays in `prepare`.

    For concurrent use (streams): `ort_session.run` is thread-safe in ONNX Runtime, so N threads may call
    `run(prepared)` on the same session at once (give each thread its own prepared feeds)."""

    def __init__(
        self, session: Any, precision: str, optimized_graph: str | None = None, run_options: Any = None
    ) -> None:
        super().__init__()
        self.ort_session = session
        self._session = session
        self._run_options = run_options  # made once, outside the timed region
        self._precision = precision
        # An FP16/BF16 graph's compute precision, read from a profiled probe run (`OnnxRuntimeBackend.reader`) once:
        # untimed after warm-up (`read_compute`), else when first asked.
        self.compute_reader: Callable[[Any], None] | None = None
        # The graph ONNX Runtime optimized and saved in the build stage, when the session was created from it.
        self._optimized_graph = optimized_graph

    def prepare(self, feeds: Feeds) -> Any:
        return {name: np.ascontiguousarray(value) for name, value in feeds.items()}

    def run(self, prepared: Any) -> Any:
        return self._session.run(None, prepared, self._run_options)

    def read_compute(self, prepared: Any) -> None:
        reader, self.compute_reader = self.compute_reader, None
        if reader is not None:
            reader(prepared)

    def effective_precision(self) -> str:
        self.read_compute(None)
        return self._precision

    def set_compute(self, precision: str, evidence: str | None) -> None:
        """Record what the engine was read to compute in (`onnxruntime_precision`) and where it was read."""
        self._precision, self.compute_evidence = precision, evidence

    def layer_mix(self) -> LayerMix | None:
        if self._optimized_graph is None or self._precision != "int8":
            return None  # only the saved optimized graph shows the fused INT8 operators the session runs
        from infermeter.backends.onnxruntime_profile import graph_mix

        return graph_mix(self._optimized_graph)

    def layer_profile(self, prepared: Any, iterations: int) -> LayerProfile | None:
        if not self._session.get_session_options().enable_profiling:
            return None
        from infermeter.backends.onnxruntime_profile import profile_session

        return profile_session(self._session.end_profiling, lambda: self.run(prepared), iterations)


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime, CPU execution provider (`onnxruntime`).

    Options: `onnxruntime.opt_level` disable | basic | extended | all (default all); `cache=off` disables the
    optimized-model cache; `quantize.*` tune int8 made on the fly."""

    name = "onnxruntime"
    options = (OPT_LEVEL, CACHE, PROFILE, CPU_ARENA, MEM_PATTERN, ARENA_EXTEND, ARENA_SHRINK, *QUANTIZE_OPTIONS)
    consumes_onnx = True
    shape_aware = True
    runs_quantized_onnx = True
    quantizer = True
    model_files = (".onnx",)
    # As the parity reference it runs the graph as written: no fusion, no layout change.
    reference_options: ClassVar[tuple[tuple[str, str], ...] | None] = ((OPT_LEVEL.key, "disable"),)
    triton: ClassVar[TritonTarget | None] = TritonTarget(
        "platform",
        "onnxruntime_onnx",
        filename="model.onnx",
        aliases=("onnxruntime",),
        parameters=TRITON_THREADS,
        # Our level -> the onnxruntime_backend's `optimization.graph.level`; `all` is its default (no field).
        graph_level=TritonGraphLevel(
            OPT_LEVEL.key, OPT_LEVEL.default, (("basic", -1), ("extended", 1), ("disable", 2))
        ),
    )
    distribution = "onnxruntime"
    install_extra: ClassVar[str | None] = "onnxruntime"
    description = "ONNX Runtime, CPU execution provider"
    # Execution providers in preference order, as (name, provider options) pairs.
    providers: ClassVar[tuple[str, ...]] = ("CPUExecutionProvider",)
    # Whether `load` keeps ORT's optimized graph in the cache (CPU only: GPU graphs are partitioned per session).
    optimized_model_cache: ClassVar[bool] = True
    int8_quantizer: ClassVar[str | None] = "ort-qdq"
    precision_fallback: ClassVar[str | None] = "ort-fp16-graph"
    profiling_options: ClassVar[tuple[tuple[str, str], ...] | None] = ((PROFILE.key, "on"),)
    unit_profiler: ClassVar[str | None] = "ort-kernels"
    # int8: a QDQ graph runs as it is, a float model is quantized on the fly (`quantizers.onthefly`); no x86 fp16/bf16.
    precisions: ClassVar[tuple[str, ...]] = ("fp32", "int8")

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

    def opt_level(self, case: Case) -> str:
        """The graph optimization level `case` asks for (`onnxruntime.opt_level`)."""
        return str(OPT_LEVEL.value(case))

    def session_options(self, ort: Any, model: ModelSpec, case: Case, level_name: str) -> Any:
        """SessionOptions for `case`: threads, optimization level and (static mode) fixed symbolic dims."""
        options = ort.SessionOptions()
        options.intra_op_num_threads = case.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.enable_cpu_mem_arena = CPU_ARENA.value(case)
        options.enable_mem_pattern = MEM_PATTERN.value(case)
        if ARENA_EXTEND.value(case) != ARENA_EXTEND.default:
            _register_arena(ort, ARENA_EXTEND.value(case))
            options.add_session_config_entry("session.use_env_allocators", "1")
        if PROFILE.value(case):
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(tempfile.gettempdir()) / "infermeter-ort-profile")
        options.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[level_name]
        if case.shape_mode == "static":
            # Fix every symbolic dimension to its size for this case, so ORT plans memory and kernels statically
            # (by name: a name with several sizes, such as an exporter's `?` for height and width, stays free).
            for dim, size in dims_by_name(model.inputs, case_shapes(model, case)).items():
                options.add_free_dimension_override_by_name(dim, size)
        return options

    def create(self, ort: Any, path: str, options: Any, case: Case, model: ModelSpec) -> Any:
        """An InferenceSession on `path`; ONNX Runtime's own errors become BackendError."""
        try:
            return ort.InferenceSession(path, options, providers=self.provider_options(case))
        except Exception as exc:
            if CUSTOM_DOMAIN not in str(exc):
                raise BackendError(f"ONNX Runtime could not load {model.ref}: {str(exc).strip()}") from exc
            error = exc
        # Custom operators of onnxruntime-extensions (a tokenizer inside the graph): its library, registered.
        try:
            from onnxruntime_extensions import get_library_path
        except ImportError:
            reason = engine_message(error, 160)
            raise BackendError(f"{model.ref} uses custom operators of {CUSTOM_DOMAIN} ({reason}): install "
                               "onnxruntime-extensions (pip install onnxruntime-extensions)") from error  # fmt: skip
        options.register_custom_ops_library(get_library_path())
        try:
            return ort.InferenceSession(path, options, providers=self.provider_options(case))
        except Exception as exc:
            raise BackendError(f"ONNX Runtime could not load {model.ref}: {str(exc).strip()}") from exc

    artifact_suffix = ".onnx"

    def artifact_key(self, model: ModelSpec, case: Case) -> dict[str, object] | None:
        level_name = OPT_LEVEL.value(case)
        if not (self.optimized_model_cache and CACHE.value(case)) or level_name == "disable":
            return None  # nothing to save: `load` optimizes (or, at `disable`, runs the graph as written)
        shapes: object = case_shapes(model, case) if case.shape_mode == "static" else "dynamic"
        return {"opt_level": level_name, "shapes": shapes, "providers": list(self.providers)}

    def build(self, model: ModelSpec, case: Case, target: Path) -> BuildOutput:
        import onnxruntime as ort

        level_name = OPT_LEVEL.value(case)
        start = time.perf_counter()
        options = self.session_options(ort, model, case, level_name)
        options.optimized_model_filepath = str(target)
        # ORT's warnings are captured as findings (`backends.engine_log`); its note that a level-`all` graph is
        # hardware-specific is dropped there (the build key holds the ISA for that reason).
        options.log_severity_level = 2
        self.create(ort, str(onnx_for(model).path), options, case, model)
        return BuildOutput(
            {Phase.OPTIMIZE: time.perf_counter() - start}, [f"optimized graph saved (level {level_name})"]
        )

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        level_name = OPT_LEVEL.value(case)
        start = time.perf_counter()
        import onnxruntime as ort

        imported = time.perf_counter()
        source = onnx_for(model)
        converted = time.perf_counter()
        if artifact is not None:
            # The saved graph is already optimized, so ORT must not optimize it again.
            options = self.session_options(ort, model, case, "disable")
            session = self.create(ort, artifact.path, options, case, model)
        else:
            options = self.session_options(ort, model, case, level_name)
            session = self.create(ort, str(source.path), options, case, model)
        created = time.perf_counter()
        self.check_providers(session)
        stored = onnx_graph_precision(str(source.path))
        run_options = None
        if ARENA_SHRINK.value(case):
            if not CPU_ARENA.value(case):
                raise BackendError("onnxruntime.arena_shrink shrinks the CPU arena: it needs cpu_arena on")
            run_options = ort.RunOptions()
            run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        result = OnnxRuntimeSession(session, stored, artifact.path if artifact is not None else None, run_options)
        result.load_phases_s = {
            Phase.IMPORT: imported - start,
            Phase.CONVERT: converted - imported,
            Phase.SESSION_CREATE: created - converted,
        }
        result.notes.append(f"onnx: {'cache hit' if source.cache_hit else 'built'}; {source.note}".rstrip("; "))
        result.notes.append(f"graph optimization level: {level_name}; providers: {', '.join(session.get_providers())}")
        if artifact is not None:
            result.notes.append("session created from the optimized graph of the build stage")
        result.stored_precision = stored
        if stored in ("fp16", "bf16"):
            from infermeter.backends.onnxruntime_precision import compute_reader

            result.compute_reader = compute_reader(self, result, model, case, artifact.path if artifact else None)
        return result

    def computed_precision(self, stored: str, reading: ComputeReading | None, case: Case) -> str:
        """The session's compute precision: what the profiled kernels read, else the graph's own."""
        return reading.precision if reading is not None else stored

    def storage_note(self, stored: str, computed: str) -> str | None:
        """ "fp32 compute (fp16 storage)..." when the engine computed a `stored` FP16/BF16 graph in FP32."""
        if stored not in ("fp16", "bf16") or computed != "fp32":
            return None
        return (f"fp32 compute ({stored} storage): ONNX Runtime's {self.providers[0]} ran its compute kernels in "
                f"fp32 between inserted casts (read from a profiled run); no {stored} speedup is claimed")  # fmt: skip

    def check_providers(self, session: Any) -> None:
        """Refuse a session that silently fell back from the requested execution provider."""
        used = session.get_providers()
        if used[:1] != [self.providers[0]]:
            raise BackendError(
                f"ONNX Runtime did not use {self.providers[0]} (it chose {', '.join(used)}): refusing a silent "
                "fallback; check the GPU build, CUDA/cuDNN libraries and driver"
            )
