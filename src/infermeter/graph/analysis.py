"""`inspect`'s report: every graph analysis of one model at one set of shapes, as a JSON-ready dict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from infermeter.graph.flops import GraphCost, graph_cost
from infermeter.graph.fusion import find_fusions, ort_optimizer_counts, summarize_fusions
from infermeter.graph.loaded import LoadedGraph, load_graph
from infermeter.graph.memory import MemoryPlan, plan_graph_memory
from infermeter.graph.model import GraphView


def _parameters(view: GraphView) -> dict[str, Any]:
    """Parameter count and bytes, in total and per dtype."""
    param_dtypes: Counter[str] = Counter()
    for name in view.weights:
        info = view.tensor(name)
        if info is not None:
            param_dtypes[info.dtype] += info.nbytes or 0
    return {"count": view.parameter_count(), "bytes": view.parameter_bytes(), "bytes_by_dtype": dict(param_dtypes)}


def _cost_sections(cost: GraphCost) -> dict[str, Any]:
    """The work: totals, what went uncounted, the per-operator sums and every node's cost."""
    return {
        "totals": {
            "macs": cost.macs,
            "flops": cost.flops,
            "bytes_moved": cost.bytes_moved,
            "arithmetic_intensity": cost.arithmetic_intensity,
            "lower_bound": cost.lower_bound,
        },
        "uncounted": {"nodes": len(cost.uncounted), "ops": cost.uncounted_ops()},
        "by_op": cost.by_op(),
        "nodes": [
            {
                "name": n.name,
                "op": n.op_type,
                "kind": n.kind,
                "macs": n.macs,
                "flops": n.flops,
                "bytes_moved": n.bytes_moved,
                "arithmetic_intensity": n.arithmetic_intensity,
                "estimated": n.estimated,
                "counted": n.counted,
            }
            for n in cost.nodes
        ],
    }


def _memory_section(view: GraphView, plan: MemoryPlan) -> dict[str, Any]:
    """The activation memory plan: naive against planned bytes, and the node where the live set peaks."""
    peak_node = view.nodes[plan.peak_step] if view.nodes else None
    return {
        "naive_bytes": plan.naive_bytes,
        "planned_bytes": plan.planned_bytes,
        "live_peak_bytes": plan.live_peak_bytes,
        "saving": 1 - plan.planned_bytes / plan.naive_bytes if plan.naive_bytes else 0.0,
        "peak_node": (
            {"index": peak_node.index, "name": peak_node.name or f"node#{peak_node.index}", "op": peak_node.op_type}
            if peak_node is not None
            else None
        ),
        "live_at_peak": [{"name": name, "bytes": view.nbytes(name)} for name in plan.live_at_peak],
        "tensors_planned": len(plan.placements),
    }


def _ort_optimizer(loaded: LoadedGraph, notes: list[str]) -> dict[str, Any] | None:
    """ONNX Runtime's node counts per optimization level, or None with the reason appended to `notes`."""
    node_count = len(loaded.view.nodes)
    try:
        levels = ort_optimizer_counts(loaded.path)
    except ImportError:
        from infermeter.core.extras import install_line

        notes.append(f"onnxruntime is not installed: optimizer node counts skipped ({install_line('onnxruntime')})")
        return None
    except Exception as exc:  # ORT refusing a model is a finding, not a crash of the whole report
        notes.append(f"onnxruntime could not optimize this model: {type(exc).__name__}: {exc}")
        return None
    return {
        "nodes_before": node_count,
        "levels": [{**asdict(level), "nodes_removed": node_count - level.node_count} for level in levels],
    }


def inspect_loaded(loaded: LoadedGraph, ort_levels: bool = True) -> dict[str, Any]:
    """The full report for a loaded graph (see `inspect_model`)."""
    view = loaded.view
    fusions = find_fusions(view)
    report: dict[str, Any] = {
        "model": loaded.spec.ref,
        "onnx_path": str(loaded.path),
        "input_shapes": {k: list(v) for k, v in loaded.input_shapes.items()},
        "node_count": len(view.nodes),
        "op_histogram": dict(Counter(n.op_type for n in view.nodes).most_common()),
        "parameters": _parameters(view),
        **_cost_sections(graph_cost(view)),
        "memory": _memory_section(view, plan_graph_memory(view)),
        "fusion": {
            "patterns": summarize_fusions(fusions),
            "nodes_saved": sum(m.nodes_saved for m in fusions),
            "matches": [{"pattern": m.pattern, "ops": list(m.ops), "nodes": list(m.nodes)} for m in fusions],
        },
        "notes": list(loaded.notes),
    }
    if ort_levels:
        optimizer = _ort_optimizer(loaded, report["notes"])
        if optimizer is not None:
            report["onnxruntime_optimizer"] = optimizer
    return report


def inspect_model(
    ref: str,
    batch: int = 1,
    overrides: Sequence[tuple[str, tuple[int, ...]]] = (),
    ort_levels: bool = True,
) -> dict[str, Any]:
    """Operator histogram, parameters, per-node and total FLOPs / bytes moved / arithmetic intensity, the
    activation memory plan (naive vs planned, peak node), fusion opportunities and ONNX Runtime's optimizer
    node counts per level, for MODEL at `batch` (and `overrides` for other symbolic dims)."""
    return inspect_loaded(load_graph(ref, batch, overrides), ort_levels)
