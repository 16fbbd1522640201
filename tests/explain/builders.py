"""Small ONNX models built in code for the explain tests: one with a planted expensive node among tiny ones, one
with a Conv+BatchNormalization+Relu chain (fused by some engines and not by others), and one with unnamed nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)
PLANTED = "planted_matmul"


def _const(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _save(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], shape: list[int], path: Path) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def planted_model(path: Path, width: int = 512) -> Path:
    """Tiny element-wise ops around one MatMul of [16, width] by [width, 4·width]: that MatMul does almost all
    of the arithmetic, so its block must rank first on every engine."""
    nodes = [
        helper.make_node("Add", ["x", "b0"], ["a0"], name="add0"),
        helper.make_node("Relu", ["a0"], ["a1"], name="relu0"),
        helper.make_node("Mul", ["a1", "s0"], ["a2"], name="mul0"),
        helper.make_node("MatMul", ["a2", "W"], ["m"], name=PLANTED),
        helper.make_node("Sigmoid", ["m"], ["g"], name="sigmoid0"),
        helper.make_node("ReduceMean", ["g"], ["y"], name="mean0", keepdims=1),
    ]
    inits = [_const("b0", (width,)), _const("s0", (width,)), _const("W", (width, 4 * width))]
    return _save(nodes, inits, [16, width], path)


def conv_bn_relu_model(path: Path, channels: int = 16, blocks: int = 3, named: bool = True) -> Path:
    """`blocks` Conv → BatchNormalization → Relu chains, then a global average pool and a flatten."""
    nodes, inits, source, width = [], [], "x", 3
    for i in range(blocks):
        inits += [_const(f"w{i}", (channels, width, 3, 3)), _const(f"cb{i}", (channels,))]
        inits += [
            numpy_helper.from_array(np.abs(RNG.standard_normal(channels)).astype(np.float32) + 0.5, f"{k}{i}")
            for k in ("g", "v")
        ]
        inits += [_const(f"beta{i}", (channels,)), _const(f"mu{i}", (channels,))]
        nodes += [
            helper.make_node("Conv", [source, f"w{i}", f"cb{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
            helper.make_node(
                "BatchNormalization", [f"c{i}", f"g{i}", f"beta{i}", f"mu{i}", f"v{i}"], [f"n{i}"], name=f"bn{i}"
            ),
            helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}"),
        ]
        source, width = f"r{i}", channels
    nodes += [
        helper.make_node("GlobalAveragePool", [source], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["y"], name="flatten"),
    ]
    if not named:
        for node in nodes:
            node.name = ""
    return _save(nodes, inits, [1, 3, 32, 32], path)
