"""Findings in plain words, each naming its block and engine, ranked by the time it explains: provider fallback,
reference kernels, FP32 islands in a reduced-precision graph, fusions one engine does alone, layout conversions,
a dominating block, and the engines' own warnings."""

from __future__ import annotations

import re
from collections import Counter

from infermeter.explain.records import EngineProfile, Unit
from infermeter.results.explain import Block, Finding

# A block that takes at least this share of an engine's end-to-end time dominates it.
DOMINANT_SHARE = 0.5
REDUCED = ("int8", "bf16", "fp16")


def _unit_findings(profile: EngineProfile, block_of: dict[str, str]) -> list[Finding]:
    """Fallback providers, reference kernels and FP32 islands, per unit."""
    found: list[Finding] = []
    providers = Counter(u.provider for u in profile.units if u.provider)
    main = providers.most_common(1)[0][0] if providers else ""
    reduced = profile.precision in REDUCED
    for unit in profile.units:
        block = block_of.get(unit.nodes[0], "") if unit.nodes else ""
        where = f"{unit.name} ({unit.op_type})"
        if unit.provider and unit.provider != main:
            text = f"{where} fell back from {main} to {unit.provider}: {unit.time_us:.0f} µs there"
            found.append(Finding(block, profile.engine, "provider_fallback", text, unit.time_us))
        if unit.executed and is_reference(unit.kernel):
            text = f"{where} ran a reference (unoptimized) kernel, {unit.kernel}: {unit.time_us:.0f} µs"
            found.append(Finding(block, profile.engine, "reference_kernel", text, unit.time_us))
        if len(unit.parts) > 1:
            found.append(_separate_modules(profile.engine, block, unit))
        if reduced and unit.kind == "compute" and unit.precision == "fp32" and _is_arithmetic(unit):
            text = f"{where} runs in fp32 inside a {profile.precision} graph (an FP32 island): {unit.time_us:.0f} µs"
            found.append(Finding(block, profile.engine, "fp32_island", text, unit.time_us))
    return found


def _separate_modules(engine: str, block: str, unit: Unit) -> Finding:
    """torch eager runs as several modules what the exported graph (and so the other engines) has as one node:
    a Conv the exporter folded a BatchNormalization into. The time it explains is the cheapest module's: the
    pass a fused kernel saves."""
    listed = " + ".join(f"{kind} {time_us:.0f} µs" for kind, time_us in unit.parts)
    saved = min(time_us for _, time_us in unit.parts)
    text = f"{engine} runs {listed} as separate modules; the exported graph folds them into one node"
    return Finding(block, engine, "separate_modules", text, saved)


def is_reference(kernel: str) -> bool:
    """True for a kernel text naming a reference implementation (OpenVINO's `ref`, `ref_any_f32`...)."""
    return "ref" in re.split(r"[\s_(),;]+", kernel.lower()) or "reference" in kernel.lower()


def _is_arithmetic(unit: Unit) -> bool:
    words = ("Conv", "MatMul", "Gemm", "FullyConnected", "Attention")
    return any(word in unit.op_type for word in words)


def _fusion_findings(blocks: list[Block], kernel_engines: set[str]) -> list[Finding]:
    """Blocks of several nodes that one engine runs as one kernel and another as several (engines whose units
    are module scopes, not kernels, say nothing about fusion)."""
    found = []
    for block in blocks:
        units = {e: n for e, n in block.units.items() if e in kernel_engines}
        if len(block.nodes) < 2 or len(units) < 2:
            continue
        fused = [e for e, n in units.items() if n == 1]
        split = [e for e, n in units.items() if n > 1]
        for engine in fused:
            others = ", ".join(f"{e} runs {units[e]} kernels" for e in split)
            if not others:
                continue
            ops = "+".join(block.op_types)
            text = f"{engine} fuses {ops} ({len(block.nodes)} nodes) into one kernel; {others} for it"
            found.append(Finding(block.label, engine, "fusion_one_engine", text, block.difference_us))
    return found


def _engine_findings(profile: EngineProfile, blocks: list[Block], data_movement_us: float) -> list[Finding]:
    """Layout conversions, a dominating block and captured warnings, for one engine."""
    found = []
    moves = [u for u in profile.units if u.kind == "data_movement" and u.executed]
    if moves and data_movement_us > 0:
        share = f" ({data_movement_us / profile.p50_us:.0%} of its P50)" if profile.p50_us else ""
        text = (
            f"{profile.engine} ran {len(moves)} data-movement units the model does not have (reorders, layout "
            f"changes, conversions, copies): {data_movement_us:.0f} µs{share}"
        )
        found.append(Finding("", profile.engine, "layout_conversions", text, data_movement_us))
    for block in blocks:
        fraction = block.share.get(profile.engine, 0.0)
        if fraction >= DOMINANT_SHARE:
            text = f"block {block.label} takes {fraction:.0%} of {profile.engine}'s end-to-end time"
            found.append(Finding(block.label, profile.engine, "block_dominates", text, block.time_us[profile.engine]))
    return found + warning_findings(profile, blocks)


def warning_findings(profile: EngineProfile, blocks: list[Block]) -> list[Finding]:
    """Each distinct warning the engine gave, quoted once with its count, with the blocks whose nodes it names."""
    found = []
    for line, count in Counter(profile.warnings).items():
        times = f" ({count} times)" if count > 1 else ""
        named = [b.label for b in blocks if any(re.search(rf"\b{re.escape(n)}\b", line) for n in b.nodes)]
        where = f"; it concerns block(s) {', '.join(named[:5])}" if named else ""
        text = f'{profile.engine} said{times}: "{line}"{where}'
        found.append(Finding(named[0] if named else "", profile.engine, "engine_warning", text, 0.0))
    return found


def findings(profiles: list[EngineProfile], blocks: list[Block], data_movement: dict[str, float]) -> list[Finding]:
    """All findings, ranked by the time each explains (largest first)."""
    block_of = {node: block.label for block in blocks for node in block.nodes}
    found = _fusion_findings(blocks, {p.engine for p in profiles if p.profiled and p.unit_kind == "kernel"})
    for profile in profiles:
        if profile.profiled:
            found += _unit_findings(profile, block_of)
            found += _engine_findings(profile, blocks, data_movement.get(profile.engine, 0.0))
        else:
            found += warning_findings(profile, blocks)
    return sorted(found, key=lambda f: -f.time_us)
