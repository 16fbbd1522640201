"""ONNX Runtime with the CPU execution provider."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from infermeter.backends.base import Backend, Session, package_version
from infermeter.case import Case
from infermeter.errors import BackendError, UsageError
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import Feeds, resolve_shapes
from infermeter.models.spec import ModelSpec

OPT_LEVELS = ("disable", "basic", "extended", "all")


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
    """An `onnxruntime.InferenceSession`; inputs are made contiguous numpy arrays in `prepare`."""

    def __init__(self, session: Any, precision: str) -> None:
        super().__init__()
        self._session = session
        self._precision = precision

    def prepare(self, feeds: Feeds) -> Any:
        return {name: np.ascontiguousarray(value) for name, value in feeds.items()}

    def run(self, prepared: Any) -> Any:
        return self._session.run(None, prepared)

    def effective_precision(self) -> str:
        return self._precision


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime, CPU execution provider (`onnxruntime`).

    Option `onnxruntime.opt_level`: disable | basic | extended | all (default all)."""

    name = "onnxruntime"
    distribution = "onnxruntime"
    description = "ONNX Runtime, CPU execution provider"

    @classmethod
    def available(cls) -> str | None:
        if package_version("onnxruntime") is None and package_version("onnxruntime-gpu") is None:
            return "ONNX Runtime is not installed: pip install onnxruntime"
        return None

    @classmethod
    def version(cls) -> str | None:
        return package_version("onnxruntime") or package_version("onnxruntime-gpu")

    def load(self, model: ModelSpec, case: Case) -> Session:
        start = time.perf_counter()
        import onnxruntime as ort

        imported = time.perf_counter()
        artifact = onnx_for(model)
        converted = time.perf_counter()
        level_name = case.option("onnxruntime.opt_level", "all") or "all"
        if level_name not in OPT_LEVELS:
            raise UsageError(f"onnxruntime.opt_level={level_name!r}: use one of {', '.join(OPT_LEVELS)}")
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
            shapes = resolve_shapes(model.inputs, case.batch, case.input_shapes)
            for spec in model.inputs:
                for axis, dim in enumerate(spec.shape):
                    if isinstance(dim, str):
                        options.add_free_dimension_override_by_name(dim, shapes[spec.name][axis])
        try:
            session = ort.InferenceSession(str(artifact.path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise BackendError(f"ONNX Runtime could not load {model.ref}: {str(exc).strip()}") from exc
        created = time.perf_counter()
        result = OnnxRuntimeSession(session, onnx_graph_precision(str(artifact.path)))
        result.load_phases_s = {
            "import_s": imported - start,
            "convert_s": converted - imported,
            "session_create_s": created - converted,
        }
        result.cache_hit = artifact.cache_hit
        result.notes.append(f"onnx: {'cache hit' if artifact.cache_hit else 'built'}; {artifact.note}".rstrip("; "))
        result.notes.append(f"graph optimization level: {level_name}")
        return result
