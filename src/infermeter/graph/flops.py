"""FLOPs and bytes moved per node of a shape-inferred graph.

Conventions (stated so that figures can be checked by hand):
- Conv/ConvTranspose/Gemm/MatMul (and their quantized and ORT-fused forms): FLOPs = 2 x MACs, plus one FLOP per
  output element for a bias. Published model figures ("ResNet-18: 1.82 GMACs") count exactly these MACs.
- Element-wise ops: 1 FLOP per output element (transcendentals included). Normalization: BatchNormalization 2,
  Layer/Instance/Group normalization 7, RMS normalization 4 per element. Softmax/LogSoftmax 5 per element.
- Pooling: output elements x kernel size (global pooling and reductions: input elements).
- Data movement (Reshape, Transpose, Gather, Concat, Cast, ...): 0 FLOPs.
- Anything else: 1 FLOP per output element, marked `estimated`.
- Bytes moved: every activation input read + every weight read + every output written, once per node (Shape and
  Size read metadata only). This is the unfused traffic; fusion removes the round trips between fused nodes.
- A node whose shapes stay unknown (`GraphView.uncounted_nodes`, after `graph.shape_capture`'s recoveries) is not
  `counted`: its figures are 0 and every total is a lower bound (`GraphCost.lower_bound`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import KW_ONLY, dataclass

from infermeter.graph.model import GraphView, NodeInfo
from infermeter.graph.op_classes import (
    CONV_WEIGHT_INDEX,
    DATA_MOVEMENT,
    ELEMENTWISE,
    GLOBAL_POOLS,
    MATMUL_OPERANDS,
    NORM_FLOPS_PER_ELEMENT,
    POOLS,
    REDUCE_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
)


@dataclass(frozen=True)
class NodeCost:
    """What one node computes and moves. `kind` groups ops for summaries; `estimated` marks the default rule;
    `counted` is False when the node's shapes are unknown (its figures are then 0, not its cost)."""

    index: int
    name: str
    _: KW_ONLY  # the rest by keyword
    op_type: str
    kind: str
    macs: int
    flops: int
    activation_bytes_in: int
    weight_bytes: int
    bytes_out: int
    estimated: bool = False
    counted: bool = True

    @property
    def bytes_moved(self) -> int:
        """Inputs read + weights read + outputs written."""
        return self.activation_bytes_in + self.weight_bytes + self.bytes_out

    @property
    def arithmetic_intensity(self) -> float:
        """FLOP per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0


@dataclass(frozen=True)
class GraphCost:
    """Per-node costs and their totals."""

    nodes: list[NodeCost]

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the conv/matmul-like nodes."""
        return sum(n.macs for n in self.nodes)

    @property
    def flops(self) -> int:
        """All FLOPs (2 x MACs plus the element-wise, normalization, pooling... work)."""
        return sum(n.flops for n in self.nodes)

    @property
    def bytes_moved(self) -> int:
        """Unfused memory traffic summed over nodes."""
        return sum(n.bytes_moved for n in self.nodes)

    @property
    def arithmetic_intensity(self) -> float:
        """Total FLOPs per total byte moved."""
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0

    @property
    def uncounted(self) -> list[NodeCost]:
        """The nodes whose shapes stayed unknown: what the totals leave out."""
        return [n for n in self.nodes if not n.counted]

    @property
    def lower_bound(self) -> bool:
        """True when some node is uncounted, so the totals (and any % of peak from them) are lower bounds."""
        return any(not n.counted for n in self.nodes)

    def uncounted_ops(self) -> dict[str, int]:
        """op_type -> how many of its nodes are uncounted, most first."""
        return dict(Counter(n.op_type for n in self.uncounted).most_common())

    def by_op(self) -> dict[str, dict[str, int]]:
        """op_type -> {count, macs, flops, bytes_moved}, heaviest FLOPs first."""
        table: dict[str, dict[str, int]] = defaultdict(lambda: {"count": 0, "macs": 0, "flops": 0, "bytes_moved": 0})
        for node in self.nodes:
            row = table[node.op_type]
            row["count"] += 1
            row["macs"] += node.macs
            row["flops"] += node.flops
            row["bytes_moved"] += node.bytes_moved
        return dict(sorted(table.items(), key=lambda kv: (-kv[1]["flops"], kv[0])))


def _numel(view: GraphView, name: str) -> int:
    info = view.tensor(name)
    return (info.numel or 0) if info is not None else 0


def _shape(view: GraphView, name: str) -> tuple[int, ...] | None:
    info = view.tensor(name)
    return info.shape if info is not None else None


def _input(node: NodeInfo, index: int) -> str:
    return node.inputs[index] if index < len(node.inputs) else ""


def _conv_macs(view: GraphView, node: NodeInfo) -> int:
    weight = _shape(view, _input(node, CONV_WEIGHT_INDEX[node.op_type]))
    if not weight or len(weight) < 2:
        return 0
    # Each output element of a (grouped) conv sums C/group x kernel products: exactly prod(W.shape[1:]).
    return _numel(view, node.outputs[0]) * math.prod(weight[1:])


