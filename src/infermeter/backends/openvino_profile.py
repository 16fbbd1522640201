"""What OpenVINO says about what it ran: the per-layer precision mix of a compiled model (its runtime model's
`layerType` / `runtimePrecision`) and per-node performance counters (`PERF_COUNT`, `get_profiling_info`), turned
into the engine-neutral records of `results.records.int8_run`. Never timed: the mix is read once after loading, the
counters in a separate pass with profiling on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from infermeter.results.records.int8_run import LayerMix, LayerProfile, LayerTime

# Layer types (runtime model and profiling names, as prefixes) that do the arithmetic: what INT8 is for.
COMPUTE_TYPES = ("Convolution", "GroupConvolution", "Deconvolution", "FullyConnected", "MatMul", "Gemm")
# How many of the slowest nodes a profile keeps, and how many float layer names a mix lists.
TOP_NODES = 5
LISTED_FLOAT_LAYERS = 10
# Untimed runs before the counters are read.
WARMUP_RUNS = 3
# Name parts of fused subgraphs that are quantize/dequantize operations.
QUANTIZE_NAME_MARKS = ("fq_", "QuantizeLinear")


def precision_word(text: str) -> str:
    """An OpenVINO precision spelling (`u8`, `i8`, `f32`, `bf16`, or an exec type's suffix as in
    `brgconv_avx512_amx_I8`, `jit_avx512_f32`) as int8/fp32/bf16/fp16, else the lowered text."""
    word = text.rsplit("_", 1)[-1].lower()
    table = {"i8": "int8", "u8": "int8", "f32": "fp32", "fp32": "fp32", "bf16": "bf16", "f16": "fp16", "fp16": "fp16"}
    return table.get(word, word)


def is_compute(layer_type: str) -> bool:
    """True for a layer that does a model's arithmetic (convolution, matmul, fully connected)."""
    return layer_type.startswith(COMPUTE_TYPES)


def runtime_mix(compiled: Any, listed: int | None = LISTED_FLOAT_LAYERS) -> LayerMix:
    """The compute layers of `compiled` (an `openvino.CompiledModel`) counted by the precision the CPU plugin runs
    each in, from its runtime model; the names of those that run in float (the first `listed`; None: all)."""
    counts: dict[str, int] = defaultdict(int)
    floats: list[str] = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        layer_type = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        if not is_compute(layer_type):
            continue
        precision = precision_word(info["runtimePrecision"].astype(str)) if "runtimePrecision" in info else "?"
        counts[precision] += 1
        if precision != "int8" and (listed is None or len(floats) < listed):
            floats.append(op.get_friendly_name())
    return LayerMix(dict(counts), floats)


def profile_request(request: Any, run: Callable[[], object], iterations: int) -> LayerProfile:
    """Run `run()` on an infer request compiled with PERF_COUNT on: a few warm-up runs (a first run repacks weights
    and would dominate), then `iterations` runs whose per-node counters make the profile (median ms per node).
    Nodes that did not execute (fused away) are left out."""
    for _ in range(WARMUP_RUNS):
        run()
    per_node: dict[str, tuple[str, str, list[float]]] = {}
    for _ in range(iterations):
        run()
        for info in request.get_profiling_info():
            if str(info.status).endswith(".EXECUTED"):
                entry = per_node.setdefault(info.node_name, (info.node_type, info.exec_type, []))
                entry[2].append(info.real_time.total_seconds() * 1e3)
    nodes = [LayerTime(name, kind, precision_word(exec_type), float(np.median(times)))
             for name, (kind, exec_type, times) in per_node.items()]  # fmt: skip
    return LayerProfile.of(nodes, iterations, node_kind, TOP_NODES)


def node_kind(node: LayerTime) -> str | None:
    """A profiled node as the profile groups it: reorder, convert, quantize, compute, or None."""
    if node.layer_type in ("Reorder", "Convert"):
        return node.layer_type.lower()
    if is_quantize(node):
        return "quantize"
    return "compute" if is_compute(node.layer_type) else None


def is_quantize(node: LayerTime) -> bool:
    """A quantize/dequantize node the plugin could not fuse into its neighbours: FakeQuantize, or a fused
    subgraph made of one (NNCF names them `.../fq_output_0`, `fq_weights`; ONNX's are `QuantizeLinear` and
    `DequantizeLinear`)."""
    if node.layer_type == "FakeQuantize":
        return True
    return node.layer_type == "Subgraph" and any(m in node.name for m in QUANTIZE_NAME_MARKS)
