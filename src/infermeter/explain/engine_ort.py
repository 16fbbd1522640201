"""ONNX Runtime's profile for explain: a session created like the backend's (same threads, optimization level
and shapes) with `enable_profiling` on and its optimized graph saved (`optimized_model_filepath`); each node's
kernel time and provider from the profile JSON (through `backends.onnxruntime_profile`), and each optimized node
mapped back to original nodes: by name where the name survives, else by the tensors at its boundary."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.backends.onnxruntime_profile import KERNEL_SUFFIX, WARMUP_RUNS, op_precision
from infermeter.explain.original import OriginalGraph, is_data_movement
from infermeter.explain.records import Unit

# Suffixes ONNX Runtime's optimizers add to the name of a node they rewrite (NCHWc, fusions, quantized forms).
NAME_SUFFIXES = ("_nchwc", "_fusion", "_fused", "_quant", "_token")


def kernel_times(events: list[dict[str, Any]], iterations: int) -> dict[str, tuple[str, str, float]]:
    """Per optimized node: (op type, provider, median kernel µs over its last `iterations` runs)."""
    per_node: dict[str, tuple[str, str, list[float]]] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith(KERNEL_SUFFIX):
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        assert isinstance(args, dict)
        entry = per_node.setdefault(
            name.removesuffix(KERNEL_SUFFIX), (str(args.get("op_name", "?")), str(args.get("provider", "?")), [])
        )
        entry[2].append(float(event.get("dur", 0)))
    return {k: (op, prov, float(np.median(t[-iterations:]))) for k, (op, prov, t) in per_node.items()}


class OptimizedGraph:
    """The graph ONNX Runtime saved: each node's inputs and outputs, and who makes and reads each tensor."""

    def __init__(self, path: Path) -> None:
        import onnx

        model = onnx.load(str(path), load_external_data=False)
        self.inputs = {n.name: [t for t in n.input if t] for n in model.graph.node}
        self.outputs = {n.name: [t for t in n.output if t] for n in model.graph.node}
        self.op_types = {n.name: n.op_type for n in model.graph.node}
        self.producer = {t: n for n, ts in self.outputs.items() for t in ts}
        self.consumers: dict[str, list[str]] = {}
        for node, tensors in self.inputs.items():
            for tensor in tensors:
                self.consumers.setdefault(tensor, []).append(node)


def _out_tensor(opt: OptimizedGraph, original: OriginalGraph, tensor: str, depth: int = 4) -> str | None:
    """The original tensor an optimized node's output becomes, followed through data-movement nodes."""
    if tensor in original.producer:
        return tensor
    readers = opt.consumers.get(tensor, [])
    if depth and len(readers) == 1 and is_data_movement(opt.op_types[readers[0]]):
        return next((t for t in (_out_tensor(opt, original, o, depth - 1) for o in opt.outputs[readers[0]]) if t), None)
    return None


def original_outputs(opt: OptimizedGraph, original: OriginalGraph, node: str) -> list[str]:
    """The original tensors an optimized node makes: its outputs that kept their names (followed through
    data-movement nodes), and the tensor its name comes from (the NCHWc transformer names a node
    `<original output tensor>_nchwc`)."""
    found = [t for t in (_out_tensor(opt, original, o) for o in opt.outputs.get(node, [])) if t]
    for suffix in NAME_SUFFIXES:
        stem = node.split(suffix)[0] if suffix in node else None
        if stem is not None and stem in original.producer and stem not in found:
            found.append(stem)
    return found


def _in_tensor(opt: OptimizedGraph, original: OriginalGraph, tensor: str, depth: int = 4) -> str | None:
    """The original tensor an optimized node's input stands for: itself, else (followed back through data
    movement) what the node making it makes in the original graph."""
    if tensor in original.producer or tensor in original.constants or tensor not in opt.producer:
        return tensor
    maker = opt.producer[tensor]
    if depth and is_data_movement(opt.op_types[maker]) and opt.inputs[maker]:
        return _in_tensor(opt, original, opt.inputs[maker][0], depth - 1)
    made = original_outputs(opt, original, maker)
    return made[0] if made else None


def boundary_nodes(opt: OptimizedGraph, original: OriginalGraph, node: str) -> tuple[str, ...]:
    """The original nodes between an optimized node's input and output tensors: walk back from the makers of its
    outputs (as original tensors) and stop at its inputs, at constants and at graph inputs."""
    stops = {t for t in (_in_tensor(opt, original, i) for i in opt.inputs.get(node, [])) if t}
    todo = original_outputs(opt, original, node)
    found: list[str] = []
    while todo:
        tensor = todo.pop()
        maker = original.producer.get(tensor)
        if tensor in stops or maker is None or maker in found:
            continue
        found.append(maker)
        todo.extend(t for t in original.inputs[maker] if t not in original.constants)
        if len(found) > 64:  # a boundary that does not close: no mapping rather than half the graph
            return ()
    return tuple(found)


def map_node(opt: OptimizedGraph | None, original: OriginalGraph, name: str) -> tuple[str, ...]:
    """The original nodes an optimized node stands for: its own name where it survives, else the original
    nodes inside its boundary in the optimized graph, else the name before an optimizer's suffix (a node or the
    tensor it makes); () when none finds any. Data-movement nodes ONNX Runtime added map to nothing."""
    if name in original.op_types:
        return (name,)
    if opt is not None and name in opt.inputs and not is_data_movement(opt.op_types[name]):
        found = boundary_nodes(opt, original, name)
        if found:
            return found
    for suffix in NAME_SUFFIXES:
        node = original.node_for(name.split(suffix)[0]) if suffix in name else None
        if node is not None:
            return (node,)
    return ()


def ort_units(
    events: list[dict[str, Any]], iterations: int, opt: OptimizedGraph | None, original: OriginalGraph
) -> list[Unit]:
    """The units of one profile: every kernel that ran, mapped to original nodes."""
    units = []
    for name, (op_type, provider, time_us) in kernel_times(events, iterations).items():
        kind = "data_movement" if is_data_movement(op_type) else "compute"
        precision = op_precision(op_type)
        kernel = f"{op_type} ({provider.removesuffix('ExecutionProvider')}, {precision})"
        nodes = map_node(opt, original, name)
        units.append(Unit(name, nodes, time_us, kernel, op_type, precision, kind, provider=provider))
    return units


def profile_ort(session_factory: Any, feeds: dict[str, Any], iterations: int, original: OriginalGraph) -> list[Unit]:
    """Create a profiling session through `session_factory(options_hook)` (the hook sets profiling and the saved
    graph on the backend's SessionOptions), run it, and read its units."""
    with tempfile.TemporaryDirectory(prefix="infermeter-explain-ort-") as folder:
        saved = Path(folder) / "optimized.onnx"

        def hook(options: Any) -> None:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(folder) / "profile")
            options.optimized_model_filepath = str(saved)
            options.log_severity_level = 3  # the hardware-specific-graph warning of saving a level-all graph

        session = session_factory(hook)
        for _ in range(WARMUP_RUNS + iterations):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
        opt = OptimizedGraph(saved) if saved.is_file() else None
        return ort_units(events, iterations, opt, original)
