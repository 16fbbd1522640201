"""Timings into a case's figures: latency statistics over all samples (a thinned copy kept), throughput, the
per-shape statistics of a dynamic run, the memory timeline, and the warnings the figures call for."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.core.case import Case
from infermeter.figures.latency_stats import assess_run, latency_stats, memory_growth_warning, precision_warning
from infermeter.machine.interference import interference_warning, oversubscription_warning
from infermeter.measure.shapes import ShapePoint
from infermeter.measure.stoprule import StopState, max_time_warning
from infermeter.results.records import ComputePrecision, read_record
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:
    from infermeter.measure.execute import CaseRunner

# Samples a result keeps (`stored_samples`): enough for compare's tests and the charts, a few hundred kB of JSON.
MAX_STORED_SAMPLES = 20_000


def _per_shape(
    points: list[ShapePoint], samples_ms: list[float], set_indices: list[int], seed: int
) -> list[dict[str, Any]]:
    out = []
    for index, point in enumerate(points):
        mine = [ms for ms, used in zip(samples_ms, set_indices, strict=True) if used == index]
        if not mine:
            continue
        stats = dataclasses.asdict(latency_stats(mine, seed))
        out.append(
            {
                "label": point.label,
                "dims": dict(point.dims),
                "padded_dims": dict(point.padded_dims),
                "shapes": {name: list(dims) for name, dims in point.shapes.items()},
                "count": len(mine),
                "latency_ms": {k: list(v) if isinstance(v, tuple) else v for k, v in stats.items()},
            }
        )
    return sorted(out, key=lambda row: sorted(row["dims"].items()))


def _items_processed(case: Case, points: list[ShapePoint], set_indices: list[int]) -> float:
    """Total samples (inputs, not batches) processed: in a dynamic run the batch may vary from run to run."""
    if not points or "batch" not in dict(points[0].dims):
        return float(case.batch * len(set_indices))
    sizes = [dict(p.dims)["batch"] for p in points]
    return float(sum(sizes[i] for i in set_indices))


def _within_bursts(bursts: list[list[int]]) -> list[float]:
    """Each sample over its burst's median: the spread within bursts, without the moves between them."""
    out: list[float] = []
    for chunk in bursts:
        median = float(np.median(chunk))
        out += [value / median for value in chunk]
    return out


def stored_samples(samples_ms: list[float]) -> list[float]:
    """What a result keeps of its samples: all of them up to `MAX_STORED_SAMPLES`, else every k-th in time order
    (an even thinning keeps the distribution and the drift's shape for compare, history and the charts). A
    microsecond model timed for ten seconds made a results file of 100 MB, rewritten after every case."""
    step = -(-len(samples_ms) // MAX_STORED_SAMPLES)
    return samples_ms if step <= 1 else samples_ms[::step]


def _model_own(result: CaseResult, requested: str) -> bool:
    """True when the case runs the model's own precision (an FP16 file at the default fp32): no precision change."""
    record = read_record(result, ComputePrecision)
    return record is not None and record.model_own(requested)


def fill_measurements(runner: CaseRunner, state: StopState) -> None:
    """The case's figures from the runner's timings: latency statistics, the samples kept, throughput, the
    per-shape rows of a dynamic run, the memory timeline, and the warnings each figure calls for."""
    result, case, settings = runner.result, runner.case, runner.case.settings
    samples_ms = [ns / 1e6 for ns in runner.samples_ns]
    stats = latency_stats(samples_ms, settings.seed)
    result.latency_ms = stats
    result.timing.samples_ms = stored_samples(samples_ms)
    result.timing.iterations = len(samples_ms)
    if len(result.timing.samples_ms) < len(samples_ms):
        result.notes.append(f"samples_ms keeps every {len(samples_ms) // len(result.timing.samples_ms)}th of "
                            f"{len(samples_ms):,} samples; the statistics use all of them")  # fmt: skip
    result.timing.throughput = _items_processed(case, runner.points, runner.set_indices) / (runner.wall_ns / 1e9)
    result.timing.interference = runner.interference
    result.timing.target_ci = settings.target_ci or None
    # Tail percentiles short of samples are marked in tables (see report.summary), not warned about.
    interleaved = len(result.timing.rounds_p50_ms) > 1
    # Interleaved: the noise that matters is within a round (the machine's moves between rounds cancel in the
    # paired speedups), so high_cv judges each sample against its own burst's median.
    spread = _within_bursts(runner.bursts()) if interleaved else samples_ms
    result.warnings += assess_run(samples_ms, stats, result.loading.first_inference_ms, (), interleaved, spread)
    if runner.points:
        result.shapes.per_shape = _per_shape(runner.points, samples_ms, runner.set_indices, settings.seed)
    sampler = runner.sampler
    if sampler is not None:
        result.memory.rss_timeline_mb = sampler.timeline()
        growth = memory_growth_warning(sampler.times_s, sampler.rss_mb)
        if growth:
            result.warnings.append(growth)
    found = [
        None if _model_own(result, case.precision) else precision_warning(case.precision, result.precision_effective),
        interference_warning(runner.interference),
        oversubscription_warning(case.threads, case.streams, runner.interference.cpus),
        max_time_warning(state, settings),
    ]
    result.warnings += [warning for warning in found if warning is not None]
