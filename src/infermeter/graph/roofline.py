"""Roofline data for bench results: FLOPs per inference from the model's graph at the case's shapes, achieved
GFLOP/s at the median latency, arithmetic intensity, and the fraction of this machine's measured ceiling for the
case's effective precision.

Written: per case a `Roofline` record (`results.records`: flops, achieved GFLOP/s, arithmetic intensity, peak
fraction...; read by the summary table and the reports' roofline chart), or a `RooflineError`; per file
`extra["peak"]` = {fp32_gflops, bf16_gflops, fp16_gflops, int8_gops, bandwidth_gbs, engines, threads, device,
measured_at, method[, gpu]}.
"""

from __future__ import annotations

from typing import Any

from infermeter.results.records import Roofline, RooflineError, write_record
from infermeter.results.schema import CaseResult, ResultsFile

_PEAK_FIELDS = (
    "fp32_gflops",
    "bf16_gflops",
    "fp16_gflops",
    "tf32_gflops",
    "int8_gops",
    "bandwidth_gbs",
    "engines",
    "threads",
    "device",
    "matrix_size",
    "measured_at",
    "method",
)


def ceiling_key(precision: str | None) -> str:
    """The peak field a case of this effective precision is compared with (mixed precisions: the fastest
    arithmetic they contain, so that the comparison is never flattering)."""
    text = (precision or "fp32").lower()
    for token, key in (("int8", "int8_gops"), ("bf16", "bf16_gflops"), ("fp16", "fp16_gflops")):
        if token in text:
            return key
    return "fp32_gflops"


def peak_summary(peak: dict[str, Any]) -> dict[str, Any]:
    """The fields of a `peak` measurement kept in a results file (no per-trial detail)."""
    out = {k: peak.get(k) for k in _PEAK_FIELDS if k in peak}
    if isinstance(peak.get("gpu"), dict):
        out["gpu"] = {k: peak["gpu"].get(k) for k in _PEAK_FIELDS if k in peak["gpu"]}
    return out


def graph_flops(model_ref: str, input_shapes: dict[str, list[int]], batch: int) -> tuple[int, int, int]:
    """(FLOPs, bytes moved, uncounted nodes) per inference of `model_ref` at these input shapes; with uncounted
    nodes (shapes no recovery found) the first two are lower bounds."""
    from infermeter.graph.flops import graph_cost
    from infermeter.graph.loaded import load_graph

    overrides = [(name, tuple(int(d) for d in dims)) for name, dims in input_shapes.items()]
    loaded = load_graph(model_ref, batch, overrides)
    cost = graph_cost(loaded.view)
    return cost.flops, cost.bytes_moved, len(cost.uncounted)


def annotate_case(
    case: CaseResult, flops: int, bytes_moved: int, peak: dict[str, Any], uncounted_nodes: int = 0
) -> None:
    """Write the `Roofline` record of one ok case (see the module docstring); `uncounted_nodes` marks its figures
    as lower bounds."""
    assert case.latency_ms is not None
    seconds = case.latency_ms.p50 / 1000.0
    achieved = flops / seconds / 1e9 if seconds > 0 else 0.0
    intensity = flops / bytes_moved if bytes_moved else 0.0
    on_gpu = case.device.startswith(("cuda", "gpu"))
    ceilings = peak.get("gpu") if on_gpu else peak
    key = ceiling_key(case.precision_effective or case.precision)
    ceiling = ceilings.get(key) if isinstance(ceilings, dict) else None
    bandwidth = ceilings.get("bandwidth_gbs") if isinstance(ceilings, dict) else None
    memory_roof = intensity * bandwidth if ceiling and bandwidth else None
    record = Roofline(
        flops=flops,
        bytes_moved=bytes_moved,
        achieved_gflops=achieved,
        arithmetic_intensity=intensity,
        peak_precision=key,
        peak_ceiling_gflops=ceiling,
        peak_fraction=achieved / ceiling if ceiling else None,
        attainable_gflops=None if memory_roof is None else min(ceiling, memory_roof),
        roofline_bound=None if memory_roof is None else ("memory" if memory_roof < ceiling else "compute"),
        peak_exceeded=bool(ceiling and achieved > ceiling),
        uncounted_nodes=uncounted_nodes,
    )
    write_record(case, record)
    if uncounted_nodes:
        case.notes.append(
            f"{uncounted_nodes} nodes of the graph have shapes no inference or run recovered (`infermeter inspect` "
            "names their ops): FLOPs, GFLOP/s and % peak are lower bounds"
        )
    if record.peak_exceeded:
        case.notes.append(
            f"achieved {achieved:.1f} GFLOP/s exceeds the measured {key} ceiling of {ceiling:.1f}: the ceiling is "
            "wrong (measured on a busy machine or with fewer threads?); rerun `infermeter peak --refresh`"
        )
    threads = ceilings.get("threads") if isinstance(ceilings, dict) else None
    if not on_gpu and isinstance(threads, int) and case.threads > threads:
        case.notes.append(f"the peak was measured with {threads} threads, this case used {case.threads}")


def annotate_roofline(results: ResultsFile, peak: dict[str, Any] | None = None) -> None:
    """Add the roofline fields to every ok, non-synthetic case of `results` and the ceilings to
    `results.extra["peak"]`.

    `peak` defaults to this machine's cached `infermeter peak` measurement (measured now, ~20 s, on a miss).
    FLOPs are computed once per (model, input shapes). A model whose graph cannot be analysed (no ONNX form,
    onnx missing) gets a `RooflineError` record instead, and the other cases go on.
    """
    measured = [case for case in results.cases if case.ok and not case.synthetic]
    if not measured:
        return  # nothing ran real work (synthetic or failed cases only): no ceiling to measure against
    if peak is None:
        from infermeter.machine.ceilings_cache import load_or_measure_peak

        peak, _cache_hit = load_or_measure_peak()
    results.extra["peak"] = peak_summary(peak)
    costs: dict[tuple[str, str, int], tuple[int, int, int] | str] = {}
    for case in measured:
        shapes_key = repr(sorted((k, tuple(v)) for k, v in case.shapes.input_shapes.items()))
        cache_key = (case.model, shapes_key, case.batch)
        if cache_key not in costs:
            try:
                costs[cache_key] = graph_flops(case.model, case.shapes.input_shapes, case.batch)
            except Exception as exc:  # one unanalysable model must not cost the others their figures
                costs[cache_key] = f"{type(exc).__name__}: {exc}"
        cost = costs[cache_key]
        if isinstance(cost, str):
            write_record(case, RooflineError(cost))
            continue
        flops, bytes_moved, uncounted = cost
        annotate_case(case, flops, bytes_moved, peak, uncounted)
