"""Fusion opportunities found by pattern, and what ONNX Runtime's graph optimizer really removes per level.

A fusion turns a chain of nodes into one kernel: the intermediate tensors are never written to memory and
read back, and there are fewer launches. The patterns below are the ones inference engines fuse (ONNX Runtime's
transformers, OpenVINO's, TensorRT's): Conv(+BN)(+residual Add)(+activation), MatMul/Gemm+bias+activation,
LayerNorm and GELU written out as primitive ops, and attention (MatMul -> Softmax -> MatMul).
Patterns are matched on structure (op types and single-consumer edges), not on constant values.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from infermeter.graph.model import GraphView, NodeInfo

ACTIVATIONS = frozenset(
    [
        "Relu",
        "Clip",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "HardSigmoid",
        "HardSwish",
        "Gelu",
        "Elu",
        "Selu",
        "Softplus",
        "Mish",
        "Swish",
        "Silu",
    ]
)
# Order matters: a node belongs to the first pattern that claims it (GELU before MatMul+Add so that the
# decomposed GELU after a linear layer is reported as a GELU, not as part of a bias chain).
PATTERN_TITLES = {
    "attention": "attention (MatMul→Softmax→MatMul)",
    "layernorm": "decomposed LayerNorm (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div)",
    "gelu_erf": "decomposed GELU, erf form",
    "gelu_tanh": "decomposed GELU, tanh form",
    "conv_chain": "Conv→BatchNorm/residual Add/activation",
    "matmul_chain": "MatMul/Gemm→bias Add→activation",
}
ORT_LEVELS = ("disable", "basic", "extended", "layout", "all")


@dataclass(frozen=True)
class FusionMatch:
    """One fusible chain: the pattern key, its op sequence and node names (fusing saves len(nodes) - 1 nodes)."""

    pattern: str
    ops: tuple[str, ...]
    nodes: tuple[str, ...]

    @property
    def nodes_saved(self) -> int:
        """Nodes removed when the chain becomes one kernel."""
        return len(self.nodes) - 1


class _Graph:
    """Edges of a GraphView, for walking chains."""

    def __init__(self, view: GraphView) -> None:
        self.view = view
        self.consumers = view.consumers()
        self.producers = view.producers()
        self.outputs = set(view.graph_outputs)
        self.claimed: set[int] = set()

    def sole_consumer(self, node: NodeInfo, ops: Iterable[str] | None = None) -> NodeInfo | None:
        """The only node reading `node`'s first output (which must not be a graph output), if its op fits."""
        if not node.outputs or node.outputs[0] in self.outputs:
            return None
        readers = self.consumers.get(node.outputs[0], [])
        if len(readers) != 1 or readers[0].index in self.claimed:
            return None
        reader = readers[0]
        return reader if ops is None or reader.op_type in ops else None

    def consumers_of(self, node: NodeInfo, op: str) -> list[NodeInfo]:
        """Unclaimed readers of `node`'s first output with op type `op`."""
        readers = self.consumers.get(node.outputs[0], []) if node.outputs else []
        return [r for r in readers if r.op_type == op and r.index not in self.claimed]

    def producer(self, name: str, ops: Iterable[str]) -> NodeInfo | None:
        """The unclaimed node writing `name`, if its op is one of `ops`."""
        node = self.producers.get(name)
        return node if node is not None and node.op_type in ops and node.index not in self.claimed else None

    def is_weight(self, name: str) -> bool:
        """True for initializers and Constant outputs."""
        return name in self.view.weights

    def activation_inputs(self, node: NodeInfo) -> list[str]:
        """Inputs that are computed values, not weights."""
        return [i for i in node.inputs if i and not self.is_weight(i)]


def _match_attention(g: _Graph, softmax: NodeInfo) -> list[NodeInfo] | None:
    chain = [softmax]
    current = softmax
    for _ in range(4):  # scale (Div/Mul), mask (Add/Where), casts between QK^T and Softmax
        inputs = g.activation_inputs(current)
        if not inputs:
            return None
        producer = g.producer(inputs[0], {"MatMul", "Add", "Div", "Mul", "Where", "Cast"})
        if producer is None:
            return None
        chain.insert(0, producer)
        if producer.op_type == "MatMul":
            break
        current = producer
    if chain[0].op_type != "MatMul":
        return None
    current = softmax
    for _ in range(3):
        following = g.sole_consumer(current, {"MatMul", "Cast", "Dropout"})
        if following is None:
            return None
        chain.append(following)
        if following.op_type == "MatMul":
            return chain
        current = following
    return None


