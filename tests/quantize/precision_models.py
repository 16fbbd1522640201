"""Tiny ONNX classifiers with a LayerNorm over large activations (values ~1e3, so x² ~1e6 overflows FP16's
65504): written out as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div, as older exporters wrote it, or as the fused
`LayerNormalization` operator. Built with onnx.helper; node names are fixed so tests can name them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DIM, CLASSES = 64, 10
# The nodes that see the variance (~1e6): what FP16 cannot hold.
VARIANCE_NODES = ("pow", "var", "add_eps", "sqrt")


def layernorm_classifier(path: Path, fused: bool = False, gain: float = 150.0) -> Path:
    """x (batch, 64) → MatMul (weights × `gain`) → LayerNorm → Relu → MatMul → 10 class scores."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal((DIM, DIM)) * gain).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((DIM, CLASSES)) * 0.3).astype(np.float32), "w2"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
        numpy_helper.from_array(np.ones(DIM, np.float32), "scale"),
    ]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1")]
    if fused:
        nodes.append(helper.make_node("LayerNormalization", ["h", "scale"], ["n"], name="layernorm", axis=-1))
    else:
        nodes += [
            helper.make_node("ReduceMean", ["h"], ["mean"], name="mean", axes=[-1]),
            helper.make_node("Sub", ["h", "mean"], ["centred"], name="centre"),
            helper.make_node("Pow", ["centred", "two"], ["square"], name="pow"),
            helper.make_node("ReduceMean", ["square"], ["variance"], name="var", axes=[-1]),
            helper.make_node("Add", ["variance", "eps"], ["var_eps"], name="add_eps"),
            helper.make_node("Sqrt", ["var_eps"], ["std"], name="sqrt"),
            helper.make_node("Div", ["centred", "std"], ["n"], name="normalize"),
        ]
    nodes += [
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["logits"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "layernorm_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", DIM])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
