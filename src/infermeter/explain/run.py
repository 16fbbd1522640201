"""An explain run end to end: the model named and indexed, each engine timed and profiled, the units aligned on
the original nodes, the blocks and findings made into an `ExplainRecord`."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infermeter.core.case import Case
from infermeter.core.errors import UsageError
from infermeter.explain.align import align, fill_gaps
from infermeter.explain.blocks import flops_per_node, make_blocks
from infermeter.explain.engines import EngineJob, profile_engine
from infermeter.explain.findings import findings
from infermeter.explain.original import OriginalGraph, named_copy, original_graph
from infermeter.explain.records import EngineProfile
from infermeter.models.spec import ModelSpec
from infermeter.results.explain import EngineSummary, ExplainRecord


@dataclass(frozen=True, kw_only=True)
class ExplainRequest:
    """What to explain: a model, two or more engines, and the case they share."""

    model: str
    engines: tuple[str, ...]
    batch: int = 1
    precision: str = "fp32"
    threads: int = 1
    inputs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    iterations: int = 30
    flops: bool = True


def check_request(request: ExplainRequest) -> None:
    """UsageError for fewer than two engines, an unknown engine name or a non-positive count."""
    from infermeter.backends.registry import backend_names

    if len(request.engines) < 2:
        raise UsageError("explain compares engines: give at least two with -b (e.g. -b onnxruntime,openvino)")
    repeated = sorted({e for e in request.engines if request.engines.count(e) > 1})
    if repeated:
        raise UsageError(f"-b names {', '.join(repeated)} more than once: give each engine once")
    unknown = [e for e in request.engines if e not in backend_names()]
    if unknown:
        raise UsageError(f"unknown backend {', '.join(unknown)} (known: {', '.join(backend_names())})")
    for value, flag in ((request.batch, "--batch"), (request.iterations, "--profile-iterations")):
        if value <= 0:
            raise UsageError(f"{flag} {value} must be positive")


def _named_model(request: ExplainRequest, folder: Path, notes: list[str]) -> tuple[ModelSpec, OriginalGraph]:
    """The model as every engine will see it (unnamed nodes named first, in a copy) and its original graph."""
    import onnx

    from infermeter.models.convert import onnx_for
    from infermeter.models.resolve import resolve_model

    spec = resolve_model(request.model, request.reshape)
    path = onnx_for(spec).path
    named, renamed = named_copy(Path(path), folder)
    if renamed:
        if spec.kind != "onnx":
            raise UsageError(
                f"{request.model}: {renamed} nodes of its ONNX form have no name, and only an .onnx file can be renamed"
            )
        notes.append(
            f"{renamed} unnamed nodes were named <OpType>_<index> (graph order) before the engines loaded the model"
        )
        spec = resolve_model(str(named))
    return spec, original_graph(onnx.load(str(named), load_external_data=False))


def _flops(
    spec: ModelSpec, request: ExplainRequest, original: OriginalGraph, notes: list[str]
) -> dict[str, int] | None:
    if not request.flops:
        return None
    try:
        from infermeter.graph.loaded import load_graph

        return flops_per_node(load_graph(spec, request.batch, request.inputs), original.names)
    except Exception as exc:
        notes.append(f"no FLOPs per block: {type(exc).__name__}: {exc}")
        return None


def _peak(request: ExplainRequest, precision: str) -> float | None:
    """This machine's cached arithmetic ceiling for `precision` (GFLOP/s), None when `peak` has not measured it:
    explain never measures it (that takes minutes)."""
    from infermeter.graph.roofline import ceiling_key
    from infermeter.machine.ceilings_cache import cached_peak

    peak = cached_peak(request.threads)
    value = peak.get(ceiling_key(precision)) if peak else None
    return float(value) if isinstance(value, int | float) else None


def summarize(profile: EngineProfile, original: OriginalGraph, covered: set[str]) -> EngineSummary:
    """An engine's row: P50, attributed, data movement, unattributed, coverage and the nodes left out."""
    attributed = sum(u.time_us for u in profile.units) if profile.profiled else None
    moving = sum(u.time_us for u in profile.units if u.kind == "data_movement") if profile.profiled else None
    rest = profile.p50_us - attributed if profile.p50_us is not None and attributed is not None else None
    notes = list(profile.notes)
    if rest is not None and rest <= -0.5:  # below the profilers' 1 µs resolution it is noise
        notes.append(
            f"unattributed is negative ({rest:.0f} µs): the units sum to more than the timed P50 "
            "(the profiler's own overhead, or units that overlap)"
        )
    folded = sorted(original.shape_nodes() - covered, key=original.names.index) if profile.profiled else []
    accounted = len(covered) + len(folded)
    coverage = accounted / len(original.names) if profile.profiled and original.names else None
    left = [n for n in original.names if n not in covered and n not in folded] if profile.profiled else []
    return EngineSummary(
        profile.engine,
        profile.p50_us,
        attributed_us=attributed,
        data_movement_us=moving,
        unattributed_us=rest,
        profiled=profile.profiled,
        precision=profile.precision,
        coverage=coverage,
        uncovered_nodes=left,
        folded_nodes=folded,
        notes=notes,
        warnings=list(profile.warnings),
        error=profile.error,
    )


def explain_model(request: ExplainRequest, progress: Callable[[str], None] | None = None) -> ExplainRecord:
    """Time and profile every engine on the model, align their units and make the record (`progress` hears
    which engine is being timed and profiled)."""
    check_request(request)
    from infermeter.models.inputs import generate_feeds, resolve_shapes

    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="infermeter-explain-") as folder:
        spec, original = _named_model(request, Path(folder), notes)
        feeds = generate_feeds(spec.inputs, resolve_shapes(spec.inputs, request.batch, request.inputs), 1)[0]
        case = Case(
            model=spec.ref,
            backend="",
            precision=request.precision,
            batch=request.batch,
            threads=request.threads,
            input_shapes=request.inputs,
            options=request.options,
        )
        job = EngineJob(spec, feeds, original, case, request.iterations)
        profiles = []
        for engine in request.engines:
            if progress is not None:
                progress(f"{engine}: timing, then profiling ({request.iterations} runs each)")
            profiles.append(profile_engine(engine, job))
        flops = _flops(spec, request, original, notes)
    for profile in profiles:
        profile.units = fill_gaps(profile.units, original)
    alignment = align({p.engine: p.units for p in profiles if p.profiled}, original)
    peak = _peak(request, request.precision)
    blocks = make_blocks(alignment, profiles, original, flops, peak)
    summaries = [summarize(p, original, alignment.covered.get(p.engine, set())) for p in profiles]
    moving = {s.engine: s.data_movement_us or 0.0 for s in summaries}
    return ExplainRecord(
        request.model,
        request.batch,
        threads=request.threads,
        precision=request.precision,
        iterations=request.iterations,
        engines=summaries,
        blocks=blocks,
        findings=findings(profiles, blocks, moving),
        node_count=len(original.names),
        notes=notes,
        peak_gflops=peak,
    )