def _conv_transpose_macs(view: GraphView, node: NodeInfo) -> int:
    weight = _shape(view, _input(node, 1))
    if not weight or len(weight) < 2:
        return 0
    # Each input element scatters into (M/group) x kernel outputs: W is (C, M/group, k...).
    return _numel(view, node.inputs[0]) * math.prod(weight[1:])


def _gemm_macs(view: GraphView, node: NodeInfo) -> int:
    a = _shape(view, _input(node, 0))
    if not a or len(a) != 2:
        return 0
    k = a[0] if node.attrs.get("transA", 0) else a[1]
    return _numel(view, node.outputs[0]) * k


def _matmul_macs(view: GraphView, node: NodeInfo) -> int:
    a = _shape(view, _input(node, MATMUL_OPERANDS[node.op_type][0]))
    if not a:
        return 0
    k = a[-2] if node.attrs.get("transA", 0) and len(a) >= 2 else a[-1]
    # Output elements already include the broadcast batch dims, so batched MatMul needs nothing more.
    return _numel(view, node.outputs[0]) * k


def _kernel_size(node: NodeInfo) -> int:
    kernel = node.attrs.get("kernel_shape") or node.attrs.get("pooled_shape") or []
    return math.prod(int(k) for k in kernel) if kernel else 1


def _work(view: GraphView, node: NodeInfo) -> tuple[str, int, int, bool]:
    """(kind, MACs, FLOPs beyond 2 per MAC, estimated) of `node`: what its operator computes."""
    op = node.op_type
    out_numel = sum(_numel(view, name) for name in node.outputs if name)
    first_out = _numel(view, node.outputs[0]) if node.outputs and node.outputs[0] else 0
    macs = 0
    extra_flops = 0
    estimated = False
    if op in CONV_WEIGHT_INDEX:
        kind, macs = "conv", _conv_macs(view, node)
        has_bias = len([i for i in node.inputs if i]) > (8 if op == "QLinearConv" else 2)
        extra_flops = first_out if has_bias else 0
    elif op == "ConvTranspose":
        kind, macs = "conv", _conv_transpose_macs(view, node)
        extra_flops = first_out if _input(node, 2) else 0
    elif op in ("Gemm", "FusedGemm"):
        kind, macs = "matmul", _gemm_macs(view, node)
        extra_flops = first_out if _input(node, 2) else 0
    elif op in MATMUL_OPERANDS:
        kind, macs = "matmul", _matmul_macs(view, node)
    elif op in NORM_FLOPS_PER_ELEMENT:
        kind, extra_flops = "normalization", NORM_FLOPS_PER_ELEMENT[op] * first_out
    elif op in ("Softmax", "LogSoftmax"):
        kind, extra_flops = "softmax", SOFTMAX_FLOPS_PER_ELEMENT * first_out
    elif op in POOLS:
        kind, extra_flops = "pooling", first_out * _kernel_size(node)
    elif op in GLOBAL_POOLS:
        kind, extra_flops = "pooling", _numel(view, node.inputs[0])
    elif op in REDUCE_FLOPS_PER_ELEMENT:
        kind, extra_flops = "reduction", REDUCE_FLOPS_PER_ELEMENT[op] * _numel(view, node.inputs[0])
    elif op in ELEMENTWISE:
        kind, extra_flops = "elementwise", out_numel
    elif op in DATA_MOVEMENT:
        kind = "data"
    else:
        kind, extra_flops, estimated = "other", out_numel, True
    return kind, macs, extra_flops, estimated


def _traffic(view: GraphView, node: NodeInfo) -> tuple[int, int, int]:
    """(activation bytes in, weight bytes in, bytes out) of `node`, each distinct input counted once."""
    op = node.op_type
    activation_in = 0
    weight_in = 0
    if op not in ("Shape", "Size"):
        for name in dict.fromkeys(node.inputs):
            if not name:
                continue
            if name in view.weights:
                weight_in += view.nbytes(name)
            else:
                activation_in += view.nbytes(name)
    bytes_out = sum(view.nbytes(name) for name in node.outputs if name)
    if op == "Constant":  # a constant's value is a weight, read by its consumers; producing it moves nothing
        bytes_out = 0
    return activation_in, weight_in, bytes_out


def node_cost(view: GraphView, node: NodeInfo, counted: bool = True) -> NodeCost:
    """The cost of one node under the module's conventions (`counted` False: its shapes are unknown)."""
    kind, macs, extra_flops, estimated = _work(view, node)
    activation_in, weight_in, bytes_out = _traffic(view, node)
    return NodeCost(
        index=node.index,
        name=node.name or f"node#{node.index}",
        op_type=node.op_type,
        kind=kind,
        macs=macs,
        flops=2 * macs + extra_flops,
        activation_bytes_in=activation_in,
        weight_bytes=weight_in,
        bytes_out=bytes_out,
        estimated=estimated,
        counted=counted,
    )


def graph_cost(view: GraphView) -> GraphCost:
    """Costs of every node of the graph, in graph order."""
    uncounted = {node.index for node in view.uncounted_nodes()}
    return GraphCost([node_cost(view, node, node.index not in uncounted) for node in view.nodes])
