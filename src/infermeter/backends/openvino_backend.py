"""OpenVINO on CPU, from an OpenVINO IR (.xml + .bin) or a .tflite file (its TFLite frontend) as it is, or the
model's ONNX form. The inference precision
is ALWAYS set explicitly and read back: on CPUs with AVX-512 BF16 or AMX, OpenVINO silently computes in bf16
unless told otherwise, which would pass a bf16 figure off as fp32.

The build is the compiled model, exported (`CompiledModel.export_model`) under a key of the model, shapes,
precision, performance hint, streams and threads (`case_build`); `load` imports it (`Core.import_model`) with
the same configuration. Without the cache (`cache=off`), `load` reads and compiles the model itself.

INT8: a quantized graph (an NNCF IR, a QDQ ONNX) runs as it is; a float model at `--precision int8` is quantized
in the build stage by NNCF (`int8_quantizer`), or cross-fed ONNX Runtime's QDQ graph with `openvino.int8_source=qdq`.
The layers left in float run at the f32 hint. The precision read back is int8 when the compiled graph runs compute
layers in int8 (its runtime model says so, layer by layer: `Session.layer_mix`)."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from infermeter.backends._common import case_shapes, cpu_precision_reason, precision_from_dtype_name
from infermeter.backends.base import Backend, Session, package_version
from infermeter.backends.options import CACHE, QUANTIZE_OPTIONS, Choice, Integer, Switch
from infermeter.backends.read_errors import openvino_read_error
from infermeter.backends.triton import PRECISION, THREADS, TritonParameter, TritonTarget
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, engine_message
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, BuildOutput, Phase
from infermeter.results.records.int8_run import LayerMix, LayerProfile

# infermeter precision -> OpenVINO INFERENCE_PRECISION_HINT value (int8: the hint of the layers left in float).
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "int8": "f32"}
# OPTIMIZATION_CAPABILITIES entry the CPU plugin must list for each hint.
CAPABILITIES = {"bf16": "BF16", "fp16": "FP16"}
PERFORMANCE_HINTS = ("latency", "throughput")
HINT = Choice(key="openvino.hint", choices=PERFORMANCE_HINTS, default="latency", help="PERFORMANCE_HINT")
STREAMS = Integer(key="openvino.streams", default=0, help="NUM_STREAMS (0: what the performance hint chooses)")
# The precisions a config.pbtxt sets as INFERENCE_PRECISION_HINT, each read back as itself (int8 is the file's own).
TRITON_PRECISION_HINTS = tuple((precision, hint) for precision, hint in PRECISION_HINTS.items() if precision != "int8")
CACHE_CAPACITY = Integer(key="openvino.cache_capacity", default=-1, minimum=-1,
                         help="CPU_RUNTIME_CACHE_CAPACITY: shapes kept compiled (-1: the default)")  # fmt: skip
INT8_SOURCE = Choice(key="openvino.int8_source", choices=("own", "qdq"), default="own", int8_only=True,
                     help="int8 of a float model: own (NNCF) or qdq (ONNX Runtime's QDQ graph, cross-fed)")  # fmt: skip
PERF_COUNT = Switch(key="openvino.perf_count", default=False,
                    help="PERF_COUNT: per-node counters (the untimed INT8 profile pass turns it on)")  # fmt: skip


def read_back_precision(compiled: Any) -> str:
    """The inference precision the compiled model really uses, as fp32/bf16/fp16."""
    value = compiled.get_property("INFERENCE_PRECISION_HINT")
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return precision_from_dtype_name(name)


class OpenVinoSession(Session):
    """An OpenVINO compiled model and one infer request.

    Synchronous use (the measurement loop): `run(prepared)` = `infer_request.infer(prepared)`.
    Asynchronous use (streams): `start_async(prepared)` starts the session's own request and `wait()` blocks
    and returns its outputs; `async_queue(jobs)` returns an `openvino.AsyncInferQueue` of `jobs` requests
    (0: OpenVINO's OPTIMAL_NUMBER_OF_INFER_REQUESTS) over the same compiled model, for `--streams N`.
    `compiled_model` and `infer_request` are public for callers that need OpenVINO's own API.
    """

    def __init__(self, compiled: Any, input_names: list[str], output_count: int) -> None:
        super().__init__()
        self.compiled_model = compiled
        self.infer_request = compiled.create_infer_request()
        self._input_names = input_names
        self._output_count = output_count

    def prepare(self, feeds: Feeds) -> Any:
        return {name: np.ascontiguousarray(feeds[name]) for name in self._input_names}

    def run(self, prepared: Any) -> Any:
        # share_inputs: the prepared arrays outlive the call, so OpenVINO may read them in place (no copy in
        # the timed region, as in benchmark_app); outputs are copied out so that results of earlier runs stay valid.
        return self.infer_request.infer(prepared, share_inputs=True, share_outputs=False)

    def stream_runner(self, index: int) -> Callable[[Any], Any]:
        """Stream 0 uses the session's request; every other stream gets an infer request of its own (a request
        holds per-inference state, so two threads must never share one)."""
        if index == 0:
            return self.run
        request = self.compiled_model.create_infer_request()

        def run(prepared: Any) -> Any:
            return request.infer(prepared, share_inputs=True, share_outputs=False)

        return run

    def start_async(self, prepared: Any) -> None:
        """Start one inference on this session's request without waiting (pair with `wait`)."""
        self.infer_request.start_async(prepared, share_inputs=True)

    def wait(self) -> list[np.ndarray]:
        """Block until the request started by `start_async` finishes; its outputs, copied."""
        self.infer_request.wait()
        return [np.array(self.infer_request.get_output_tensor(i).data) for i in range(self._output_count)]

    def async_queue(self, jobs: int = 0) -> Any:
        """An `openvino.AsyncInferQueue` with `jobs` requests (0: the plugin's optimal number for its streams)."""
        import openvino as ov

        count = jobs or int(self.compiled_model.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        return ov.AsyncInferQueue(self.compiled_model, count)

    def outputs_to_numpy(self, outputs: Any) -> list[np.ndarray]:
        return [np.asarray(outputs[i]) for i in range(self._output_count)]

    def effective_precision(self) -> str:
        mix = self.layer_mix()
        if mix.counts.get("int8"):
            return "int8"
        # What the runtime model's compute layers run in (`runtimePrecision`), not the hint the plugin accepted.
        from infermeter.backends.compute_precision import openvino_runtime

        reading = openvino_runtime(self.compiled_model)
        if reading is None:
            return read_back_precision(self.compiled_model)
        self.compute_evidence = reading.evidence()
        return reading.precision

    def layer_mix(self) -> LayerMix:
        from infermeter.backends.openvino_profile import runtime_mix

        return runtime_mix(self.compiled_model)

    def layer_profile(self, prepared: Any, iterations: int) -> LayerProfile | None:
        if str(self.compiled_model.get_property("PERF_COUNT")).upper() not in ("YES", "TRUE"):
            return None
        from infermeter.backends.openvino_profile import profile_request

        return profile_request(self.infer_request, lambda: self.run(prepared), iterations)

    def close(self) -> None:
        self.infer_request = None
        self.compiled_model = None


class OpenVinoBackend(Backend):
    """OpenVINO, CPU plugin (`openvino`), compiled from the model's ONNX form.

    Options: `openvino.hint` latency|throughput (PERFORMANCE_HINT, default latency); `openvino.streams` N
    (NUM_STREAMS; default: what the hint chooses); `cache=off` disables the compiled-blob cache (CACHE_DIR).
    Threads: INFERENCE_NUM_THREADS = the case's threads. Static shape mode reshapes the model to the case's
    shapes before compiling; dynamic keeps its symbolic dimensions."""

    name = "openvino"
    options = (HINT, STREAMS, CACHE_CAPACITY, CACHE, INT8_SOURCE, PERF_COUNT, *QUANTIZE_OPTIONS)
    consumes_onnx = True
    shape_aware = True
    runs_quantized_onnx = True
    quantizer = True
    model_files = (".onnx", ".xml", ".tflite")  # a .tflite file through OpenVINO's TFLite frontend
    # As the parity reference (the default one of an IR) it runs at the f32 hint, set explicitly like every case.
    reference_options: ClassVar[tuple[tuple[str, str], ...] | None] = ()
    triton = TritonTarget(
        "backend",
        "openvino",
        filename="model.onnx",
        parameters=(
            # A quantized file fixes int8 itself; the hint then governs its float layers, as when measured.
            TritonParameter("INFERENCE_PRECISION_HINT", PRECISION, values=TRITON_PRECISION_HINTS, fallback="fp32"),
            TritonParameter("PERFORMANCE_HINT", HINT.key, default=HINT.default, upper=True),
            TritonParameter("INFERENCE_NUM_THREADS", THREADS),
            TritonParameter("NUM_STREAMS", STREAMS.key, only_when_set=True),
        ),
        streams_option=STREAMS.key,
    )
    distribution = "openvino"
    precision_fallback: ClassVar[str | None] = "openvino-hint"
    install_extra = "openvino"
    precisions = ("fp32", "bf16", "fp16", "int8")
    int8_quantizer = "nncf"
    profiling_options = ((PERF_COUNT.key, "on"),)
    unit_profiler: ClassVar[str | None] = "ov-primitives"
    description = "OpenVINO CPU plugin (precision hint set and read back)"

    @classmethod
    def available(cls) -> str | None:
        if package_version("openvino") is None:
            return cls.not_installed("OpenVINO")
        if package_version("onnx") is None and package_version("torch") is None:
            return cls.not_installed("onnx (OpenVINO reads the model's ONNX form with it)")
        return None

    @classmethod
    def int8_quantizer_for(cls, case: Case) -> str | None:
        return "ort-qdq" if INT8_SOURCE.value(case) == "qdq" else cls.int8_quantizer

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        if model.kind == "tflite" and case.precision == "int8" and model.precision != "int8":
            return "openvino runs a .tflite file as it is: INT8 needs a quantized .tflite (NNCF quantizes ONNX or IR)"
        if case.precision not in cls.precisions:
            return f"openvino supports {', '.join(cls.precisions)} here"
        if case.precision == "int8" and cls.int8_quantizer_for(case) == "nncf":
            from infermeter.backends.options import QUANTIZE_METHOD

            if QUANTIZE_METHOD.value(case) != QUANTIZE_METHOD.default:
                return (
                    f"{QUANTIZE_METHOD.key}={QUANTIZE_METHOD.value(case)} is ONNX Runtime's calibration; NNCF picks "
                    f"its own range estimators (add -O {INT8_SOURCE.key}=qdq to run ONNX Runtime's QDQ graph)"
                )
        return cpu_precision_reason(case.precision, "OpenVINO")

    artifact_suffix = ".blob"

    def artifact_key(self, model: ModelSpec, case: Case) -> dict[str, object] | None:
        if not CACHE.value(case):
            return None
        shapes: object = case_shapes(model, case) if case.shape_mode == "static" else "dynamic"
        return {"config": self._config(case), "shapes": shapes}

    @staticmethod
    def _config(case: Case) -> dict[str, Any]:
        config: dict[str, Any] = {
            # Always explicit: the CPU plugin's default on bf16-capable CPUs is bf16.
            "INFERENCE_PRECISION_HINT": PRECISION_HINTS[case.precision],
            "PERFORMANCE_HINT": HINT.value(case).upper(),
            "INFERENCE_NUM_THREADS": case.threads,
        }
        if STREAMS.value(case):
            config["NUM_STREAMS"] = STREAMS.value(case)
        if CACHE_CAPACITY.value(case) >= 0:
            config["CPU_RUNTIME_CACHE_CAPACITY"] = CACHE_CAPACITY.value(case)
        return config

    def _core(self, case: Case) -> Any:
        import openvino as ov

        core = ov.Core()
        capabilities = set(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
        needed = CAPABILITIES.get(case.precision)
        if needed and needed not in capabilities:
            raise BackendError(
                f"the OpenVINO CPU plugin does not list {needed} in OPTIMIZATION_CAPABILITIES on this CPU "
                f"({', '.join(sorted(capabilities))}); use --precision fp32"
            )
        return core

    def _compile(self, core: Any, model: ModelSpec, case: Case, profiled: bool = False) -> tuple[Any, float]:
        """The model read, reshaped (static mode) and compiled (`profiled`: with PERF_COUNT on): (compiled model,
        seconds spent reading)."""
        start = time.perf_counter()
        try:
            # An IR and a .tflite file (OpenVINO's TFLite frontend) are read as they are; any other model through
            # its ONNX form (the user's file or a cached export).
            source = model.path if model.kind in ("openvino_ir", "tflite") and model.path else str(onnx_for(model).path)
            ov_model = core.read_model(source)
            if case.shape_mode == "static":
                ov_model.reshape({name: list(shape) for name, shape in case_shapes(model, case).items()})
        except Exception as exc:
            raise BackendError(openvino_read_error(model, exc)) from exc
        read_s = time.perf_counter() - start
        config = self._config(case) | ({"PERF_COUNT": True} if profiled else {})  # a bad value is the user's error
        try:
            return core.compile_model(ov_model, "CPU", config), read_s
        except Exception as exc:
            raise BackendError(f"OpenVINO could not compile {model.ref}: {engine_message(exc)}") from exc

    def build(self, model: ModelSpec, case: Case, target: Path) -> BuildOutput:
        start = time.perf_counter()
        compiled, _read_s = self._compile(self._core(case), model, case)
        compiled_at = time.perf_counter()
        blob = io.BytesIO()  # OpenVINO's Python API exports into a BytesIO only
        compiled.export_model(blob)
        target.write_bytes(blob.getvalue())
        phases: dict[str, float] = {
            Phase.COMPILE: compiled_at - start,
            Phase.SERIALIZE: time.perf_counter() - compiled_at,
        }
        return BuildOutput(phases, ["compiled model exported (CompiledModel.export_model)"])

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        start = time.perf_counter()
        core = self._core(case)
        imported = time.perf_counter()
        phases: dict[str, float] = {Phase.IMPORT: imported - start}
        if artifact is not None:
            # PERF_COUNT is set on import, never built in: the profile pass reuses the blob the timed case ran.
            config = self._config(case) | ({"PERF_COUNT": True} if PERF_COUNT.value(case) else {})
            try:
                compiled = core.import_model(Path(artifact.path).read_bytes(), "CPU", config)
            except Exception as exc:
                reason = engine_message(exc)
                raise BackendError(f"OpenVINO could not import the compiled {model.ref}: {reason}") from exc
            phases[Phase.DESERIALIZE] = time.perf_counter() - imported
        else:
            compiled, phases[Phase.CONVERT] = self._compile(core, model, case, PERF_COUNT.value(case))
            phases[Phase.COMPILE] = time.perf_counter() - imported - phases[Phase.CONVERT]
        ready = time.perf_counter()
        session = OpenVinoSession(compiled, [i.name for i in model.inputs], len(compiled.outputs))
        phases[Phase.SESSION_CREATE] = time.perf_counter() - ready
        session.load_phases_s = phases
        effective = read_back_precision(compiled)
        session.notes.append(
            f"openvino: INFERENCE_PRECISION_HINT set {PRECISION_HINTS[case.precision]}, read back "
            f"{effective}; PERFORMANCE_HINT {compiled.get_property('PERFORMANCE_HINT')}; "
            f"NUM_STREAMS {compiled.get_property('NUM_STREAMS')}; "
            f"INFERENCE_NUM_THREADS {compiled.get_property('INFERENCE_NUM_THREADS')}; "
            f"{case.shape_mode} shapes; " + ("imported from the build stage's blob" if artifact else "compiled here")
        )
        return session
