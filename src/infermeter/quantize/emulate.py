"""FP16 and BF16 judged on an engine that computes in FP32: emulation on the ONNX graph, the range pre-pass, and
ONNX Runtime's mixed FP16 graph.

ONNX Runtime's CPU provider runs an FP16 graph by casting to FP32 around its kernels (its profiler shows float32
MatMuls), so running the converted graph cannot judge FP16 accuracy: a LayerNorm that overflows in real FP16
passes there. Emulation can: a Cast to FP16 (or BF16) and back after every float node output, float initializers
rounded the same way (clipped to ±65504 for FP16, as the converters clip them), graph optimizations off so that
no fusion removes a rounding. That is FP16 storage with FP32 accumulation, the numerics of GPU FP16 kernels. A
node kept in FP32 is simply not wrapped (and its own weights are not rounded).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.models.samples import SampleSet
from infermeter.quantize.fallback.search import Layer

FP16_MAX = 65504.0
# Beyond this magnitude an out-of-range value is a mask constant (a stand-in for -inf, e.g. finfo.min), which
# FP16 conversion clips to -65504 with the same meaning: not a reason to keep a layer in FP32.
MASK_MAGNITUDE = 1e30
# Node types that are not layers: they compute nothing a precision could break.
NOT_LAYERS = ("Constant",)
FLOAT = 1
TARGET_TYPES = {"fp16": 10, "bf16": 16}


def named_model(source: Path, target: Path) -> Path:
    """`source` saved at `target` with every node named (`op_type_index` where the exporter left none), so that
    keep-sets, block lists and reports all name the same nodes."""
    import onnx

    model = onnx.load(str(source))
    seen: set[str] = set()
    for index, node in enumerate(model.graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}_{index}"
        seen.add(node.name)
    onnx.save(model, str(target))
    return target


@functools.lru_cache(maxsize=4)
def _loaded(path: str, mtime_ns: int) -> tuple[bytes, frozenset[str]]:
    """A graph file's bytes and its float tensors, read and shape-inferred once (a search evaluates the same
    graph dozens of times; MiniLM's shape inference alone takes seconds)."""
    import onnx

    model = onnx.load(path)
    return model.SerializeToString(), frozenset(_infer_floats(model))


def _load(path: Path) -> tuple[Any, frozenset[str]]:
    import onnx

    data, floats = _loaded(str(path), path.stat().st_mtime_ns)
    return onnx.load_from_string(data), floats


def _infer_floats(model: Any) -> set[str]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    names = {v.name for v in (*graph.value_info, *graph.output, *graph.input) if v.type.tensor_type.elem_type == FLOAT}
    return names | {init.name for init in graph.initializer if init.data_type == FLOAT}


def graph_layers(model_path: Path) -> list[Layer]:
    """The nodes with a float output, in the graph's (topological) order: what the search may keep in FP32."""

    model, floats = _load(model_path)
    return [
        Layer(node.name, node.op_type, index)
        for index, node in enumerate(model.graph.node)
        if node.op_type not in NOT_LAYERS and any(out in floats for out in node.output)
    ]


def _round(values: np.ndarray, precision: str) -> np.ndarray:
    if precision == "fp16":
        return np.clip(values, -FP16_MAX, FP16_MAX).astype(np.float16).astype(np.float32)
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16  # round to nearest even on the 16 high bits
    return rounded.astype(np.uint32).view(np.float32)


def emulated(model_path: Path, precision: str, keep: Iterable[str] = ()) -> Any:
    """The graph at `model_path` with `precision` (fp16/bf16) emulated everywhere but the nodes `keep`."""
    from onnx import helper, numpy_helper

    model, floats = _load(model_path)
    graph, kept, to = model.graph, set(keep), TARGET_TYPES[precision]
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for init in graph.initializer:
        users = consumers.get(init.name, [])
        if init.data_type == FLOAT and users and not all(user.name in kept for user in users):
            init.CopyFrom(numpy_helper.from_array(_round(numpy_helper.to_array(init), precision), init.name))
    nodes = []
    graph_inputs = {i.name for i in graph.input} - {init.name for init in graph.initializer}
    for name in sorted(graph_inputs & floats):  # a reduced-precision engine takes its inputs in that precision
        nodes += _cast_pair(helper, name, f"{name}__emulated", to)
        for user in consumers.get(name, []):
            user.input[:] = [f"{name}__emulated" if i == name else i for i in user.input]
    for node in list(graph.node):
        if node.name in kept:
            nodes += [node, *_round_for_reduced_users(helper, node, floats, consumers, kept, to)]
            continue
        casts = []
        for position, out in enumerate(node.output):
            if out in floats:
                node.output[position] = f"{out}__fp32"
                casts += _cast_pair(helper, f"{out}__fp32", out, to)
        nodes += [node, *casts]
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _round_for_reduced_users(
    helper: Any, node: Any, floats: frozenset[str], consumers: dict[str, list[Any]], kept: set[str], to: int
) -> list[Any]:
    """A kept node's FP32 outputs rounded for the consumers that are not kept: a reduced-precision layer reads
    its inputs in that precision (in a real mixed graph a Cast sits there, and an out-of-range value overflows)."""
    casts = []
    for out in node.output:
        users = [user for user in consumers.get(out, []) if user.name not in kept]
        if out not in floats or not users:
            continue
        casts += _cast_pair(helper, out, f"{out}__reduced", to)
        for user in users:
            user.input[:] = [f"{out}__reduced" if i == out else i for i in user.input]
    return casts


