"""Activation memory: naive (every tensor kept for the whole run, as eager execution without freeing would) vs
planned (liveness analysis plus a greedy offset allocator, as static-graph inference engines do).

Liveness: nodes run in graph order (ONNX requires a topological order). A tensor is alive from the step that
produces it (step 0 for graph inputs) to the last step that reads it (the last step for graph outputs),
inclusive: while a node runs, its inputs and outputs are all alive, so an output never shares memory with an
input of the same node.

Allocator: "greedy by size" (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net Inference",
2020; the TensorFlow Lite arena planner): take tensors largest first; place each at the lowest offset where it
does not overlap any already placed tensor whose lifetime overlaps its own. The arena size is the plan's peak.
The live-bytes maximum over steps is a lower bound no plan can beat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infermeter.graph.model import GraphView

ALIGNMENT_BYTES = 64


@dataclass(frozen=True)
class Lifetime:
    """A tensor's size and the inclusive range of steps during which it must stay in memory."""

    name: str
    size_bytes: int
    first: int
    last: int

    def overlaps(self, other: Lifetime) -> bool:
        """True when both tensors are alive at some common step."""
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class Placement:
    """Where the plan puts a tensor in the arena."""

    lifetime: Lifetime
    offset: int

    @property
    def end(self) -> int:
        """One past the last byte (size rounded up to the alignment)."""
        return self.offset + _aligned(self.lifetime.size_bytes)


@dataclass(frozen=True)
class MemoryPlan:
    """The outcome: naive total, planned arena, the live-bytes lower bound and the step where it peaks."""

    placements: list[Placement]
    naive_bytes: int
    planned_bytes: int
    live_peak_bytes: int
    peak_step: int
    live_at_peak: list[str]


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT_BYTES) * ALIGNMENT_BYTES


def lifetimes(
    steps: Sequence[tuple[Sequence[str], Sequence[str]]],
    sizes: dict[str, int],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
) -> list[Lifetime]:
    """Lifetimes of every tensor in `sizes` from the (inputs, outputs) of each step, in execution order.

    Tensors not in `sizes` (weights, omitted inputs) are ignored; a tensor nobody reads dies where it is made.
    """
    first: dict[str, int] = {name: 0 for name in graph_inputs if name in sizes}
    last: dict[str, int] = dict(first)
    for step, (inputs, outputs) in enumerate(steps):
        for name in inputs:
            if name in sizes and name in first:
                last[name] = step
        for name in outputs:
            if name in sizes and name not in first:
                first[name] = step
                last[name] = step
    end = max(len(steps) - 1, 0)
    for name in graph_outputs:
        if name in first:
            last[name] = end
    return [Lifetime(name, sizes[name], first[name], last[name]) for name in first]


def plan_offsets(tensors: Sequence[Lifetime]) -> list[Placement]:
    """Greedy-by-size offsets: largest first, each at the lowest gap free of every time-overlapping tensor."""
    order = sorted(tensors, key=lambda t: (-t.size_bytes, t.first, t.name))
    placed: list[Placement] = []
    for tensor in order:
        size = _aligned(tensor.size_bytes)
        conflicts = sorted((p for p in placed if p.lifetime.overlaps(tensor)), key=lambda p: p.offset)
        offset = 0
        for other in conflicts:
            if offset + size <= other.offset:
                break  # fits in the gap below `other`
            offset = max(offset, other.end)
        placed.append(Placement(tensor, offset))
    return placed


def live_bytes_per_step(tensors: Sequence[Lifetime], step_count: int) -> list[int]:
    """Sum of the (aligned) sizes of the tensors alive at each step."""
    # A difference array: O(tensors + steps) instead of walking every lifetime.
    delta = [0] * (max(step_count, 1) + 1)
    for tensor in tensors:
        delta[tensor.first] += _aligned(tensor.size_bytes)
        delta[tensor.last + 1] -= _aligned(tensor.size_bytes)
    totals: list[int] = []
    running = 0
    for change in delta[:-1]:
        running += change
        totals.append(running)
    return totals


def plan_memory(
    steps: Sequence[tuple[Sequence[str], Sequence[str]]],
    sizes: dict[str, int],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
) -> MemoryPlan:
    """Lifetimes, greedy plan, naive total and the peak step for a sequence of steps."""
    tensors = lifetimes(steps, sizes, graph_inputs, graph_outputs)
    placements = plan_offsets(tensors)
    live = live_bytes_per_step(tensors, len(steps))
    peak_step = max(range(len(live)), key=lambda i: live[i]) if live else 0
    alive = sorted((t for t in tensors if t.first <= peak_step <= t.last), key=lambda t: -t.size_bytes)
    return MemoryPlan(
        placements=placements,
        naive_bytes=sum(_aligned(t.size_bytes) for t in tensors),
        planned_bytes=max((p.end for p in placements), default=0),
        live_peak_bytes=max(live, default=0),
        peak_step=peak_step,
        live_at_peak=[t.name for t in alive],
    )


def plan_graph_memory(view: GraphView) -> MemoryPlan:
    """The plan for a graph's activations: graph inputs, intermediates and outputs (weights excluded)."""
    sizes: dict[str, int] = {}
    for name in view.graph_inputs:
        sizes[name] = view.nbytes(name)
    for node in view.nodes:
        for name in node.outputs:
            if name and name not in view.weights:
                sizes[name] = view.nbytes(name)
    steps = [((*node.inputs, *node.implicit_inputs), node.outputs) for node in view.nodes]
    return plan_memory(steps, sizes, view.graph_inputs, view.graph_outputs)
