"""FLOP and byte counts: single ops computed by hand, and the published totals of ResNet-18 and MobileNetV2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from graph.onnx_builders import make_model, weight
from infermeter.graph.flops import graph_cost, node_cost
from infermeter.graph.loaded import load_graph
from infermeter.graph.model import fix_input_shapes, graph_view, infer_shapes


def costs_of(model: onnx.ModelProto):  # type: ignore[no-untyped-def]
    view = graph_view(infer_shapes(model))
    return view, [node_cost(view, node) for node in view.nodes]


def test_conv_with_bias_by_hand() -> None:
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    _, [cost] = costs_of(make_model([node], {"x": (1, 3, 8, 8)}, ["y"], [weight("w", (4, 3, 3, 3)), weight("b", (4,))]))
    # 4 output channels x 8 x 8 positions, each 3 input channels x 3 x 3 taps.
    assert cost.macs == 4 * 8 * 8 * 3 * 3 * 3 == 6912
    assert cost.flops == 2 * 6912 + 4 * 8 * 8  # plus one add per output for the bias
    assert cost.activation_bytes_in == 3 * 8 * 8 * 4
    assert cost.weight_bytes == (4 * 3 * 3 * 3 + 4) * 4
    assert cost.bytes_out == 4 * 8 * 8 * 4
    assert cost.bytes_moved == 768 + 448 + 1024
    assert cost.arithmetic_intensity == pytest.approx(cost.flops / 2240)


def test_depthwise_and_grouped_conv_by_hand() -> None:
    depthwise = helper.make_node("Conv", ["x", "w"], ["y"], group=8, kernel_shape=[3, 3])
    _, [cost] = costs_of(make_model([depthwise], {"x": (2, 8, 10, 10)}, ["y"], [weight("w", (8, 1, 3, 3))]))
    # Each of the 2 x 8 x 8 x 8 outputs sees one channel's 3 x 3 window: no sum over input channels.
    assert cost.macs == 2 * 8 * 8 * 8 * 9
    assert cost.flops == 2 * cost.macs
    grouped = helper.make_node("Conv", ["x", "w"], ["y"], group=2, kernel_shape=[1, 1])
    _, [cost] = costs_of(make_model([grouped], {"x": (1, 8, 6, 6)}, ["y"], [weight("w", (4, 4, 1, 1))]))
    assert cost.macs == 4 * 6 * 6 * (8 // 2)


def test_gemm_transposed_with_bias_by_hand() -> None:
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
    _, [cost] = costs_of(make_model([node], {"a": (5, 7)}, ["y"], [weight("b", (3, 7)), weight("c", (3,))]))
    assert cost.macs == 5 * 3 * 7
    assert cost.flops == 2 * 105 + 5 * 3


def test_batched_broadcast_matmul_by_hand() -> None:
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    _, [cost] = costs_of(make_model([node], {"a": (2, 1, 4, 6), "b": (3, 6, 5)}, ["y"]))
    # Broadcast batch 2 x 3, each a 4x6 by 6x5 product.
    assert cost.macs == 2 * 3 * 4 * 5 * 6
    assert cost.activation_bytes_in == (2 * 4 * 6 + 3 * 6 * 5) * 4
    assert cost.weight_bytes == 0


def test_pooling_elementwise_and_data_movement_by_hand() -> None:
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3]),
        helper.make_node("GlobalAveragePool", ["x"], ["g"]),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]),
        helper.make_node("BatchNormalization", ["x", "s", "bb", "mean", "var"], ["n"]),
        helper.make_node("Softmax", ["x"], ["sm"], axis=-1),
    ]
    inits = [weight(n, (2,), 1.0) for n in ("s", "bb", "mean", "var")]
    _, costs = costs_of(make_model(nodes, {"x": (1, 2, 8, 8)}, ["m", "a", "g", "r", "t", "n", "sm"], inits))
    by_op = {c.op_type: c for c in costs}
    assert by_op["MaxPool"].flops == (2 * 4 * 4) * 4
    assert by_op["AveragePool"].flops == (2 * 6 * 6) * 9
    assert by_op["GlobalAveragePool"].flops == 2 * 8 * 8
    assert by_op["Relu"].flops == 128 and by_op["Relu"].kind == "elementwise"
    assert by_op["Transpose"].flops == 0 and by_op["Transpose"].bytes_moved == 2 * 128 * 4
    assert by_op["BatchNormalization"].flops == 2 * 128
    assert by_op["Softmax"].flops == 5 * 128
    assert all(c.macs == 0 for c in costs)


def test_unknown_op_gets_estimated_default() -> None:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")
    _, [cost] = costs_of(make_model([node], {"x": (1, 1, 4, 4)}, ["y"], [scales]))
    assert cost.estimated and cost.kind == "other"
    assert cost.flops == 1 * 1 * 8 * 8  # one per output element


def test_symbolic_batch_is_fixed_and_scales_linearly(tmp_path: Path) -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])
    model = make_model([node], {"x": ("N", 3, 8, 8)}, ["y"], [weight("w", (4, 3, 3, 3))])
    path = tmp_path / "conv.onnx"
    onnx.save(model, str(path))
    one = graph_cost(load_graph(str(path), batch=1).view)
    five = load_graph(str(path), batch=5)
    assert five.input_shapes == {"x": (5, 3, 8, 8)}
    assert graph_cost(five.view).macs == 5 * one.macs == 5 * 4 * 6 * 6 * 27
    fix_input_shapes(model, {"x": (2, 3, 8, 8)})
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [2, 3, 8, 8]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "published_gmacs"), [("resnet18", 1.82), ("mobilenet_v2", 0.30)])
def test_zoo_models_match_published_macs(model: str, published_gmacs: float) -> None:
    # He et al. 2016 (ResNet-18: 1.8 GFLOPs, i.e. multiply-adds; 1.82 G in torchvision's table) and
    # Sandler et al. 2018 (MobileNetV2 1.0 at 224: 300 M multiply-adds).
    loaded = load_graph(model, batch=1)
    cost = graph_cost(loaded.view)
    assert cost.macs / 1e9 == pytest.approx(published_gmacs, rel=0.02)
    assert cost.flops >= 2 * cost.macs
    assert not loaded.view.unknown_shapes()
