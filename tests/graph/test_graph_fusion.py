"""Fusion patterns in small hand-built graphs, and ONNX Runtime's optimizer node counts per level."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graph.onnx_builders import make_model, weight
from infermeter.graph.fusion import find_fusions, ort_optimizer_counts, summarize_fusions
from infermeter.graph.model import graph_view, infer_shapes


def scalar(name: str, value: float) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def patterns(model: onnx.ModelProto) -> dict[str, list[tuple[str, ...]]]:
    found: dict[str, list[tuple[str, ...]]] = {}
    for match in find_fusions(graph_view(infer_shapes(model))):
        found.setdefault(match.pattern, []).append(match.ops)
    return found


def conv_bn_relu() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    inits = [weight("w", (4, 3, 3, 3)), *(weight(k, (4,), 1.0) for k in "sbmv")]
    return make_model(nodes, {"x": (1, 3, 8, 8)}, ["y"], inits)


def test_conv_bn_relu_and_residual_chains() -> None:
    assert patterns(conv_bn_relu()) == {"conv_chain": [("Conv", "BatchNormalization", "Relu")]}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["c", "x"], ["s"]),  # residual: both operands are activations
        helper.make_node("Clip", ["s", "lo", "hi"], ["y"]),
    ]
    model = make_model(nodes, {"x": (1, 4, 8, 8)}, ["y"], [weight("w", (4, 4, 1, 1)), scalar("lo", 0), scalar("hi", 6)])
    assert patterns(model) == {"conv_chain": [("Conv", "Add", "Clip")]}


def test_conv_whose_output_is_read_twice_is_not_fused() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Sigmoid", ["c"], ["s"]),
    ]
    assert patterns(make_model(nodes, {"x": (1, 4, 8, 8)}, ["r", "s"], [weight("w", (4, 4, 1, 1))])) == {}


def transformer_block() -> onnx.ModelProto:
    """Linear + bias, erf GELU, then a LayerNorm written out as primitive ops (as old exporters emit them)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["g0"]),
        helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]),
        helper.make_node("Mul", ["h", "g2"], ["g3"]),
        helper.make_node("Mul", ["g3", "half"], ["g"]),
        helper.make_node("ReduceMean", ["g"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["g", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["normed"]),
        helper.make_node("Mul", ["normed", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["y"]),
    ]
    inits = [
        weight("w", (16, 16)),
        weight("bias", (16,)),
        weight("gamma", (16,), 1.0),
        weight("beta", (16,), 0.0),
        scalar("sqrt2", 1.4142135),
        scalar("one", 1.0),
        scalar("half", 0.5),
        scalar("two", 2.0),
        scalar("eps", 1e-5),
    ]
    return make_model(nodes, {"x": (2, 5, 16)}, ["y"], inits, opset=17)


def test_decomposed_layernorm_gelu_and_bias_chain() -> None:
    found = patterns(transformer_block())
    assert found == {
        "layernorm": [("ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add")],
        "gelu_erf": [("Div", "Erf", "Add", "Mul", "Mul")],
        "matmul_chain": [("MatMul", "Add")],
    }
    summary = summarize_fusions(find_fusions(graph_view(infer_shapes(transformer_block()))))
    assert summary["layernorm"]["nodes_saved"] == 8
    assert summary["gelu_erf"]["count"] == 1


def test_tanh_gelu() -> None:
    nodes = [
        helper.make_node("Pow", ["x", "three"], ["cube"]),
        helper.make_node("Mul", ["cube", "c"], ["cc"]),
        helper.make_node("Add", ["x", "cc"], ["inner"]),
        helper.make_node("Mul", ["inner", "k"], ["arg"]),
        helper.make_node("Tanh", ["arg"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["x", "t1"], ["xt"]),
        helper.make_node("Mul", ["xt", "half"], ["y"]),
    ]
    inits = [scalar("three", 3), scalar("c", 0.044715), scalar("k", 0.79788), scalar("one", 1), scalar("half", 0.5)]
    found = patterns(make_model(nodes, {"x": (2, 8)}, ["y"], inits))
    assert found == {"gelu_tanh": [("Pow", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul")]}


def test_attention_block() -> None:
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["y"]),
    ]
    shapes = {"q": (1, 2, 4, 8), "k": (1, 2, 4, 8), "v": (1, 2, 4, 8), "mask": (1, 1, 4, 4)}
    found = patterns(make_model(nodes, shapes, ["y"], [scalar("scale", 2.83)]))
    assert found == {"attention": [("MatMul", "Div", "Add", "Softmax", "MatMul")]}


def test_ort_optimizer_counts_drop_with_level(tmp_path: Path) -> None:
    path = tmp_path / "cbr.onnx"
    onnx.save(conv_bn_relu(), str(path))
    counts = {c.level: c for c in ort_optimizer_counts(path)}
    assert counts["disable"].node_count == 3
    # Basic folds the BatchNorm into the Conv; extended fuses the Relu too (com.microsoft FusedConv).
    assert counts["basic"].node_count == 2
    assert counts["extended"].node_count == 1
    assert "com.microsoft:FusedConv" in counts["extended"].new_ops
