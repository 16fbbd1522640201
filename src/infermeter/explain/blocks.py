"""Per block figures: each engine's time (the sum of its units inside the block), its share of that engine's
end-to-end P50, the kernels, the difference between the engines and its share of all differences; FLOPs per
block from the graph FLOP counter (`graph.flops`), and achieved GFLOP/s against this machine's cached ceiling."""

from __future__ import annotations

from infermeter.explain.align import Alignment
from infermeter.explain.original import OriginalGraph
from infermeter.explain.records import EngineProfile, Unit
from infermeter.results.explain import Block


def _block_of(alignment: Alignment) -> dict[str, int]:
    return {node: index for index, nodes in enumerate(alignment.blocks) for node in nodes}


def _kernel_text(units: list[Unit]) -> str:
    """The kernels of a block's units on one engine, most time first, repeats counted."""
    counts: dict[str, int] = {}
    ran = [u for u in units if u.executed] or units
    for unit in sorted(ran, key=lambda u: -u.time_us):
        counts[unit.kernel] = counts.get(unit.kernel, 0) + 1
    return "; ".join(f"{text} ×{n}" if n > 1 else text for text, n in counts.items())


def make_blocks(
    alignment: Alignment,
    profiles: list[EngineProfile],
    original: OriginalGraph,
    flops_by_node: dict[str, int] | None = None,
    peak_gflops: float | None = None,
) -> list[Block]:
    """The blocks with their figures, sorted by difference (largest first; a single engine: by its time)."""
    where = _block_of(alignment)
    units_in: list[dict[str, list[Unit]]] = [{} for _ in alignment.blocks]
    for profile in profiles:
        for unit in profile.units:
            if unit.nodes and unit.nodes[0] in where:
                units_in[where[unit.nodes[0]]].setdefault(profile.engine, []).append(unit)
    p50 = {p.engine: p.p50_us for p in profiles}
    profiled = [p.engine for p in profiles if p.profiled]
    blocks = []
    for nodes, per_engine in zip(alignment.blocks, units_in, strict=True):
        times = {e: sum(u.time_us for u in per_engine.get(e, [])) for e in profiled}
        difference = max(times.values()) - min(times.values()) if len(times) > 1 else 0.0
        flops = sum(flops_by_node.get(n, 0) for n in nodes) if flops_by_node else None
        blocks.append(
            Block(
                nodes=nodes,
                op_types=sorted({original.op_types[n] for n in nodes}),
                time_us=times,
                kernels={e: _kernel_text(per_engine.get(e, [])) for e in profiled},
                share={e: t / p50[e] for e, t in times.items() if p50[e]},  # type: ignore[operator]
                units={e: sum(u.executed for u in per_engine.get(e, [])) for e in profiled},
                difference_us=difference,
                difference_share=0.0,
                flops=flops,
            )
        )
        _add_rates(blocks[-1], peak_gflops)
    total = sum(b.difference_us for b in blocks)
    for block in blocks:
        block.difference_share = block.difference_us / total if total else 0.0
    key = (lambda b: -b.difference_us) if len(profiled) > 1 else (lambda b: -max(b.time_us.values(), default=0.0))
    return sorted(blocks, key=key)


def _add_rates(block: Block, peak_gflops: float | None) -> None:
    """Achieved GFLOP/s per engine where the block does arithmetic and took time, and its fraction of the peak."""
    if not block.flops:
        return
    for engine, time_us in block.time_us.items():
        if time_us > 0:
            rate = block.flops / (time_us * 1e3)  # FLOP per µs / 1e3 = GFLOP/s
            block.gflops_per_s[engine] = rate
            if peak_gflops:
                block.peak_fraction[engine] = rate / peak_gflops


def flops_per_node(loaded_model: object, names: list[str]) -> dict[str, int]:
    """FLOPs per original node from the graph FLOP counter, matched by graph position (the counter reads the same
    file, so the order is the same even where names were missing)."""
    from infermeter.graph.flops import graph_cost

    cost = graph_cost(loaded_model.view)  # type: ignore[attr-defined]
    return {names[c.index]: c.flops for c in cost.nodes if c.index < len(names)}
