"""Localizing a divergence: the first ONNX node whose output leaves the tolerance, and the worst nodes.

Both graphs get every node output marked as a graph output (the way Polygraphy's `--onnx-outputs mark all`
does). The reference is the model's own ONNX run by ONNX Runtime with graph optimizations disabled, in fp32;
the candidate is the ONNX the backend was served (the same file, or the one given with --candidate-onnx),
loaded by the candidate backend itself through its ordinary `load` (so any ONNX-based backend works: ONNX
Runtime, OpenVINO, ...). Tensors are matched by name and compared in the reference graph's node order, which
ONNX requires to be topological.

Caveat, as with every tool that marks outputs: a tensor that is now a graph output can no longer be fused
away, so the candidate may compute the marked graph with fewer fusions than the one that was measured.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.backends.registry import get_backend
from infermeter.core.case import Case
from infermeter.core.errors import InfermeterError, ModelError, describe_exception
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import Feeds
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.parity import OutputMetrics, Tolerance, badness, compare_output, output_failure
from infermeter.parity.run import load_and_run, reference_case

# Ops whose outputs are not computations worth comparing (constants are compared through their consumers).
_SKIPPED_OPS = {"Constant"}


@dataclass(frozen=True)
class NodeTensor:
    """An output tensor of an ONNX node: its name, the node's name and op type, and the node's position."""

    tensor: str
    node: str
    op_type: str
    index: int


def expose_intermediates(source: Path, target: Path) -> list[NodeTensor]:
    """Write `source` to `target` with every node output also a graph output; returns them in node order.

    Types come from ONNX shape inference where it can tell; otherwise the output is declared by name only.
    """
    import onnx

    try:
        model = onnx.load(str(source))
    except Exception as exc:
        raise ModelError(f"{source} is not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a help, not a requirement: untyped outputs still run
        inferred = model
    graph = inferred.graph
    typed = {vi.name: vi for vi in [*graph.value_info, *graph.output, *graph.input]}
    existing = {out.name for out in model.graph.output}
    tensors: list[NodeTensor] = []
    for index, node in enumerate(model.graph.node):
        if node.op_type in _SKIPPED_OPS:
            continue
        node_name = node.name or f"{node.op_type}_{index}"
        for name in node.output:
            if not name:
                continue
            tensors.append(NodeTensor(name, node_name, node.op_type, index))
            if name in existing:
                continue
            value_info = onnx.ValueInfoProto()
            if name in typed:
                value_info.CopyFrom(typed[name])
            else:
                value_info.name = name
            model.graph.output.append(value_info)
            existing.add(name)
    try:
        onnx.save(model, str(target))
    except Exception as exc:
        raise ModelError(f"could not write the marked copy of {source}: {exc}") from exc
    return tensors


def _without_cache(case: Case) -> Case:
    return replace(case, options=tuple(sorted({**dict(case.options), "cache": "off"}.items())))


def _outputs_by_name(spec: ModelSpec, case: Case, feeds: Feeds) -> dict[str, np.ndarray]:
    outputs, _ = load_and_run(spec, case, [feeds])
    return dict(zip(spec.output_names, outputs[0], strict=False))


def _node_entry(tensor: NodeTensor, metrics: OutputMetrics, reason: str | None) -> dict[str, Any]:
    return {
        "node": tensor.node,
        "op_type": tensor.op_type,
        "tensor": tensor.tensor,
        "index": tensor.index,
        "max_abs_err": metrics.max_abs_err,
        "scaled_err": metrics.max_abs_err / metrics.scale,
        "cosine": metrics.cosine,
        "worst_ratio": metrics.worst_ratio,
        "reason": reason,
    }


def compare_intermediates(
    tensors: Sequence[NodeTensor],
    reference: dict[str, np.ndarray],
    candidate: dict[str, np.ndarray],
    tolerance: Tolerance,
    top_k: int = 5,
) -> dict[str, Any]:
    """The first tensor (in `tensors` order) out of `tolerance`, the `top_k` worst, and counts."""
    first: dict[str, Any] | None = None
    scored: list[tuple[float, dict[str, Any]]] = []
    unmatched = 0
    for tensor in tensors:
        if tensor.tensor not in reference or tensor.tensor not in candidate:
            unmatched += 1
            continue
        metrics = compare_output(tensor.tensor, reference[tensor.tensor], candidate[tensor.tensor], tolerance)
        reason = output_failure(metrics, tolerance)
        entry = _node_entry(tensor, metrics, reason)
        if reason is not None and first is None:
            first = entry
        scored.append((badness(metrics), entry))
    scored.sort(key=lambda pair: -pair[0])
    worst = [entry for score, entry in scored[:top_k] if score > 0]
    compared = len(scored)
    if first is not None:
        status = "localized"
        reason = f"first divergent node: {first['node']} ({first['op_type']}), tensor {first['tensor']}"
    else:
        status = "clean"
        reason = (
            f"all {compared} intermediate tensors are within tolerance of the reference ONNX run; the divergence "
            "lies outside the ONNX graph (between the torch model and its export, or in how the backend runs the "
            "graph without marked outputs)"
        )
    return {"status": status, "reason": reason, "first": first, "worst": worst, "compared": compared,
            "unmatched": unmatched}  # fmt: skip


def localize(
    spec: ModelSpec,
    case: Case,
    feeds: Feeds,
    tolerance: Tolerance,
    candidate_onnx: Path | None = None,
    top_k: int = 5,
) -> dict[str, Any]:
    """Localize where `case.backend` diverges from the reference ONNX run on `feeds` (see the module docstring).

    Never raises for the backend's failures: the result's `status` is `localized`, `clean`, `unsupported`
    (the backend does not load ONNX) or `error`, with a `reason`.
    """
    try:
        reference_onnx = Path(spec.path) if spec.kind == "onnx" and spec.path else onnx_for(spec).path
    except InfermeterError as exc:
        return {"status": "error", "reason": f"no ONNX form of {spec.ref}: {exc}"}
    served = candidate_onnx or reference_onnx
    result: dict[str, Any] = {"reference_onnx": str(reference_onnx), "candidate_onnx": str(served)}
    with tempfile.TemporaryDirectory(prefix="infermeter-localize-") as folder:
        try:
            tensors = expose_intermediates(reference_onnx, Path(folder) / "reference.onnx")
            expose_intermediates(served, Path(folder) / "candidate.onnx")
            marked_reference = resolve_model(str(Path(folder) / "reference.onnx"))
            marked_candidate = resolve_model(str(Path(folder) / "candidate.onnx"))
        except InfermeterError as exc:
            return {**result, "status": "error", "reason": str(exc)}
        backend = get_backend(case.backend)
        unsupported = backend.available() or backend.unsupported_reason(marked_candidate, case)
        if unsupported:
            return {**result, "status": "unsupported", "reason": f"{case.backend} cannot load ONNX: {unsupported}"}
        # The marked graphs are temporary files: nothing of them belongs in a backend's artifact cache.
        reference_run = _without_cache(reference_case(case, "onnxruntime"))
        candidate_run = _without_cache(case)
        try:
            expected = _outputs_by_name(marked_reference, reference_run, feeds)
        except Exception as exc:
            return {**result, "status": "error", "reason": f"the reference ONNX run failed: {describe_exception(exc)}"}
        try:
            got = _outputs_by_name(marked_candidate, candidate_run, feeds)
        except Exception as exc:
            return {
                **result,
                "status": "error",
                "reason": f"{case.backend} failed on the marked graph: {describe_exception(exc)}",
            }
    return {**result, **compare_intermediates(tensors, expected, got, tolerance, top_k)}