def _cast_pair(helper: Any, source: str, target: str, to: int) -> list[Any]:
    low = f"{target}__low"
    return [
        helper.make_node("Cast", [source], [low], to=to, name=f"{low}__cast"),
        helper.make_node("Cast", [low], [target], to=FLOAT, name=f"{target}__cast_back"),
    ]


def emulation_session(model: Any, threads: int = 1) -> Any:
    """An ONNX Runtime CPU session over an emulated graph, graph optimizations off (a fusion would remove casts)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def range_outliers(model_path: Path, samples: SampleSet, limit: float = FP16_MAX, count: int = 16) -> list[str]:
    """The range pre-pass: one FP32 run over the first `count` samples with every float intermediate as an
    output; the nodes that write or read a value beyond `limit` (mask constants excepted), in graph order."""
    import onnx

    model, floats = _load(model_path)
    listed = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out in node.output:
            if out in floats and node.op_type not in NOT_LAYERS and out not in listed:
                model.graph.output.append(onnx.helper.make_tensor_value_info(out, FLOAT, None))
    session = emulation_session(model)
    names = [o.name for o in session.get_outputs()]
    beyond: set[str] = set()
    for feeds in samples.head(count).batches(1):
        values = dict(zip(names, session.run(names, feeds), strict=True)) | feeds
        beyond |= {name for name, value in values.items() if name not in beyond and _out_of_range(value, limit)}
    # A node that writes an out-of-range value, or reads one (its input would overflow on the cast to FP16).
    return [
        node.name
        for node in model.graph.node
        if node.op_type not in NOT_LAYERS and any(t in beyond for t in (*node.input, *node.output) if t in floats)
    ]


def _out_of_range(value: Any, limit: float) -> bool:
    magnitude = np.abs(np.asarray(value, dtype=np.float64))
    beyond = magnitude[np.isfinite(magnitude) & (magnitude > limit)]
    return bool(beyond.size) and float(beyond.min()) < MASK_MAGNITUDE


def write_mixed_fp16(model_path: Path, keep: Iterable[str], target: Path) -> Path:
    """ONNX Runtime's FP16 graph with the nodes `keep` left in FP32 and FP32 inputs and outputs
    (`onnxruntime.transformers.float16.convert_float_to_float16`, node_block_list, keep_io_types)."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(model_path))
    mixed = convert_float_to_float16(model, keep_io_types=True, node_block_list=sorted(keep))
    _fold_round_trips(mixed.graph)  # (the converter appends its casts at the end: ONNX Runtime sorts on load)
    onnx.save(mixed, str(target))
    return target


def _fold_round_trips(graph: Any) -> None:
    """Remove the FP32→FP16→FP32 round trips the converter puts between two blocked nodes: it casts every
    blocked node's output to FP16 and back even when its consumer is blocked too, so a variance kept in FP32
    still overflowed between Pow and ReduceMean. The FP32 consumer then reads the FP32 value itself."""
    producers = {out: node for node in graph.node for out in node.output}
    to_of = {node.name: node.attribute[0].i for node in graph.node if node.op_type == "Cast"}
    replaced: dict[str, str] = {}
    for node in graph.node:
        source = producers.get(node.input[0]) if node.op_type == "Cast" and node.input else None
        if source is None or source.op_type != "Cast" or to_of[node.name] != FLOAT or to_of[source.name] != 10:
            continue
        replaced[node.output[0]] = source.input[0]
    if not replaced:
        return
    for node in graph.node:
        node.input[:] = [replaced.get(name, name) for name in node.input]
    outputs = {o.name for o in graph.output}
    used = {name for node in graph.node for name in node.input} | outputs
    dead = [node for node in graph.node if node.op_type == "Cast" and not any(out in used for out in node.output)]
    for node in dead:
        graph.node.remove(node)
