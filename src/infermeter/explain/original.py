"""The original ONNX graph every engine's units are mapped back to: its nodes by name, which node makes each
tensor, and which nodes read it. A model with unnamed nodes gets deterministic names (`<OpType>_<index>`) in a
copy, before any engine sees it, so that every engine reports the same names."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

# Units that move or re-lay data without arithmetic, by the engines' names for them (ONNX Runtime's NCHWc
# ReorderInput/ReorderOutput and Memcpy nodes, OpenVINO's Reorder and inserted Convert, TensorRT's reformat layers).
DATA_MOVEMENT_PREFIXES = ("Reorder", "Memcpy", "Reformat", "Copy", "Convert")


def is_data_movement(op_type: str) -> bool:
    """True for a unit that only moves, re-lays or converts data."""
    return op_type.startswith(DATA_MOVEMENT_PREFIXES)


@dataclass
class OriginalGraph:
    """Node names in graph order, their op types, who produces and who consumes each tensor, and each node's
    metadata (the torch exporter's `pkg.torch.onnx.name_scopes`)."""

    names: list[str]
    op_types: dict[str, str]
    _: KW_ONLY  # the rest by keyword
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    producer: dict[str, str] = field(default_factory=dict)
    consumers: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    constants: set[str] = field(default_factory=set)

    def node_for(self, name: str) -> str | None:
        """The original node an engine's name stands for: a node of that name, else the node making a tensor of
        that name (OpenVINO names some layers after their output tensor)."""
        if name in self.op_types:
            return name
        return self.producer.get(name)

    def shape_nodes(self) -> set[str]:
        """The nodes that compute only from shapes and constants (Shape, and what reads only Shape results and
        constants): at static shapes an engine folds them at load, so they run in no unit."""
        found: set[str] = set()
        for node in self.names:  # graph order: a node's makers come first
            made = [self.producer.get(t) for t in self.inputs[node] if t not in self.constants]
            if self.op_types[node] == "Shape" or (made and all(m in found for m in made)):
                found.add(node)
        return found

    def neighbours(self, node: str) -> set[str]:
        """The nodes that read this node's outputs; for a node whose outputs no node reads (a graph output), the
        nodes that make its inputs."""
        found = {c for t in self.outputs[node] for c in self.consumers.get(t, [])}
        return found or {self.producer[t] for t in self.inputs[node] if t in self.producer}


# Past this many nodes a boundary walk has not closed: it maps nothing rather than half the graph.
WALK_LIMIT = 64


def walk_back(original: OriginalGraph, tensors: list[str], stops: set[str], claimed: set[str]) -> tuple[str, ...]:
    """The original nodes between `tensors` and their sources: walk back from the nodes making them, stopping at
    `stops` (tensors), constants, graph inputs and `claimed` nodes (another unit's); () when it does not close
    within WALK_LIMIT nodes."""
    todo, found = list(tensors), []
    while todo:
        tensor = todo.pop()
        maker = original.producer.get(tensor)
        if tensor in stops or maker is None or maker in found or maker in claimed:
            continue
        found.append(maker)
        todo.extend(t for t in original.inputs[maker] if t not in original.constants)
        if len(found) > WALK_LIMIT:
            return ()
    return tuple(found)


def original_graph(model: Any) -> OriginalGraph:
    """The index of an `onnx.ModelProto` (its main graph; subgraphs stay inside their node)."""
    graph = model.graph
    view = OriginalGraph([], {}, inputs={}, outputs={})
    view.constants = {init.name for init in graph.initializer}
    for node in graph.node:
        view.names.append(node.name)
        view.op_types[node.name] = node.op_type
        view.inputs[node.name] = [t for t in node.input if t]
        view.outputs[node.name] = [t for t in node.output if t]
        view.metadata[node.name] = {p.key: p.value for p in node.metadata_props}
        for tensor in node.output:
            view.producer[tensor] = node.name
        for tensor in node.input:
            if tensor:
                view.consumers[tensor].append(node.name)
    return view


def name_nodes(model: Any) -> int:
    """Give every unnamed (or duplicate-named) node of `model` the name `<OpType>_<index>` (index in graph
    order), in place; how many were renamed."""
    seen: set[str] = set()
    renamed = 0
    for index, node in enumerate(model.graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}_{index}"
            renamed += 1
        seen.add(node.name)
    return renamed


def named_copy(path: Path, folder: Path) -> tuple[Path, int]:
    """`path` itself when all its nodes have unique names, else a copy in `folder` with them named
    (`name_nodes`), and how many were renamed."""
    import onnx

    model = onnx.load(str(path))
    renamed = name_nodes(model)
    if not renamed:
        return path, 0
    target = folder / f"{path.stem}.named.onnx"
    onnx.save(model, str(target))
    return target, renamed
