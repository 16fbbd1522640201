"""OpenVINO on CPU, from the cached ONNX. The inference precision is ALWAYS set explicitly and read back:
on CPUs with AVX-512 BF16 or AMX, OpenVINO silently computes in bf16 unless told otherwise, which would pass
a bf16 figure off as fp32."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.backends._common import case_shapes, cpu_precision_reason, onnx_form_reason, precision_from_dtype_name
from infermeter.backends.base import Backend, Session, TritonTarget, package_version
from infermeter.backends.options import CACHE, Choice, Integer
from infermeter.case import Case
from infermeter.errors import BackendError
from infermeter.models.convert import cache_root, onnx_for
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec

# infermeter precision -> OpenVINO INFERENCE_PRECISION_HINT value.
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
# OPTIMIZATION_CAPABILITIES entry the CPU plugin must list for each hint.
CAPABILITIES = {"bf16": "BF16", "fp16": "FP16"}
PERFORMANCE_HINTS = ("latency", "throughput")
HINT = Choice(key="openvino.hint", choices=PERFORMANCE_HINTS, default="latency", help="PERFORMANCE_HINT")
STREAMS = Integer(key="openvino.streams", default=0, help="NUM_STREAMS (0: what the performance hint chooses)")


def read_back_precision(compiled: Any) -> str:
    """The inference precision the compiled model really uses, as fp32/bf16/fp16."""
    value = compiled.get_property("INFERENCE_PRECISION_HINT")
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return precision_from_dtype_name(name)


def _cache_files(folder: Path) -> dict[str, tuple[int, int]]:
    if not folder.is_dir():
        return {}
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


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
        return read_back_precision(self.compiled_model)

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
    options = (HINT, STREAMS, CACHE)
    consumes_onnx = True
    shape_aware = True
    runs_quantized_onnx = True
    quantizer = True
    model_files = (".onnx", ".xml")
    triton = TritonTarget("backend", "openvino", "model.onnx")
    distribution = "openvino"
    install_extra = "openvino"
    precisions = ("fp32", "bf16", "fp16")
    description = "OpenVINO CPU plugin (precision hint set and read back)"

    @classmethod
    def available(cls) -> str | None:
        if package_version("openvino") is None:
            return cls.not_installed("OpenVINO")
        if package_version("onnx") is None and package_version("torch") is None:
            return cls.not_installed("onnx (OpenVINO reads the model's ONNX form with it)")
        return None

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        reason = onnx_form_reason(model, cls.name)
        if reason:
            return reason
        if case.precision not in cls.precisions:
            return (
                f"openvino supports {', '.join(cls.precisions)} here; int8 needs a quantized model "
                "(the quantize command), not a precision hint"
            )
        return cpu_precision_reason(case.precision, "OpenVINO")

    def load(self, model: ModelSpec, case: Case) -> Session:
        hint = HINT.value(case)
        streams = STREAMS.value(case)
        use_cache = CACHE.value(case)
        start = time.perf_counter()
        import openvino as ov

        core = ov.Core()
        imported = time.perf_counter()
        capabilities = set(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
        needed = CAPABILITIES.get(case.precision)
        if needed and needed not in capabilities:
            raise BackendError(
                f"the OpenVINO CPU plugin does not list {needed} in OPTIMIZATION_CAPABILITIES on this CPU "
                f"({', '.join(sorted(capabilities))}); use --precision fp32"
            )
        artifact = onnx_for(model)
        try:
            ov_model = core.read_model(str(artifact.path))
            if case.shape_mode == "static":
                ov_model.reshape({name: list(shape) for name, shape in case_shapes(model, case).items()})
        except Exception as exc:
            raise BackendError(f"OpenVINO could not read {model.ref}: {str(exc).strip().splitlines()[0]}") from exc
        config: dict[str, Any] = {
            # Always explicit: the CPU plugin's default on bf16-capable CPUs is bf16.
            "INFERENCE_PRECISION_HINT": PRECISION_HINTS[case.precision],
            "PERFORMANCE_HINT": hint.upper(),
            "INFERENCE_NUM_THREADS": case.threads,
        }
        if streams:
            config["NUM_STREAMS"] = streams
        cache_dir = cache_root() / "openvino"
        before: dict[str, tuple[int, int]] = {}
        if use_cache:
            cache_dir.mkdir(parents=True, exist_ok=True)
            config["CACHE_DIR"] = str(cache_dir)
            before = _cache_files(cache_dir)
        read = time.perf_counter()
        try:
            compiled = core.compile_model(ov_model, "CPU", config)
        except Exception as exc:
            raise BackendError(f"OpenVINO could not compile {model.ref}: {str(exc).strip().splitlines()[0]}") from exc
        compiled_at = time.perf_counter()
        session = OpenVinoSession(compiled, [i.name for i in model.inputs], len(compiled.outputs))
        created = time.perf_counter()
        session.load_phases_s = {
            "import_s": imported - start,
            "convert_s": read - imported,
            "compile_s": compiled_at - read,
            "session_create_s": created - compiled_at,
        }
        session.notes.append(f"onnx: {'cache hit' if artifact.cache_hit else 'built'}")
        if use_cache:
            session.cache_hit = self._loaded_from_cache(compiled, before, _cache_files(cache_dir))
            changed = [n for n, v in _cache_files(cache_dir).items() if n in before and before[n] != v]
            if changed:
                session.notes.append("openvino cache: an existing blob did not load and was rebuilt")
        effective = read_back_precision(compiled)
        session.notes.append(
            f"openvino: INFERENCE_PRECISION_HINT set {PRECISION_HINTS[case.precision]}, read back "
            f"{effective}; PERFORMANCE_HINT {compiled.get_property('PERFORMANCE_HINT')}; "
            f"NUM_STREAMS {compiled.get_property('NUM_STREAMS')}; "
            f"INFERENCE_NUM_THREADS {compiled.get_property('INFERENCE_NUM_THREADS')}; "
            f"{case.shape_mode} shapes; cache {'on' if use_cache else 'off'}"
        )
        return session

    @staticmethod
    def _loaded_from_cache(compiled: Any, before: dict[str, tuple[int, int]], after: dict[str, Any]) -> bool:
        try:
            return bool(compiled.get_property("LOADED_FROM_CACHE"))
        except Exception:
            # Older OpenVINO without the property: a hit writes no new or changed blob.
            return bool(before) and all(before.get(name) == value for name, value in after.items())
