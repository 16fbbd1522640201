"""One soak case in this process (`bench --soak N`): load, then feed the soak's stream request by request,
sampling the process's RSS and USS every K requests (and at least every few seconds), and turn it into a result
with its `SoakRecord` and `Footprint`. The isolated worker (`measure.soak_run`) runs this."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil

from infermeter.backends.base import Session
from infermeter.build.case_build import build_artifact, discard_private, load_session
from infermeter.core.case import Case
from infermeter.figures.latency_stats import latency_stats
from infermeter.measure.allocator import glibc_heap_mb, loaded_allocator, release_memory
from infermeter.measure.case_figures import stored_samples
from infermeter.measure.execute import blank_result, peak_rss_mb, record_failure
from infermeter.measure.footprint import EnergyReading, case_footprint, read_energy
from infermeter.measure.precision_readback import read_back
from infermeter.measure.shapes import asked_shapes, pad_feeds, plan_shapes
from infermeter.measure.soak_analysis import (
    MemorySample,
    growth_slope,
    growth_warning,
    is_growing,
    latency_windows,
    plateau_at,
    thin,
    tolerance_mb,
)
from infermeter.measure.soak_stream import SoakStream, soak_stream
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.records import SoakRecord, write_record
from infermeter.results.schema import CaseResult

# At least one memory sample every this many seconds, whatever --soak-sample-every says.
SAMPLE_S = 2.0


@dataclass
class SoakRun:
    """What the loop measured: per-request latencies (ns), memory samples, why it stopped, energy around it."""

    latencies_ns: list[int]
    samples: list[MemorySample]
    stopped_by: str
    energy: tuple[EnergyReading, EnergyReading]


def data_lengths(spec: ModelSpec, case: Case) -> list[int]:
    """Lengths found in `--data`: per sample, the non-zero count of an attention-mask input along the first
    `--dynamic` dim (real lengths in padded data), else that dim's size."""
    if case.data is None or not case.dynamic:
        return []
    from infermeter.models.samples import load_samples

    dim = case.dynamic[0][0]
    samples = load_samples(spec.inputs, case.data.ref)
    for item in sorted(spec.inputs, key=lambda s: "mask" not in s.name.lower()):
        if dim in item.shape and item.name in samples.arrays:
            array = samples.arrays[item.name]
            axis = item.shape.index(dim)
            if "mask" in item.name.lower() and array.ndim == 2 and axis == 1:
                return [int(n) for n in np.count_nonzero(array, axis=1)]
            return [int(array.shape[axis])] * samples.count
    return []


def stream_feeds(spec: ModelSpec, case: Case, stream: SoakStream) -> dict[tuple[int, ...], Feeds]:
    """One generated feed set per distinct combination of sizes in the stream, padded to its bucket."""
    out = {}
    for index, sizes in enumerate(sorted(stream.distinct())):
        dims = tuple((name, (size,)) for name, size in zip(stream.names, sizes, strict=True))
        point = plan_shapes(spec.inputs, case.batch, case.input_shapes, dims, case.buckets, case.settings.seed)[0]
        from infermeter.models.feeds_data import generated_feed_sets

        generated = generated_feed_sets(
            spec.inputs, case.input_values, asked_shapes(spec.inputs, point), 1, case.settings.seed + index
        )
        out[sizes] = pad_feeds(spec.inputs, generated[0], point)
    return out


Loaded = tuple[Session, dict[tuple[int, ...], Any]]


