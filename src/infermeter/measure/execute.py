"""Running one case in this process: load, generate inputs, warm up, measure, and turn timings into a result."""

from __future__ import annotations

import math
import resource
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psutil

from infermeter.backends.base import Session
from infermeter.backends.engine_log import attach_engine_log, capture_engine_log
from infermeter.backends.registry import get_backend
from infermeter.build.case_build import build_artifact, discard_private, load_session
from infermeter.core.case import Case, MeasureSettings
from infermeter.core.errors import InfermeterError, describe_exception, failure_status
from infermeter.machine.interference import CpuMeter
from infermeter.measure.case_figures import fill_measurements
from infermeter.measure.footprint import EnergyReading, case_footprint, read_energy
from infermeter.measure.int8_readback import int8_run, with_profile
from infermeter.measure.loop import timed_loop, warm_up
from infermeter.measure.memory import RssSampler
from infermeter.measure.precision_readback import read_back
from infermeter.measure.shapes import ShapePoint, asked_shapes, pad_feeds, plan_shapes
from infermeter.measure.stoprule import Burst, StopState, run_until_stopped
from infermeter.measure.streams import run_streams
from infermeter.models.inputs import Feeds, resolve_shapes
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.records import Int8Run, write_record
from infermeter.results.schema import NO_INTERFERENCE, CaseResult, CaseWarning, ShapeFigures, now_iso

if TYPE_CHECKING:
    from infermeter.measure.burstworker import BurstRunner

PhaseCallback = Callable[[str], None]


def blank_result(spec: ModelSpec, case: Case, status: str, error: str | None = None) -> CaseResult:
    """A result carrying the case's controlled variables and a status, before (or instead of) measuring."""
    backend = get_backend(case.backend)
    result = CaseResult(
        id=case.id,
        model=spec.ref,
        backend=case.backend,
        backend_version=backend.version(),
        device=backend.device,
        batch=case.batch,
        shape_mode=case.shape_mode,
        precision=case.precision,
        precision_effective=None,
        threads=case.threads,
        status=status,
        error=error,
        # The allocator is shown with the options, which label the variants of one backend in tables.
        options=dict(case.options) | ({"allocator": case.allocator} if case.allocator else {}),
        shapes=ShapeFigures(
            input_shapes={name: list(dims) for name, dims in case.input_shapes},
            dynamic={name: list(sizes) for name, sizes in case.dynamic},
        ),
        started=now_iso(),
        streams=case.streams,
        synthetic=backend.synthetic,
    )
    if case.reshape:  # the dims run instead of the declared ones (`--reshape`), and what the file declared
        result.extra["reshape"] = {name: list(dims) for name, dims in case.reshape}
        result.extra["declared_shapes"] = {name: [str(d) for d in dims] for name, dims in spec.declared}
    return result


def record_failure(result: CaseResult, exc: Exception) -> None:
    """Mark `result` failed by `exc`: our own errors keep their message, a framework's exception its type and the
    line(s) that say why (`errors.describe_exception`). The whole text stays in the notes: the traceback of a
    framework's exception, or of the engine's exception that one of our errors wraps (`raise ... from exc`)."""
    result.status = failure_status(exc)
    result.error = describe_exception(exc)
    cause = exc.__cause__
    if not isinstance(exc, InfermeterError) or (cause is not None and not isinstance(cause, InfermeterError)):
        result.notes.append("".join(traceback.format_exception(exc, limit=8)))


def unavailable_reason(spec: ModelSpec, case: Case) -> str | None:
    """Why `case` cannot run here (framework missing, precision unsupported…), checked without loading."""
    backend = get_backend(case.backend)
    return backend.available() or backend.unsupported_reason(spec, case)