def _match_layernorm(g: _Graph, mean: NodeInfo) -> list[NodeInfo] | None:
    x = mean.inputs[0]
    subs = [s for s in g.consumers_of(mean, "Sub") if x in s.inputs]
    if not subs:
        return None
    sub = subs[0]
    squares = [
        n
        for n in (*g.consumers_of(sub, "Pow"), *g.consumers_of(sub, "Mul"))
        if n.op_type == "Pow" or (n.inputs[0] == n.inputs[1] == sub.outputs[0])
    ]
    if not squares:
        return None
    chain = [mean, sub, squares[0]]
    for ops in ({"ReduceMean"}, {"Add"}, {"Sqrt"}):
        following = g.sole_consumer(chain[-1], ops)
        if following is None:
            return None
        chain.append(following)
    sqrt = chain[-1]
    readers = g.consumers.get(sqrt.outputs[0], [])
    if len(readers) != 1:
        return None
    if readers[0].op_type == "Div" and sub.outputs[0] in readers[0].inputs:
        chain.append(readers[0])
    elif readers[0].op_type == "Reciprocal":
        mul = g.sole_consumer(readers[0], {"Mul"})
        if mul is None or sub.outputs[0] not in mul.inputs:
            return None
        chain += [readers[0], mul]
    else:
        return None
    for op in ("Mul", "Add"):  # the affine gamma/beta, when they are weights
        following = g.sole_consumer(chain[-1], {op})
        if following is None or not any(g.is_weight(i) for i in following.inputs):
            break
        chain.append(following)
    return chain


def _match_gelu_erf(g: _Graph, erf: NodeInfo) -> list[NodeInfo] | None:
    scale = g.producer(erf.inputs[0], {"Div", "Mul"})
    if scale is None:
        return None
    add = g.sole_consumer(erf, {"Add"})
    mul = g.sole_consumer(add, {"Mul"}) if add is not None else None
    if add is None or mul is None:
        return None
    chain = [scale, erf, add, mul]
    x_inputs = g.activation_inputs(scale)
    other = [i for i in mul.inputs if i != add.outputs[0]]
    half = g.producer(other[0], {"Mul"}) if other else None
    if half is not None and x_inputs and x_inputs[0] in half.inputs:
        chain.insert(0, half)  # 0.5 * x computed before the erf branch
    else:
        last = g.sole_consumer(mul, {"Mul"})
        if last is not None:
            chain.append(last)
    return chain


def _match_gelu_tanh(g: _Graph, tanh: NodeInfo) -> list[NodeInfo] | None:
    back: list[NodeInfo] = []
    current = tanh
    for _ in range(4):  # sqrt(2/pi) * (x + 0.044715 * x^3)
        inputs = g.activation_inputs(current)
        producer = g.producer(inputs[-1], {"Mul", "Add", "Pow"}) if inputs else None
        if producer is None:
            break
        back.insert(0, producer)
        if producer.op_type == "Pow":
            break
        if producer.op_type == "Add":  # x + c*x^3: follow the cubic branch (the operand that is not x itself)
            cubic = [i for i in g.activation_inputs(producer) if g.producer(i, {"Mul", "Pow"}) is not None]
            if not cubic:
                break
            node = g.producer(cubic[0], {"Mul", "Pow"})
            assert node is not None
            back.insert(0, node)
            current = node
            continue
        current = producer
    if not any(n.op_type == "Add" for n in back) or not any(n.op_type in ("Mul", "Pow") for n in back):
        return None
    add = g.sole_consumer(tanh, {"Add"})
    mul = g.sole_consumer(add, {"Mul"}) if add is not None else None
    if add is None or mul is None:
        return None
    chain = [*back, tanh, add, mul]
    last = g.sole_consumer(mul, {"Mul"})
    if last is not None:
        chain.append(last)
    return chain


def _match_conv_chain(g: _Graph, conv: NodeInfo) -> list[NodeInfo] | None:
    chain = [conv]
    bn = g.sole_consumer(conv, {"BatchNormalization"})
    if bn is not None:
        chain.append(bn)
    residual = g.sole_consumer(chain[-1], {"Add"})
    if residual is not None and len(g.activation_inputs(residual)) == 2:
        chain.append(residual)
    act = g.sole_consumer(chain[-1], ACTIVATIONS)
    if act is not None:
        chain.append(act)
    return chain if len(chain) > 1 else None