def soak_loop(session: Session, stream: SoakStream, prepared: dict[tuple[int, ...], Any], case: Case,
              reload: Callable[[Session], Loaded] | None = None,
              progress: Callable[[int], None] | None = None) -> SoakRun:  # fmt: skip
    """Feed the stream until --soak requests or --soak-minutes (whichever first), timing each request alone
    (`run(); sync()` between two clock reads) and sampling memory between requests. With --soak-recycle N,
    `reload` replaces the session every N requests (untimed), as `serve --recycle-after` does. `progress` is told
    the requests done at every memory sample (the parent's sign of life)."""
    settings = case.settings
    recycle = settings.soak_recycle_after if reload is not None else 0
    total = settings.soak_requests or float("inf")
    # At least ~100 samples over a bounded soak, so that a short replay still gets its slope.
    every = max(min(settings.soak_sample_every, settings.soak_requests // 100 or settings.soak_sample_every), 1)
    process = psutil.Process()
    clock = time.perf_counter_ns
    start = clock()
    deadline = start + int(settings.soak_minutes * 60e9) if settings.soak_minutes else None
    samples: list[MemorySample] = []

    def sample(done: int, now_ns: int) -> None:
        info = process.memory_full_info()
        samples.append(MemorySample(done, (now_ns - start) / 1e9, info.rss / 2**20, info.uss / 2**20))
        if progress is not None:
            progress(done)

    before = read_energy()
    sample(0, start)
    latencies: list[int] = []
    run, sync = session.run, session.sync
    next_sample = start + int(SAMPLE_S * 1e9)
    stopped_by = "requests"
    done = 0
    while done < total:
        feeds = prepared[stream.request(done)]
        t0 = clock()
        run(feeds)
        sync()
        t1 = clock()
        latencies.append(t1 - t0)
        done += 1
        if done % every == 0 or t1 >= next_sample:
            sample(done, t1)
            next_sample = t1 + int(SAMPLE_S * 1e9)
        if deadline is not None and t1 >= deadline:
            stopped_by = "minutes"
            break
        if recycle and done % recycle == 0 and reload is not None:
            session, prepared = reload(session)
            run, sync = session.run, session.sync
    if samples[-1].request != done:
        sample(done, clock())
    return SoakRun(latencies, samples, stopped_by, (before, read_energy()))


def soak_case(
    spec: ModelSpec, case: Case, artifact: Artifact | None = None, on_phase: Callable[[str], None] | None = None
) -> CaseResult:
    """Load `case` (building its artifact here when none is given) and soak it; a framework error is a `failed`
    result, never raised."""
    phase = on_phase or (lambda _name: None)
    result = blank_result(spec, case, "ok")
    session: Session | None = None
    try:
        stream = soak_stream(case.dynamic, case.buckets, case.settings.soak_requests, case.settings.soak_lengths,
                             case.settings.seed, data_lengths(spec, case))  # fmt: skip
        feeds = stream_feeds(spec, case, stream)
        result.memory.rss_before_load_mb = psutil.Process().memory_info().rss / 2**20
        if artifact is None:
            phase("building")
            artifact = build_artifact(spec, case)
        result.loading.build = artifact
        phase("loading")
        started = time.perf_counter()
        session = load_session(spec, case, artifact)
        result.loading.load_s = time.perf_counter() - started
        result.loading.load_phases_s = dict(session.load_phases_s)
        result.notes += list(session.notes)
        prepared = {sizes: session.prepare(f) for sizes, f in feeds.items()}
        read_back(spec, case, session, next(iter(prepared.values())), result)

        def reload(old: Session) -> Loaded:
            nonlocal session
            old.close()
            session = None
            release_memory()
            session = load_session(spec, case, artifact)
            return session, {sizes: session.prepare(f) for sizes, f in feeds.items()}

        phase("soaking")
        total = f"/{case.settings.soak_requests:,}" if case.settings.soak_requests else ""
        soaked = soak_loop(session, stream, prepared, case, reload, lambda done: phase(f"soaking {done:,}{total}"))
    except Exception as exc:
        record_failure(result, exc)
        return result
    finally:
        if session is not None:
            session.close()
        discard_private(artifact)
    _fill(result, case, stream, soaked)
    write_record(result, case_footprint(spec, case, artifact, soaked.energy, len(soaked.latencies_ns)))
    return result


def _fill(result: CaseResult, case: Case, stream: SoakStream, soaked: SoakRun) -> None:
    """The case's statistics (over the requests after warm-up) and its soak record."""
    ms = [ns / 1e6 for ns in soaked.latencies_ns]
    warm, explored = len(stream.warmup), len(stream.exploration)
    timed = ms[warm:] or ms
    result.loading.first_inference_ms = ms[0] if ms else None
    result.timing.warmup_ms = ms[1:warm]
    result.timing.warmup_iterations = max(warm - 1, 0)
    result.latency_ms = latency_stats(timed, case.settings.seed)
    result.timing.samples_ms = stored_samples(timed)
    result.timing.iterations = len(timed)
    result.timing.throughput = case.batch * len(timed) / (sum(soaked.latencies_ns[warm:] or soaked.latencies_ns) / 1e9)
    result.memory.peak_rss_mb = peak_rss_mb()
    samples = soaked.samples
    result.memory.rss_timeline_mb = [[row[1], row[2]] for row in thin(samples, 200)]
    replay_start = warm + explored
    replay = [s for s in samples if s.request >= replay_start]
    replay_requests = max(len(ms) - replay_start, 0)
    slope = growth_slope([s.request for s in replay], [s.rss_mb for s in replay])
    tol = tolerance_mb(max(s.rss_mb for s in samples))
    growing = is_growing(slope, replay_requests, tol)
    notes = []
    if replay_requests == 0:
        notes.append("the soak stopped before its replay: no growth slope (raise --soak or --soak-minutes)")
    record = SoakRecord(
        requests=len(ms),
        warmup_requests=min(warm, len(ms)),
        exploration_requests=min(explored, max(len(ms) - warm, 0)),
        replay_requests=replay_requests,
        distinct_shapes=len(stream.distinct()),
        lengths=case.settings.soak_lengths,
        stopped_by=soaked.stopped_by,
        samples=thin(samples),
        slope_mb_per_1k=None if slope is None else round(slope.mb_per_1k, 4),
        slope_ci_mb_per_1k=None if slope is None else [round(slope.low, 4), round(slope.high, 4)],
        growing=growing,
        plateau_at=None if growing else plateau_at(samples, tol),
        tolerance_mb=round(tol, 2),
        peak_rss_mb=round(max(s.rss_mb for s in samples), 2),
        start_rss_mb=round(samples[0].rss_mb, 2),
        end_rss_mb=round(samples[-1].rss_mb, 2),
        windows=latency_windows(ms),
        allocator=loaded_allocator(),
        size_range={name: [min(sizes), max(sizes)] for name, sizes in case.dynamic},
        buckets={name: list(sizes) for name, sizes in case.buckets},
        recycle_after=case.settings.soak_recycle_after,
        heap=glibc_heap_mb(),
        notes=notes,
        requested_shapes=len(stream.distinct()),
        padded_shapes=len(stream.padded(case.buckets)),
    )
    write_record(result, record)
    warning = growth_warning(growing, slope, replay_requests)
    if warning is not None:
        result.warnings.append(warning)
