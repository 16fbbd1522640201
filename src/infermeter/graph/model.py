"""A model's ONNX graph with every shape known: symbolic dims fixed to the batch/input shapes, then ONNX shape
inference. `GraphView` is the plain-Python picture of that graph the analyses work on (no onnx types inside)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.errors import ModelError

if TYPE_CHECKING:
    import onnx

    from infermeter.models.spec import ModelSpec

# ONNX TensorProto element type -> (name, bytes per element). Sub-byte types round up to one byte.
ONNX_ELEM_TYPES: dict[int, tuple[str, int]] = {
    1: ("float32", 4),
    2: ("uint8", 1),
    3: ("int8", 1),
    4: ("uint16", 2),
    5: ("int16", 2),
    6: ("int32", 4),
    7: ("int64", 8),
    9: ("bool", 1),
    10: ("float16", 2),
    11: ("float64", 8),
    12: ("uint32", 4),
    13: ("uint64", 8),
    16: ("bfloat16", 2),
    17: ("float8e4m3fn", 1),
    18: ("float8e4m3fnuz", 1),
    19: ("float8e5m2", 1),
    20: ("float8e5m2fnuz", 1),
    21: ("uint4", 1),
    22: ("int4", 1),
}
# Initializers up to this many elements keep their values (exponents, epsilons, scales seen by pattern checks).
_SMALL_CONSTANT = 64


@dataclass(frozen=True)
class TensorInfo:
    """A value in the graph: shape (None when inference could not tell) and element type."""

    name: str
    shape: tuple[int, ...] | None
    dtype: str
    itemsize: int

    @property
    def numel(self) -> int | None:
        """Element count, or None when the shape is unknown."""
        return None if self.shape is None else math.prod(self.shape)

    @property
    def nbytes(self) -> int | None:
        """Size in bytes, or None when the shape is unknown."""
        numel = self.numel
        return None if numel is None else numel * self.itemsize


@dataclass(frozen=True)
class NodeInfo:
    """One node: `inputs` keep their positions ('' marks an omitted optional input); `implicit_inputs` are
    outer-scope values read by its subgraphs (If/Loop/Scan bodies, which are not analysed themselves)."""

    index: int
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    implicit_inputs: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """`name (Op)` for messages; the index stands in for a missing name."""
        return f"{self.name or f'node#{self.index}'} ({self.op_type})"


@dataclass
class GraphView:
    """The graph as the analyses see it. `weights` are initializers and Constant outputs (not activations)."""

    nodes: list[NodeInfo]
    tensors: dict[str, TensorInfo]
    weights: set[str]
    graph_inputs: list[str]
    graph_outputs: list[str]
    small_constants: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def tensor(self, name: str) -> TensorInfo | None:
        """The TensorInfo of `name`, or None for an unknown or omitted value."""
        return self.tensors.get(name) if name else None

    def nbytes(self, name: str) -> int:
        """Bytes of `name`; 0 when unknown (its nodes are `uncounted_nodes`)."""
        info = self.tensor(name)
        return (info.nbytes or 0) if info is not None else 0

    def consumers(self) -> dict[str, list[NodeInfo]]:
        """Value name -> nodes reading it (explicitly or from a subgraph), in graph order."""
        out: dict[str, list[NodeInfo]] = {}
        for node in self.nodes:
            for name in dict.fromkeys((*node.inputs, *node.implicit_inputs)):
                if name:
                    out.setdefault(name, []).append(node)
        return out

    def producers(self) -> dict[str, NodeInfo]:
        """Value name -> the node writing it."""
        return {out: node for node in self.nodes for out in node.outputs if out}

    def unknown_shapes(self) -> list[str]:
        """Activations whose shape is still unknown (after the recoveries of `graph.shape_capture`)."""
        return [n for node in self.nodes for n in node.outputs if n and self.tensors.get(n, _UNKNOWN).shape is None]

    def uncounted_nodes(self) -> list[NodeInfo]:
        """Nodes that read or write a value of unknown shape: their FLOPs and bytes count as 0, so every total is
        a lower bound while any is left."""
        unknown = set(self.unknown_shapes())
        return [node for node in self.nodes if any(n in unknown for n in (*node.inputs, *node.outputs) if n)]

    def parameter_count(self) -> int:
        """Elements in all weights (initializers and Constant nodes)."""
        return sum(self.tensors[w].numel or 0 for w in self.weights if w in self.tensors)

    def parameter_bytes(self) -> int:
        """Bytes of all weights."""
        return sum(self.nbytes(w) for w in self.weights)


_UNKNOWN = TensorInfo("", None, "unknown", 0)


def _value_info(value: onnx.ValueInfoProto) -> TensorInfo:
    tensor_type = value.type.tensor_type
    dtype, itemsize = ONNX_ELEM_TYPES.get(tensor_type.elem_type, ("unknown", 0))
    shape: tuple[int, ...] | None = None
    if tensor_type.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim]
        shape = tuple(dims) if all(d >= 0 for d in dims) else None
    return TensorInfo(value.name, shape, dtype, itemsize)


def graph_view(model: onnx.ModelProto) -> GraphView:
    """The plain-Python view of a (shape-inferred) model's main graph."""
    from onnx import AttributeProto, helper, numpy_helper

    graph = model.graph
    tensors: dict[str, TensorInfo] = {}
    small: dict[str, np.ndarray] = {}
    weights: set[str] = set()
    for init in graph.initializer:
        dtype, itemsize = ONNX_ELEM_TYPES.get(init.data_type, ("unknown", 0))
        tensors[init.name] = TensorInfo(init.name, tuple(int(d) for d in init.dims), dtype, itemsize)
        weights.add(init.name)
        if math.prod(init.dims) <= _SMALL_CONSTANT and init.data_location != 1:
            small[init.name] = numpy_helper.to_array(init)
    for value in (*graph.input, *graph.value_info, *graph.output):
        if value.name not in weights:
            tensors[value.name] = _value_info(value)
    nodes: list[NodeInfo] = []
    for index, node in enumerate(graph.node):
        attrs: dict[str, Any] = {}
        implicit: list[str] = []
        for attr in node.attribute:
            if attr.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                subgraphs = [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs)
                for sub in subgraphs:
                    implicit.extend(_outer_references(sub))
            elif attr.type != AttributeProto.TENSOR:
                attrs[attr.name] = helper.get_attribute_value(attr)
        if node.op_type == "Constant" and node.output:
            weights.add(node.output[0])
            for attr in node.attribute:
                if attr.type == AttributeProto.TENSOR:
                    array = numpy_helper.to_array(attr.t)
                    if array.size <= _SMALL_CONSTANT:
                        small[node.output[0]] = array
        nodes.append(
            NodeInfo(
                index,
                node.name,
                node.op_type,
                node.domain,
                tuple(node.input),
                tuple(node.output),
                attrs,
                tuple(dict.fromkeys(n for n in implicit if n in tensors or n in weights)),
            )
        )
    return GraphView(
        nodes=nodes,
        tensors=tensors,
        weights=weights,
        graph_inputs=[v.name for v in graph.input if v.name not in weights],
        graph_outputs=[v.name for v in graph.output],
        small_constants=small,
    )


