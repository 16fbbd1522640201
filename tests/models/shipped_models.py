"""Tiny models built in code that look like what third-party packages ship (issue 29): an INT8 QDQ graph made by
ONNX Runtime's own quantizer, a detector whose export baked a dummy shape in, a tf2onnx input named with a colon,
a speech model with a control vector beside its batched inputs, and a graph whose constants really fix a dim."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _save(graph: object, path: Path) -> str:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def float_mlp(path: Path) -> str:
    """x [batch, 16] -> MatMul, Relu, MatMul -> y [batch, 10], float weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "W2"], ["y"]),
    ]
    weights = [
        numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "W1"),
        numpy_helper.from_array(rng.standard_normal((32, 10)).astype(np.float32), "W2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        weights,
    )
    return _save(graph, path)


def qdq_mlp(path: Path) -> str:
    """`float_mlp` quantized by ONNX Runtime's static QDQ quantizer (what teams ship as an INT8 .onnx)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    source = float_mlp(path.with_name(path.stem + ".float.onnx"))
    rng = np.random.default_rng(1)

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter([{"x": rng.standard_normal((1, 16)).astype(np.float32)} for _ in range(8)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    quantize_static(source, str(path), Reader(), quant_format=QuantFormat.QDQ)
    return str(path)


def baked_detector(path: Path, weights_as_inputs: bool = False) -> str:
    """images [10, 3, 32, 32] (the export's dummy shape) -> Conv, GlobalAveragePool, Flatten -> out [10, 4]:
    nothing in the graph fixes the size, so it runs at [1, 3, 48, 64] once the dims are rewritten.
    `weights_as_inputs`: the weight listed among the graph's inputs too, as old exporters (CenterFace's) wrote."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["images", "Wc"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["p"]),
        helper.make_node("Flatten", ["p"], ["out"]),
    ]
    weight_input = [helper.make_tensor_value_info("Wc", TensorProto.FLOAT, [4, 3, 3, 3])] if weights_as_inputs else []
    graph = helper.make_graph(
        nodes,
        "detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [10, 3, 32, 32]), *weight_input],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [10, 4])],
        [numpy_helper.from_array(weight, "Wc")],
    )
    graph = onnx.shape_inference.infer_shapes(onnx.helper.make_model(graph)).graph  # stale shapes, as exporters write
    return _save(graph, path)


def constant_reshape(path: Path) -> str:
    """images [10, 3, 4, 4] -> Reshape to the constant [10, 48] -> MatMul: the graph's constants fix the batch."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["images", "shape"], ["r"]), helper.make_node("MatMul", ["r", "W"], ["out"])],
        "fixed",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [10, 3, 4, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [10, 2])],
        [
            numpy_helper.from_array(np.array([10, 48], dtype=np.int64), "shape"),
            numpy_helper.from_array(np.ones((48, 2), dtype=np.float32), "W"),
        ],
    )
    return _save(graph, path)


COLON_NAME = "serving_default_input_2:0"


def colon_named(path: Path) -> str:
    """One input named as tf2onnx names them, `serving_default_input_2:0` [unk__1, unk__2, 1] -> Relu."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", [COLON_NAME], ["y"])],
        "colon",
        [helper.make_tensor_value_info(COLON_NAME, TensorProto.FLOAT, ["unk__1", "unk__2", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__1", "unk__2", 1])],
    )
    return _save(graph, path)


def control_vector_tts(path: Path) -> str:
    """A text-to-speech-like model: `input` int64 [batch, phonemes], `input_lengths` int64 [batch] and `scales`
    float [3] (three scalars that steer it, not a batch): output [batch, 8] = mean(embed(input)) * sum(scales) *
    input_lengths, so each input's value shows in the output."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Gather", ["emb", "input"], ["e"]),
        helper.make_node("ReduceSum", ["scales"], ["s"], keepdims=1),
        helper.make_node("Mul", ["e", "s"], ["es"]),
        helper.make_node("ReduceMean", ["es"], ["m"], axes=[1], keepdims=0),
        helper.make_node("Cast", ["input_lengths"], ["lengths"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["lengths", "axis"], ["lengths2"]),
        helper.make_node("Mul", ["m", "lengths2"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tts",
        [
            helper.make_tensor_value_info("input", TensorProto.INT64, ["batch", "phonemes"]),
            helper.make_tensor_value_info("input_lengths", TensorProto.INT64, ["batch"]),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 8])],
        [
            numpy_helper.from_array(np.random.default_rng(3).standard_normal((100, 8)).astype(np.float32), "emb"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axis"),
        ],
    )
    return _save(graph, path)
