"""LiteRT (formerly TensorFlow Lite) running `.tflite` models, through `ai_edge_litert.interpreter`."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from infermeter.backends._common import case_shapes
from infermeter.backends.base import Backend, Session, package_version
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, engine_message
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec
from infermeter.models.tflite_spec import tflite_precision
from infermeter.results.artifact import Artifact, Phase


class TFLiteSession(Session):
    """A LiteRT interpreter with tensors allocated for the case's shapes; `run` sets inputs and invokes."""

    def __init__(self, interpreter: Any, input_names: list[str]) -> None:
        super().__init__()
        self.interpreter = interpreter
        details = {d["name"]: d for d in interpreter.get_input_details()}
        self._inputs = [(name, details[name]["index"], details[name]["dtype"]) for name in input_names]
        self._outputs = [d["index"] for d in interpreter.get_output_details()]
        self._precision = tflite_precision(interpreter.get_tensor_details())
        self._shapes = {index: tuple(d["shape"]) for d in interpreter.get_input_details() for index in [d["index"]]}

    def prepare(self, feeds: Feeds) -> Any:
        return [(index, np.ascontiguousarray(feeds[name], dtype=dtype)) for name, index, dtype in self._inputs]

    def run(self, prepared: Any) -> Any:
        interpreter = self.interpreter
        if any(self._shapes[index] != value.shape for index, value in prepared):
            # A new shape (dynamic mode): LiteRT must resize and re-plan its arena, a real cost of the shape change.
            for index, value in prepared:
                interpreter.resize_tensor_input(index, list(value.shape), strict=False)
                self._shapes[index] = value.shape
            interpreter.allocate_tensors()
        for index, value in prepared:
            interpreter.set_tensor(index, value)
        interpreter.invoke()
        return self._outputs

    def outputs_to_numpy(self, outputs: Any) -> list[np.ndarray]:
        return [np.array(self.interpreter.get_tensor(index)) for index in outputs]

    def effective_precision(self) -> str:
        return self._precision


class TFLiteBackend(Backend):
    """LiteRT / TFLite (`tflite`): runs `.tflite` model files on the CPU (XNNPACK), `case.threads` threads."""

    name = "tflite"
    distribution = "ai-edge-litert"
    install_extra = "tflite"
    precisions = ("fp32", "int8")
    description = "LiteRT (TFLite) interpreter, .tflite models"
    model_files = (".tflite",)
    # The parity reference of a .tflite file: the file's own runtime (OpenVINO reads it too, as a second engine).
    reference_options: ClassVar[tuple[tuple[str, str], ...] | None] = ()

    @classmethod
    def available(cls) -> str | None:
        if package_version("ai-edge-litert") is None:
            return cls.not_installed("LiteRT")
        return None

    @classmethod
    def unsupported_reason(cls, model: ModelSpec, case: Case) -> str | None:
        if model.kind != "tflite":
            return (
                f"the tflite backend runs .tflite files and {model.ref} is a {model.kind} model; "
                "pass a .tflite file (infermeter does not convert to TFLite)"
            )
        if case.streams > 1:
            return "a LiteRT interpreter is not thread-safe: --streams > 1 is not supported by the tflite backend"
        return super().unsupported_reason(model, case)

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        assert model.path is not None
        start = time.perf_counter()
        from ai_edge_litert.interpreter import Interpreter

        imported = time.perf_counter()
        try:
            interpreter = Interpreter(model_path=model.path, num_threads=case.threads)
            # Static and dynamic alike: LiteRT plans memory for concrete shapes, so resize to the case's.
            shapes = case_shapes(model, case)
            for detail in interpreter.get_input_details():
                if tuple(detail["shape"]) != shapes[detail["name"]]:
                    interpreter.resize_tensor_input(detail["index"], list(shapes[detail["name"]]), strict=False)
            interpreter.allocate_tensors()
        except Exception as exc:
            raise BackendError(f"LiteRT could not load {model.ref}: {engine_message(exc)}") from exc
        created = time.perf_counter()
        session = TFLiteSession(interpreter, [i.name for i in model.inputs])
        session.load_phases_s = {Phase.IMPORT: imported - start, Phase.SESSION_CREATE: created - imported}
        session.notes.append(f"LiteRT interpreter, {case.threads} thread(s)")
        if case.shape_mode == "dynamic":
            session.notes.append("LiteRT resizes inputs and re-plans memory per shape (allocate_tensors)")
        return session
