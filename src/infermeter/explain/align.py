"""Alignment on the original ONNX nodes: each engine's units are sets of original nodes; the blocks are the
coarsest common partition (union-find over nodes: the nodes of one unit on any engine join one block), so that
every block is a union of whole units on every engine and compares like with like across fusions."""

from __future__ import annotations

from dataclasses import dataclass, replace

from infermeter.explain.original import OriginalGraph
from infermeter.explain.records import Unit


class UnionFind:
    """Disjoint sets of node names."""

    def __init__(self, items: list[str]) -> None:
        self.parent = {item: item for item in items}

    def find(self, item: str) -> str:
        """The representative of `item`'s set (with path halving)."""
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def union(self, a: str, b: str) -> None:
        """Join the sets of `a` and `b`."""
        self.parent[self.find(a)] = self.find(b)


def fill_gaps(units: list[Unit], original: OriginalGraph) -> list[Unit]:
    """`units` with each original node no unit names attached to the unit that holds all the nodes reading its
    outputs (a node an engine folded into its consumer and renamed, as OpenVINO does with a Conv it merges a
    BatchNormalization into; a graph output: the unit of its inputs' makers), repeated until nothing changes. A
    node read by several units stays unmapped on this engine."""
    owner = {node: index for index, unit in enumerate(units) for node in unit.nodes}
    extra: dict[int, list[str]] = {}
    changed = True
    while changed:
        changed = False
        for node in original.names:
            if node in owner:
                continue
            around = {owner.get(n) for n in original.neighbours(node)}
            if len(around) == 1 and None not in around:
                (index,) = around
                assert index is not None
                owner[node] = index
                extra.setdefault(index, []).append(node)
                changed = True
    return [replace(u, nodes=(*u.nodes, *extra[i])) if i in extra else u for i, u in enumerate(units)]


@dataclass
class Alignment:
    """The common partition: blocks of node names (graph order inside a block, blocks in the order of their first
    node), and per engine which nodes its units cover."""

    blocks: list[list[str]]
    covered: dict[str, set[str]]

    def coverage(self, engine: str, total: int) -> float:
        """The fraction of the original nodes an engine's units account for."""
        return len(self.covered[engine]) / total if total else 1.0


def align(profiles: dict[str, list[Unit]], original: OriginalGraph) -> Alignment:
    """The coarsest common partition of the original nodes under every engine's units."""
    sets = UnionFind(original.names)
    covered: dict[str, set[str]] = {}
    for engine, units in profiles.items():
        covered[engine] = set()
        for unit in units:
            nodes = [n for n in unit.nodes if n in sets.parent]
            covered[engine].update(nodes)
            for node in nodes[1:]:
                sets.union(nodes[0], node)
    grouped: dict[str, list[str]] = {}
    for node in original.names:
        grouped.setdefault(sets.find(node), []).append(node)
    return Alignment(list(grouped.values()), covered)
