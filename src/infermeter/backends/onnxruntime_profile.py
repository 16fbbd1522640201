"""What ONNX Runtime says about what it ran: the per-layer precision mix of its optimized graph (the build stage's
artifact, where the QDQ pairs are already fused into QLinearConv, MatMulInteger and the like) and its profiler's
per-node kernel times (`SessionOptions.enable_profiling`, a Chrome-trace JSON), turned into the engine-neutral
records of `results.records.int8_run`. Never timed: the mix is read once after loading, the profile in a separate
pass with profiling on."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from infermeter.results.records.int8_run import LayerMix, LayerProfile, LayerTime

# The arithmetic operators, once the fusion and quantization words are taken off their names.
COMPUTE_BASES = ("Conv", "ConvTranspose", "MatMul", "Gemm", "Attention")
# Words of ONNX Runtime's fused and quantized operator names (QLinearConv, MatMulIntegerToFloat, NhwcFusedConv,
# DynamicQuantizeMatMul, QGemm, QAttention), taken off to find the arithmetic underneath.
_FUSION_WORDS = ("QLinear", "DynamicQuantize", "IntegerToFloat", "Integer", "NhwcFused", "Nhwc", "Fused", "QOrdered")
# Operators that compute on 8-bit integers.
INT8_MARKS = ("QLinear", "Integer", "DynamicQuantize", "QGemm", "QAttention", "QOrdered")
QUANTIZE_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")
# The NCHWc layout transformer's reorders (level `all` on x86) and type casts.
REORDER_OPS = ("ReorderInput", "ReorderOutput")
CONVERT_OPS = ("Cast",)
# The profiler's event of a node's kernel (beside its `_fence_before` and `_fence_after`).
KERNEL_SUFFIX = "_kernel_time"
WARMUP_RUNS = 3
TOP_NODES = 5
LISTED_FLOAT_LAYERS = 10


def op_precision(op_type: str) -> str:
    """int8 for an operator that computes on 8-bit integers, else fp32 (the CPU provider's float kernels)."""
    return "int8" if any(mark in op_type for mark in INT8_MARKS) else "fp32"


def is_compute(op_type: str) -> bool:
    """True for an operator that does a model's arithmetic (convolution, matmul, gemm, attention), fused,
    quantized or plain."""
    base = op_type
    for word in _FUSION_WORDS:
        base = base.replace(word, "")
    if base.startswith("Q") and base[1:] in COMPUTE_BASES:
        base = base[1:]
    return base in COMPUTE_BASES


def graph_mix(path: str) -> LayerMix:
    """The compute nodes of the ONNX graph at `path` (an optimized graph ONNX Runtime saved) counted by the
    precision their operator computes in; the names of those left in float."""
    import onnx

    counts: dict[str, int] = {}
    floats: list[str] = []
    for node in onnx.load(path, load_external_data=False).graph.node:
        if not is_compute(node.op_type):
            continue
        precision = op_precision(node.op_type)
        counts[precision] = counts.get(precision, 0) + 1
        if precision != "int8" and len(floats) < LISTED_FLOAT_LAYERS:
            floats.append(node.name or node.op_type)
    return LayerMix(counts, floats)


def profile_session(end_profiling: Callable[[], str], run: Callable[[], object], iterations: int) -> LayerProfile:
    """Run `run()` on a session created with `enable_profiling`: a few warm-up runs, then `iterations` runs; the
    trace `end_profiling()` writes (and this removes) gives each node's kernel time, median over its last
    `iterations` runs (the warm-up's are in the trace too)."""
    for _ in range(WARMUP_RUNS + iterations):
        run()
    trace = Path(end_profiling())
    try:
        events = json.loads(trace.read_text())
    finally:
        trace.unlink(missing_ok=True)
    return profile_from_trace(events, iterations)


def profile_from_trace(events: list[dict[str, object]], iterations: int) -> LayerProfile:
    """The LayerProfile of an ONNX Runtime trace: per node, the median of its last `iterations` kernel times."""
    per_node: dict[str, tuple[str, list[float]]] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith(KERNEL_SUFFIX):
            continue
        args = event.get("args")
        op_type = str(args.get("op_name", "?")) if isinstance(args, dict) else "?"
        entry = per_node.setdefault(name.removesuffix(KERNEL_SUFFIX), (op_type, []))
        entry[1].append(float(event.get("dur", 0)) / 1e3)  # type: ignore[arg-type]
    nodes = [LayerTime(name, op_type, op_precision(op_type), float(np.median(times[-iterations:])))
             for name, (op_type, times) in per_node.items()]  # fmt: skip
    return LayerProfile.of(nodes, iterations, node_kind, TOP_NODES)


# How the profile groups the operators it names (anything else: compute or nothing, by `is_compute`).
_KINDS = {**dict.fromkeys(REORDER_OPS, "reorder"), **dict.fromkeys(CONVERT_OPS, "convert"),
          **dict.fromkeys(QUANTIZE_OPS, "quantize")}  # fmt: skip


def node_kind(node: LayerTime) -> str | None:
    """A profiled node as the profile groups it: reorder, convert, quantize, compute, or None."""
    return _KINDS.get(node.layer_type) or ("compute" if is_compute(node.layer_type) else None)
