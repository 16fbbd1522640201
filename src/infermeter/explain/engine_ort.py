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
from infermeter.explain.original import OriginalGraph, is_data_movement, walk_back
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
        # A fused convolution's post-ops: its `activation` attribute, and a fourth input when it adds a residual.
        self.activation = {
            n.name: next((a.s.decode() for a in n.attribute if a.name == "activation"), "") for n in model.graph.node
        }
        self.producer = {t: n for n, ts in self.outputs.items() for t in ts}
        self.consumers: dict[str, list[str]] = {}
        for node, tensors in self.inputs.items():
            for tensor in tensors:
                self.consumers.setdefault(tensor, []).append(node)


# Operators ONNX Runtime inserts to change a layout (a node of this type with a name of its own is layout work).
LAYOUT_OPS = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity")


def moves_data(op_type: str, node: str, original: OriginalGraph) -> bool:
    """True for a node of the optimized graph that only moves data: a reorder or copy, or a layout operator
    ONNX Runtime added (named after no original node)."""
    added = node not in original.op_types and _stem(node, original) is None
    return is_data_movement(op_type) or (op_type in LAYOUT_OPS and added)


def _stem(name: str, original: OriginalGraph) -> str | None:
    """The original node a rewritten node is named after: ONNX Runtime names a fusion `<original>/<Fusion>`
    (`node_MatMul_37/MatMulAddFusion`)."""
    while "/" in name:
        name = name.rsplit("/", 1)[0]
        if name in original.op_types:
            return name
    return None


def _out_tensor(opt: OptimizedGraph, original: OriginalGraph, tensor: str, depth: int = 4) -> str | None:
    """The original tensor an optimized node's output becomes, followed through data-movement nodes."""
    if tensor in original.producer:
        return tensor
    readers = opt.consumers.get(tensor, [])
    if depth and len(readers) == 1 and moves_data(opt.op_types[readers[0]], readers[0], original):
        return next((t for t in (_out_tensor(opt, original, o, depth - 1) for o in opt.outputs[readers[0]]) if t), None)
    return None


def fused_chain(opt: OptimizedGraph, original: OriginalGraph, node: str, tensor: str) -> list[str]:
    """The original nodes a fused convolution runs past the Conv that makes `tensor`: the Add of its residual
    input (when it has a fourth input) and its activation (its `activation` attribute), each taken only when the
    tensor so far flows into it alone."""
    if original.op_types.get(original.producer.get(tensor, "")) != "Conv" or opt.op_types.get(node) != "Conv":
        return []
    wanted = (["Add"] if len(opt.inputs.get(node, [])) > 3 else []) + [opt.activation.get(node) or ""]
    passed: list[str] = []
    for op_type in (w for w in wanted if w):
        readers = original.consumers.get(tensor, [])
        if len(readers) != 1 or original.op_types[readers[0]] != op_type:
            break
        passed.append(readers[0])
        tensor = original.outputs[readers[0]][0]
    return passed


def original_outputs(opt: OptimizedGraph, original: OriginalGraph, node: str) -> list[str]:
    """The original tensors an optimized node makes: its outputs that kept their names (followed through
    data-movement nodes), and the tensor its name comes from (the NCHWc transformer names a node
    `<original output tensor>_nchwc`; for a fused convolution, that of its Conv, followed to the chain's end)."""
    found = [t for t in (_out_tensor(opt, original, o) for o in opt.outputs.get(node, [])) if t]
    for suffix in NAME_SUFFIXES:
        stem = node.split(suffix)[0] if suffix in node else None
        if stem is not None and stem in original.producer:
            chain = fused_chain(opt, original, node, stem)
            end = original.outputs[chain[-1]][0] if chain else stem
            if end not in found:
                found.append(end)
    return found


def _in_tensor(opt: OptimizedGraph, original: OriginalGraph, tensor: str, depth: int = 4) -> str | None:
    """The original tensor an optimized node's input stands for: itself, else (followed back through data
    movement) what the node making it makes in the original graph."""
    if tensor in original.producer or tensor in original.constants or tensor not in opt.producer:
        return tensor
    maker = opt.producer[tensor]
    if depth and moves_data(opt.op_types[maker], maker, original) and opt.inputs[maker]:
        return _in_tensor(opt, original, opt.inputs[maker][0], depth - 1)
    made = original_outputs(opt, original, maker)
    return made[0] if made else None


def anchors(opt: OptimizedGraph | None, original: OriginalGraph, name: str) -> tuple[str, ...]:
    """The original nodes an optimized node names: its own name where it survives (with the post-ops of a fused
    convolution), else the node it is named after (`<node>/<Fusion>`), else the node making the tensor its name
    carries (`<tensor>_nchwc`)."""
    if name in original.op_types:  # a fused convolution keeps its Conv's name
        return (name, *(fused_chain(opt, original, name, original.outputs[name][0]) if opt is not None else ()))
    stem = _stem(name, original)
    if stem is not None:
        return (stem,)
    for suffix in NAME_SUFFIXES:
        node = original.node_for(name.split(suffix)[0]) if suffix in name else None
        if node is not None:
            return (node,)
    return ()


def boundary_nodes(opt: OptimizedGraph, original: OriginalGraph, node: str, claimed: set[str]) -> tuple[str, ...]:
    """The original nodes between an optimized node's input and output tensors: walk back from what it makes (as
    original tensors) to what it reads, stopping at nodes other units name."""
    stops = {t for t in (_in_tensor(opt, original, i) for i in opt.inputs.get(node, [])) if t}
    return walk_back(original, original_outputs(opt, original, node), stops, claimed)


def ort_units(
    events: list[dict[str, Any]], iterations: int, opt: OptimizedGraph | None, original: OriginalGraph
) -> list[Unit]:
    """The units of one profile: every kernel that ran, mapped to original nodes: first the nodes each names
    (`anchors`), then, for a kernel whose name is not an original node's, the nodes inside its boundary that no
    other kernel names. Layout nodes ONNX Runtime added (reorders, its own transposes) map to nothing."""
    times = kernel_times(events, iterations)
    moving = {n for n, (op, _, _) in times.items() if moves_data(op, n, original)}
    named = {n: anchors(opt, original, n) for n in times if n not in moving}
    units = []
    for name, (op_type, provider, time_us) in times.items():
        nodes = named.get(name, ())
        if opt is not None and name in named and name not in original.op_types and name in opt.inputs:
            claimed = {c for other, found in named.items() if other != name for c in found}
            nodes = tuple(dict.fromkeys((*nodes, *boundary_nodes(opt, original, name, claimed))))
        kind = "data_movement" if name in moving else "compute"
        precision = op_precision(op_type)
        kernel = f"{op_type} ({provider.removesuffix('ExecutionProvider')}, {precision})"
        units.append(
            Unit(
                name,
                nodes,
                time_us=time_us,
                kernel=kernel,
                op_type=op_type,
                precision=precision,
                kind=kind,
                provider=provider,
            )
        )
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