def _match_matmul_chain(g: _Graph, matmul: NodeInfo) -> list[NodeInfo] | None:
    chain = [matmul]
    if matmul.op_type == "MatMul":
        bias = g.sole_consumer(matmul, {"Add"})
        if bias is not None and any(g.is_weight(i) for i in bias.inputs):
            chain.append(bias)
    act = g.sole_consumer(chain[-1], ACTIVATIONS)
    if act is not None:
        chain.append(act)
    return chain if len(chain) > 1 else None


_MATCHERS = (
    ("attention", {"Softmax"}, _match_attention),
    ("layernorm", {"ReduceMean"}, _match_layernorm),
    ("gelu_erf", {"Erf"}, _match_gelu_erf),
    ("gelu_tanh", {"Tanh"}, _match_gelu_tanh),
    ("conv_chain", {"Conv"}, _match_conv_chain),
    ("matmul_chain", {"MatMul", "Gemm"}, _match_matmul_chain),
)


def find_fusions(view: GraphView) -> list[FusionMatch]:
    """Every fusible chain in the graph; a node belongs to at most one chain (the first pattern to claim it)."""
    g = _Graph(view)
    matches: list[FusionMatch] = []
    for pattern, anchors, matcher in _MATCHERS:
        for node in view.nodes:
            if node.op_type not in anchors or node.index in g.claimed:
                continue
            chain = matcher(g, node)
            if not chain or any(n.index in g.claimed for n in chain):
                continue
            g.claimed.update(n.index for n in chain)
            matches.append(
                FusionMatch(pattern, tuple(n.op_type for n in chain), tuple(n.name or f"node#{n.index}" for n in chain))
            )
    return matches


def summarize_fusions(matches: list[FusionMatch]) -> dict[str, dict[str, object]]:
    """pattern -> {title, count, nodes_saved, chains (op sequence -> count)}."""
    out: dict[str, dict[str, object]] = {}
    for match in matches:
        row = out.setdefault(
            match.pattern, {"title": PATTERN_TITLES[match.pattern], "count": 0, "nodes_saved": 0, "chains": Counter()}
        )
        row["count"] = int(row["count"]) + 1  # type: ignore[call-overload]
        row["nodes_saved"] = int(row["nodes_saved"]) + match.nodes_saved  # type: ignore[call-overload]
        chains = row["chains"]
        assert isinstance(chains, Counter)
        chains["→".join(match.ops)] += 1
    for row in out.values():
        row["chains"] = dict(row["chains"])  # type: ignore[call-overload]
    return out


def qualified_op(domain: str, op_type: str) -> str:
    """`Conv` for standard ONNX ops, `com.microsoft.nchwc:Conv` for ops of another domain."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"


@dataclass(frozen=True)
class OrtLevelCount:
    """Nodes left after ONNX Runtime's optimizer at one level, and the ops it introduced (ORT-specific ones)."""

    level: str
    node_count: int
    op_counts: dict[str, int]
    new_ops: list[str] = field(default_factory=list)


def ort_optimizer_counts(model_path: Path, levels: Iterable[str] = ORT_LEVELS) -> list[OrtLevelCount]:
    """Create an ONNX Runtime CPU session per optimization level with `optimized_model_filepath` set, and count
    the nodes of each saved model. Levels this onnxruntime does not have are skipped.

    Note: the 'layout' and 'all' models may hold ORT-only ops (FusedConv, NCHWc reorders, com.microsoft fused
    ops) that other runtimes cannot load; they are counted as they are.
    """
    import onnx
    import onnxruntime as ort

    names = {
        "disable": "ORT_DISABLE_ALL",
        "basic": "ORT_ENABLE_BASIC",
        "extended": "ORT_ENABLE_EXTENDED",
        "layout": "ORT_ENABLE_LAYOUT",
        "all": "ORT_ENABLE_ALL",
    }
    original = Counter(
        qualified_op(n.domain, n.op_type) for n in onnx.load(str(model_path), load_external_data=False).graph.node
    )
    counts: list[OrtLevelCount] = []
    with tempfile.TemporaryDirectory(prefix="infermeter-ort-opt-") as tmp:
        for level in levels:
            enum_value = getattr(ort.GraphOptimizationLevel, names[level], None)
            if enum_value is None:
                continue
            options = ort.SessionOptions()
            options.graph_optimization_level = enum_value
            options.intra_op_num_threads = 1
            options.log_severity_level = 3
            target = Path(tmp) / f"{level}.onnx"
            options.optimized_model_filepath = str(target)
            ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
            saved = onnx.load(str(target), load_external_data=False)
            ops = Counter(qualified_op(n.domain, n.op_type) for n in saved.graph.node)
            counts.append(OrtLevelCount(level, sum(ops.values()), dict(ops), sorted(set(ops) - set(original))))
    return counts
