"""Alignment and mapping without engines: the common partition of several engines' units, gap filling, the torch
exporters' scope names, and ONNX Runtime's boundary mapping of a fused node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from explain.builders import conv_bn_relu_model
from infermeter.explain.align import align, fill_gaps
from infermeter.explain.engine_ort import OptimizedGraph, ort_units
from infermeter.explain.engine_ov import recover_unnamed
from infermeter.explain.engine_torch import merged_units, module_of, scope_candidates
from infermeter.explain.original import OriginalGraph, name_nodes, original_graph
from infermeter.explain.records import Unit


def _ort_mapping(opt: OptimizedGraph, original: OriginalGraph) -> dict[str, tuple[str, ...]]:
    """What ort_units maps each node of `opt` to, from a profile where every node ran once."""
    events = [
        {"cat": "Node", "name": f"{name}_kernel_time", "dur": 5, "args": {"op_name": op, "provider": "CPU"}}
        for name, op in opt.op_types.items()
    ]
    return {unit.name: unit.nodes for unit in ort_units(events, 1, opt, original)}


def _unit(name: str, *nodes: str, time_us: float = 1.0) -> Unit:
    return Unit(name, nodes, time_us=time_us, kernel=name, op_type="Op")


def test_blocks_are_unions_of_whole_units_on_every_engine(tmp_path: Path) -> None:
    original = original_graph(onnx.load(str(conv_bn_relu_model(tmp_path / "m.onnx", blocks=2))))
    fused = [_unit("a", "conv0", "bn0", "relu0"), _unit("b", "conv1", "bn1"), _unit("c", "relu1", "pool")]
    split = [_unit(n, n) for n in original.names[:-2]] + [_unit("d", "pool", "flatten")]
    alignment = align({"fused": fused, "split": split}, original)
    assert alignment.blocks == [["conv0", "bn0", "relu0"], ["conv1", "bn1"], ["relu1", "pool", "flatten"]]
    for units in (fused, split):
        for unit in units:  # a unit never straddles two blocks
            assert sum(bool(set(unit.nodes) & set(block)) for block in alignment.blocks) == 1
    assert alignment.coverage("fused", len(original.names)) == 7 / 8  # flatten is in no unit of `fused`


def test_a_renamed_node_joins_the_unit_that_holds_all_its_neighbours(tmp_path: Path) -> None:
    original = original_graph(onnx.load(str(conv_bn_relu_model(tmp_path / "m.onnx", blocks=1))))
    # OpenVINO names a Conv it merged a BatchNormalization into after a Multiply: conv0 is in no unit by name.
    units = fill_gaps([_unit("Multiply_12", "bn0", "relu0"), _unit("pool", "pool"), _unit("flat", "flatten")], original)
    assert set(units[0].nodes) == {"conv0", "bn0", "relu0"}


def test_scopes_of_both_torch_exporters() -> None:
    modules = {"", "layer1", "layer1.0", "layer1.0.conv1", "fc"}
    scripted = scope_candidates("/layer1/layer1.0/conv1/Conv", {})
    assert module_of(scripted, modules) == "layer1.0.conv1"
    assert module_of(scope_candidates("/layer1/layer1.0/Add", {}), modules) == "layer1.0"
    exported = {"pkg.torch.onnx.name_scopes": "['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d']"}
    assert module_of(scope_candidates("node_conv2d", exported), modules) == "layer1.0.conv1"
    assert module_of(scope_candidates("/Flatten", {}), modules) == ""


def test_a_fused_node_maps_back_through_its_boundary_tensors(tmp_path: Path) -> None:
    original = original_graph(onnx.load(str(conv_bn_relu_model(tmp_path / "m.onnx", blocks=1))))
    # What ONNX Runtime's NCHWc transformer saves: a fused Conv named after its output, between reorders.
    nodes = [
        helper.make_node("ReorderInput", ["x"], ["x_nchwc"], name="ReorderInput"),
        helper.make_node("Conv", ["x_nchwc", "w0", "cb0"], ["t"], name="r0_nchwc", domain="com.microsoft.nchwc"),
        helper.make_node("ReorderOutput", ["t"], ["r0"], name="ReorderOutput"),
        helper.make_node("GlobalAveragePool", ["r0"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["y"], name="flatten"),
    ]
    path = tmp_path / "opt.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "o", [], [])), str(path))
    mapping = _ort_mapping(OptimizedGraph(path), original)
    assert set(mapping["r0_nchwc"]) == {"conv0", "bn0", "relu0"}
    assert mapping["pool"] == ("pool",)
    assert mapping["ReorderOutput"] == () and mapping["ReorderInput"] == ()


def test_unnamed_nodes_are_named_by_op_type_and_position(tmp_path: Path) -> None:
    model = onnx.load(str(conv_bn_relu_model(tmp_path / "m.onnx", blocks=1, named=False)))
    assert name_nodes(model) == 5
    assert [n.name for n in model.graph.node] == [
        "Conv_0",
        "BatchNormalization_1",
        "Relu_2",
        "GlobalAveragePool_3",
        "Flatten_4",
    ]
    assert name_nodes(model) == 0


def test_chained_nchwc_nodes_stop_at_each_others_tensors(tmp_path: Path) -> None:
    original = original_graph(onnx.load(str(conv_bn_relu_model(tmp_path / "m.onnx", blocks=2))))
    # Two NCHWc convolutions back to back, the tensor between them never leaving the NCHWc layout: each is
    # named after the original tensor it makes (`r0_nchwc` makes r0).
    nodes = [
        helper.make_node("Conv", ["x", "w0", "cb0"], ["t0"], name="r0_nchwc", domain="com.microsoft.nchwc"),
        helper.make_node("Conv", ["t0", "w1", "cb1"], ["t1"], name="r1_nchwc", domain="com.microsoft.nchwc"),
        helper.make_node("ReorderOutput", ["t1"], ["r1"], name="ReorderOutput"),
    ]
    path = tmp_path / "opt.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "o", [], [])), str(path))
    mapping = _ort_mapping(OptimizedGraph(path), original)
    assert set(mapping["r0_nchwc"]) == {"conv0", "bn0", "relu0"}
    assert set(mapping["r1_nchwc"]) == {"conv1", "bn1", "relu1"}


def test_a_module_the_exporter_folded_joins_the_next_modules_unit() -> None:
    # The exporter folded conv into the BatchNormalization after it: its Conv node sits in `bn`'s scope.
    per_run = {"conv": [10.0, 12.0], "bn": [1.0, 1.0], "relu": [2.0, 2.0], "": [3.0, 3.0]}
    grouped = {"bn": ["node_Conv_1"], "relu": ["node_relu"]}
    types = {"conv": "Conv2d", "bn": "BatchNorm2d", "relu": "ReLU", "": "Net"}
    children = {"": ["conv", "bn", "relu"], "conv": [], "bn": [], "relu": []}
    units = merged_units(per_run, grouped, types, children)
    assert [(u.name, u.nodes, u.time_us) for u in units] == [
        ("conv+bn", ("node_Conv_1",), 12.0),
        ("relu", ("node_relu",), 2.0),
        ("(model)", (), 3.0),
    ]
    assert units[0].kernel == "Conv2d+BatchNorm2d (eager)"
    assert units[0].parts == (("Conv2d", 11.0), ("BatchNorm2d", 1.0))


def test_shape_computations_are_told_apart(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Concat", ["s", "k"], ["dims"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "dims"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(nodes, "g", [], [], [onnx.numpy_helper.from_array(np.array([1], np.int64), "k")])
    assert original_graph(helper.make_model(graph)).shape_nodes() == {"shape", "concat"}


def test_a_unit_with_made_up_names_gets_the_nodes_before_its_named_readers(tmp_path: Path) -> None:
    original = original_graph(onnx.load(str(conv_bn_relu_model(tmp_path / "m.onnx", blocks=2))))
    # OpenVINO's `MVN_35`-style name: nothing in it is an original node; its reader `conv1` is named.
    units = [_unit("conv0", "conv0"), _unit("MVN_35"), _unit("conv1", "conv1", "bn1", "relu1")]
    units[1].kind = units[0].kind = units[2].kind = "compute"
    found = recover_unnamed(units, {"conv0": ["MVN_35"], "MVN_35": ["conv1"]}, original)
    assert set(found[1].nodes) == {"bn0", "relu0"}