def peak_rss_mb() -> float:
    """High-water mark of this process's resident memory, in MB.

    On Linux this is `VmHWM` of /proc/self/status: the peak of this process image alone. `ru_maxrss` is not
    used there because the kernel carries it across fork and exec, so a worker spawned by a parent holding
    600 MB (torch imported for an ONNX export) would report at least 600 MB whatever it did itself."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    # Elsewhere ru_maxrss (KiB on Linux, bytes on macOS) is the best there is.
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024


def _feed_sets(spec: ModelSpec, case: Case) -> tuple[list[Feeds], list[ShapePoint], dict[str, tuple[int, ...]]]:
    """Input sets for the loop: the case's data batched (`--data`), or generated; constant inputs set (`--input
    NAME=VALUE`). In a dynamic run, one set per shape point (rotated so shapes interleave)."""
    from infermeter.models.feeds_data import case_feed_sets, generated_feed_sets

    settings = case.settings
    if case.shape_mode != "dynamic" or not case.dynamic:
        sets = case_feed_sets(spec.inputs, case, settings.input_sets, settings.seed)
        return sets, [], {name: tuple(array.shape) for name, array in sets[0].items()}
    shapes = resolve_shapes(spec.inputs, case.batch, case.input_shapes)
    points = plan_shapes(spec.inputs, case.batch, case.input_shapes, case.dynamic, case.buckets, settings.seed)
    sets = []
    for index, point in enumerate(points):
        feeds = generated_feed_sets(
            spec.inputs, case.input_values, asked_shapes(spec.inputs, point), 1, settings.seed + index
        )
        sets.append(pad_feeds(spec.inputs, feeds[0], point))
    return sets, points, shapes


class CaseRunner:
    """One case in this process, in three steps that a coordinator drives: `load` (load, prepare the inputs, time
    the first inference, warm up), `burst` (one timed burst; as many as the stop rule or the interleaving asks),
    and `finish` (parity check, statistics, warnings). The isolated worker and `execute_case` both run this."""

    def __init__(
        self, spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None, artifact: Artifact | None = None
    ) -> None:
        self.spec, self.case, self.artifact = spec, case, artifact
        self.phase = on_phase or (lambda _name: None)
        self.result = blank_result(spec, case, "ok")
        self.session: Session | None = None
        self.int8: Int8Run | None = None
        self.prepared: list[Any] = []
        self.points: list[ShapePoint] = []
        self.samples_ns: list[int] = []
        self.burst_lengths: list[int] = []
        self.set_indices: list[int] = []
        self.wall_ns = 0
        self.interference = NO_INTERFERENCE
        self._meter = CpuMeter()
        self.sampler: RssSampler | None = None  # memory over time while the loop runs (`case_figures` reads it)
        self._energy_start: EnergyReading | None = None
        self._started = time.perf_counter()

    def load(self) -> bool:
        """Load and warm up, the engines' own log captured (`engine_log`); False when the case cannot run (its
        result then says why, with the engine's last log lines)."""
        with capture_engine_log() as log:
            loaded = self._load()
        attach_engine_log(self.result, log, self.artifact.engine_log if self.artifact is not None else None)
        return loaded

    def _load(self) -> bool:
        reason = unavailable_reason(self.spec, self.case)
        if reason:
            self.result.status, self.result.error = "unavailable", reason
            return False
        spec, case, result = self.spec, self.case, self.result
        try:
            feed_sets, self.points, shapes = _feed_sets(spec, case)
            result.shapes.input_shapes = {name: list(dims) for name, dims in shapes.items()}
            result.memory.rss_before_load_mb = psutil.Process().memory_info().rss / 2**20
            self._build()
            self.phase("loading")
            load_start = time.perf_counter()
            self.session = load_session(spec, case, self.artifact)
            result.loading.load_s = time.perf_counter() - load_start
            result.loading.load_phases_s = dict(self.session.load_phases_s)
            result.notes += list(self.artifact.notes if self.artifact else ()) + list(self.session.notes)
            result.warnings += [CaseWarning(code, message) for code, message in self.session.warnings]
            result.loading.cache_hit = self.session.cache_hit
            self.prepared = [self.session.prepare(feeds) for feeds in feed_sets]
            # In a dynamic run every shape is seen once before timing: a shape's first run re-plans the engine.
            self.phase("first inference")
            first_ns, warmup_ns = warm_up(
                self.session, self.prepared, max(case.settings.warmup_iterations, len(self.points))
            )
            result.loading.first_inference_ms = first_ns / 1e6
            result.timing.warmup_ms = [ns / 1e6 for ns in warmup_ns]
            result.timing.warmup_iterations = len(warmup_ns)
            read_back(spec, case, self.session, self.prepared[0], result)
            if case.precision == "int8":
                self.int8 = int8_run(case, self.artifact, self.session)
                result.notes.append(f"int8: {self.int8.label()}")
        except Exception as exc:
            record_failure(result, exc)
            self.close()
            return False
        if case.shape_mode == "dynamic" or case.streams > 1:
            self.sampler = RssSampler().__enter__()
        self._energy_start = read_energy()
        self.phase("measuring")
        return True

    def _build(self) -> None:
        """The case's artifact: the one the build stage made, else built here (in-process runs, `cache=off`),
        recorded apart from the load with its cache state and phases."""
        if self.artifact is None:
            self.phase("building")
            self.artifact = build_artifact(self.spec, self.case)
        if self.artifact is not None:
            self.result.loading.build = self.artifact
            self.result.warnings += [CaseWarning(code, message) for code, message in self.artifact.warnings]

    def burst(self, min_s: float, max_s: float, min_iterations: int = 1, rewarm: int = 0) -> Burst:
        """One timed burst (`min_iterations` and `min_s` seconds, or `max_s` seconds), with the CPU accounting
        around it. `rewarm` untimed iterations first: after a pause the caches and thread pools are cold again,
        and that first run would otherwise be timed as if it were steady state."""
        assert self.session is not None
        settings = replace(self.case.settings, min_iterations=min_iterations, min_time_s=min_s, max_time_s=max_s)
        count = len(self.prepared)
        for i in range(rewarm):
            self.session.run(self.prepared[(len(self.samples_ns) + i) % count])
            self.session.sync()
        before, wall_start = self._meter.snapshot(), time.perf_counter()
        if self.case.streams > 1:
            streamed = run_streams(self.session, self.prepared, settings, self.case.streams)
            samples_ns, wall_ns = streamed.samples_ns, streamed.wall_ns
            # Which input set each request ran: stream s starts at set s.
            indices = [(s + j) % count for s, stream in enumerate(streamed.per_stream_ns) for j in range(len(stream))]
        else:
            first = len(self.samples_ns)
            samples_ns, _ = timed_loop(self.session, self.prepared, settings, first_set=first)
            wall_ns = sum(samples_ns)
            indices = [(first + i) % count for i in range(len(samples_ns))]
        after = self._meter.snapshot()
        found = self._meter.between(before, after, time.perf_counter() - wall_start)
        self.interference += found
        self.samples_ns += samples_ns
        self.burst_lengths.append(len(samples_ns))
        self.set_indices += indices
        self.wall_ns += wall_ns
        # Per burst too: a sequential decision sets aside the rounds that other work disturbed (`decision`).
        share = found.other_share
        return Burst(samples_ns, wall_ns, share if math.isfinite(share) else 0.0)

    def finish(self, state: StopState, interleaved: bool = False) -> CaseResult:
        """Statistics and warnings over every burst, after the parity check when asked for. `interleaved`: each
        burst was one round of an interleaved group, and its median is kept as that round's."""
        result = self.result
        if self.sampler is not None:
            self.sampler.__exit__()
        # Taken before the parity check, whose reference model would otherwise count in this case's memory.
        peak_mb = peak_rss_mb()
        energy_end = read_energy()
        try:
            if self.case.settings.check_parity:
                from infermeter.parity.run import check_case_parity

                self.phase("parity check")
                result.extra["parity"] = check_case_parity(self.spec, self.case, session=self.session)
            if self.int8 is not None and result.status == "ok":
                self.phase("int8 profile")
                self.int8 = with_profile(self.int8, self.spec, self.case, self.artifact, self.prepared[0])
                write_record(result, self.int8)
        except Exception as exc:
            record_failure(result, exc)
        finally:
            self.close()
        result.duration_s = time.perf_counter() - self._started
        if result.status == "ok" and self.samples_ns:
            result.memory.peak_rss_mb = peak_mb
            # RAPL counts the socket: interleaved, the other cases' bursts would be in this case's energy.
            energy = None if interleaved or self._energy_start is None else (self._energy_start, energy_end)
            footprint = case_footprint(self.spec, self.case, self.artifact, energy, len(self.samples_ns))
            if interleaved:
                footprint = replace(footprint, energy_reason="interleaved with other cases: use --no-interleave")
            write_record(result, footprint)
            if interleaved:
                result.timing.rounds_p50_ms = [float(np.median(chunk)) / 1e6 for chunk in self.bursts()]
            fill_measurements(self, state)
        return result

    def bursts(self) -> list[list[int]]:
        """The samples (ns) of each burst, in order."""
        out, start = [], 0
        for length in self.burst_lengths:
            out.append(self.samples_ns[start : start + length])
            start += length
        return out

    def close(self) -> None:
        """Release the session (idempotent)."""
        if self.session is not None:
            self.session.close()
            self.session = None
        discard_private(self.artifact)


def execute_case(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None, artifact: Artifact | None = None
) -> CaseResult:
    """Load (from `artifact`, else built here), warm up and measure `case` in this process until the stop rule.
    Framework errors become a `failed` result."""
    runner = CaseRunner(spec, case, on_phase, artifact)
    return measured_in_process(runner, case.settings) if runner.load() else runner.result


def measured_in_process(runner: BurstRunner, settings: MeasureSettings) -> CaseResult:
    """A loaded case (an inference or a generation case) timed in this process until its stop rule, then
    finished; a framework failure mid-run ends it as `failed`, with the reason."""
    try:
        state = run_until_stopped(runner, settings)
    except Exception as exc:
        runner.close()
        record_failure(runner.result, exc)
        return runner.result
    return runner.finish(state)