def _outer_references(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph reads that it does not define itself (values captured from the outer scope)."""
    from onnx import AttributeProto

    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    refs: list[str] = []
    for node in graph.node:
        for name in node.input:
            if name and name not in defined:
                refs.append(name)
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                refs.extend(r for r in _outer_references(attr.g) if r not in defined)
        defined.update(node.output)
    return refs


def fix_input_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> None:
    """Replace the (symbolic) dims of the graph inputs named in `shapes` by those sizes, in place."""
    for value in model.graph.input:
        shape = shapes.get(value.name)
        if shape is None:
            continue
        dims = value.type.tensor_type.shape.dim
        del dims[:]
        for size in shape:
            dims.add().dim_value = int(size)


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX shape inference with data propagation (Shape->Gather->Reshape chains resolve to numbers)."""
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as exc:  # a malformed graph: say so instead of a traceback from onnx internals
        raise ModelError(f"ONNX shape inference failed on this model ({type(exc).__name__}: {exc})") from exc


@dataclass
class LoadedGraph:
    """A model resolved for analysis: the ONNX file it came from, the concrete input shapes and the view."""

    spec: ModelSpec
    path: Path
    input_shapes: dict[str, tuple[int, ...]]
    model: onnx.ModelProto
    view: GraphView
    notes: list[str] = field(default_factory=list)


def load_graph(
    ref: str | ModelSpec,
    batch: int = 1,
    overrides: Sequence[tuple[str, tuple[int, ...]]] = (),
) -> LoadedGraph:
    """Resolve MODEL (zoo name, .onnx path or a ModelSpec), get its ONNX form (cached export for zoo models),
    fix the symbolic dims to `batch`/`overrides`, and infer every shape."""
    try:
        import onnx
    except ImportError as exc:
        from infermeter.extras import install_line

        raise ModelError(f"graph analysis needs the onnx package: {install_line('onnxruntime')}") from exc
    from infermeter.models.convert import onnx_for
    from infermeter.models.dim_defaults import plan_shapes
    from infermeter.models.spec import resolve_model

    spec = resolve_model(ref) if isinstance(ref, str) else ref
    artifact = onnx_for(spec)
    # A free dim nobody set: its stated default, said in the notes (FLOPs are at those shapes).
    shapes, sizing = plan_shapes(spec.inputs, batch, overrides)
    try:
        model = onnx.load(str(artifact.path))
    except Exception as exc:
        raise ModelError(f"{artifact.path} is not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    fix_input_shapes(model, shapes)
    from infermeter.graph.shape_capture import recover_shapes
    from infermeter.models.inputs import generate_feeds

    recovered = recover_shapes(infer_shapes(model), lambda: generate_feeds(spec.inputs, shapes, 1)[0])
    view = graph_view(recovered.model)
    notes = ([artifact.note] if artifact.note else []) + ([sizing] if sizing else []) + recovered.notes
    uncounted = view.uncounted_nodes()
    if uncounted:
        ops = Counter(node.op_type for node in uncounted).most_common()
        notes.append(
            f"{len(uncounted)} nodes uncounted ({', '.join(f'{op} ×{n}' for op, n in ops)}): their shapes stay "
            "unknown, so FLOPs, bytes and % peak are lower bounds"
        )
    view.notes.extend(notes)
    return LoadedGraph(spec, artifact.path, shapes, recovered.model, view, notes)
