"""Running generation cases: the timed driver, and each case driven in bursts like an inference case.

The driver owns the clock: it reads it before a request, in each `on_token()` callback and after the
backend returns. Warm-up requests run first and are not counted; the first of them is kept as the cold
figure. A `GenerationRunner` is a `measure.burstworker.BurstRunner`: in its own worker (`GenerationWorker`) the
parent drives it with the inference machinery, alone until the stop rule (`measure.stoprule`) or in interleaved
rounds with the other cases of its group (`measure.interleave`), with the CPU time other processes took around
each burst read as for an inference case (`measure.interference`). The stop rule judges each request's
end-to-end time, so its precision target is that of the per-request output tokens/s (gen_len / E2E).

A case's result is a core `CaseResult` with the generation metrics in a `GenerationSummary` record and what the
requests were in a `GenerationCase` record (`results.records`).
"""

from __future__ import annotations

import itertools
import multiprocessing.connection
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import psutil

from infermeter.core.errors import InfermeterError
from infermeter.figures.latency_stats import assess_run, latency_stats
from infermeter.llm.backends import get_generation_backend
from infermeter.llm.backends.base import GenerateCase, GenerationSession
from infermeter.llm.engine_build import EngineBuild, build_warning
from infermeter.llm.generation_metrics import SLO, RequestTiming, summarize
from infermeter.llm.tinyllama import corpus_text
from infermeter.machine.interference import CpuMeter, interference_warning, oversubscription_warning
from infermeter.measure.burstworker import BurstWorker, run_worker_until_stopped, serve_bursts
from infermeter.measure.execute import measured_in_process, now_iso, peak_rss_mb, record_failure
from infermeter.measure.isolation import PhaseCallback, WorkerSetup, WorkerStarted
from infermeter.measure.stoprule import Burst, StopState, max_time_warning
from infermeter.results.records import GenerationCase, write_record
from infermeter.results.records.generate import THROUGHPUT_UNIT
from infermeter.results.schema import NO_INTERFERENCE, CaseResult, CaseWarning, ShapeFigures, case_to_dict

Clock = Callable[[], float]


def time_request(
    session: GenerationSession, prompt_ids: list[int], gen_len: int, batch: int, clock: Clock = time.perf_counter
) -> list[RequestTiming]:
    """Run one (batched) generation and return one `RequestTiming` per sequence (they share the timeline)."""
    token_times: list[float] = []
    start = clock()
    session.generate(prompt_ids, gen_len, batch, lambda: token_times.append(clock()))
    end = clock()
    if len(token_times) != gen_len:
        raise InfermeterError(f"backend reported {len(token_times)} token steps for --gen-len {gen_len}")
    timing = RequestTiming(start_s=start, end_s=end, token_times_s=tuple(token_times), prompt_tokens=len(prompt_ids))
    return [timing] * batch


def prompt_ids_for(session: GenerationSession, prompt_len: int) -> list[int]:
    """Exactly `prompt_len` token ids: the shipped text, tokenized by the model and repeated as needed."""
    ids = session.tokenize(corpus_text())
    if not ids:
        raise InfermeterError("the model's tokenizer produced no tokens for the shipped text")
    while len(ids) < prompt_len:
        ids = ids + ids
    return ids[:prompt_len]


def blank_generate_result(case: GenerateCase, status: str, error: str | None = None) -> CaseResult:
    """A result with the case's controlled variables and a status."""
    backend = get_generation_backend(case.backend)
    result = CaseResult(
        id=case.id,
        model=case.model,
        backend=case.backend,
        backend_version=backend.version(),
        device=backend.device,
        batch=case.batch,
        shape_mode="static",
        precision=case.option("precision", "native") or "native",
        precision_effective=None,
        threads=case.threads,
        status=status,
        error=error,
        options=dict(case.options),
        shapes=ShapeFigures(input_shapes={"prompt": [case.batch, case.prompt_len]}),
        started=now_iso(),
    )
    write_record(result, GenerationCase(case.prompt_len, case.gen_len))
    return result


def unavailable_reason(case: GenerateCase) -> str | None:
    """Why `case` cannot run here, checked without loading."""
    backend = get_generation_backend(case.backend)
    return backend.available() or backend.unsupported_reason(case)


def _shifted(timing: RequestTiming, by_s: float) -> RequestTiming:
    """`timing` moved `by_s` seconds earlier."""
    tokens = tuple(t - by_s for t in timing.token_times_s)
    return replace(timing, start_s=timing.start_s - by_s, end_s=timing.end_s - by_s, token_times_s=tokens)


def _per_request_wording(warning: CaseWarning) -> CaseWarning:
    """The core's sample-count warnings say `--iterations`; a generation case counts requests instead."""
    if warning.code not in ("too_few_samples", "max_time_reached"):
        return warning
    message = warning.message.replace("--iterations", "--requests").replace("iterations", "requests")
    return CaseWarning(warning.code, message, warning.detail.replace("iterations", "requests"))


class GenerationRunner:
    """One generation case in this process, in the three steps a coordinator drives (`BurstRunner`): `load` (the
    model, the prompt, the warm-up requests), `burst` (timed requests) and `finish` (metrics and warnings)."""

    def __init__(
        self,
        case: GenerateCase,
        slo: SLO | None = None,
        clock: Clock = time.perf_counter,
        on_phase: PhaseCallback | None = None,
    ) -> None:
        self.case, self.slo, self.clock = case, slo, clock
        self.phase = on_phase or (lambda _name: None)
        self.result = blank_generate_result(case, "ok")
        self.session: GenerationSession | None = None
        self.engine_build: EngineBuild | None = None
        self.prompt: list[int] = []
        self.size_mb: float | None = None
        self.timings: list[RequestTiming] = []  # one per request (a batch's sequences share it), gaps removed
        self.burst_lengths: list[int] = []
        self.interference = NO_INTERFERENCE
        self._meter = CpuMeter()
        self._gap_s = 0.0  # time between bursts (other cases' rounds, re-warming), taken out of the timeline
        self._last_end_s: float | None = None
        self._started = time.perf_counter()

    def load(self) -> bool:
        """Load the model and run the warm-up requests; False when the case cannot run (its result says why)."""
        case, result = self.case, self.result
        reason = unavailable_reason(case)
        if reason:
            result.status, result.error = "unavailable", reason
            return False
        try:
            result.memory.rss_before_load_mb = psutil.Process().memory_info().rss / 2**20
            self.phase("loading")
            load_start = time.perf_counter()
            self.session = get_generation_backend(case.backend)().load(case)
            # An engine that reads back the ISA its build targets (llama-cpp): kept past the session's close.
            self.engine_build = getattr(self.session, "engine_build", None)
            result.loading.load_s = time.perf_counter() - load_start
            result.loading.load_phases_s = dict(self.session.load_phases_s)
            result.notes = list(self.session.notes)
            self.clock = getattr(self.session, "clock", None) or self.clock  # the fake backend brings its own clock
            self.prompt = prompt_ids_for(self.session, case.prompt_len)
            self.phase("warm-up")
            for _ in range(case.warmup):
                warm = self._request()
                result.timing.warmup_ms.append((warm.end_s - warm.start_s) * 1e3)
            result.loading.first_inference_ms = result.timing.warmup_ms[0] if result.timing.warmup_ms else None
            result.timing.warmup_iterations = len(result.timing.warmup_ms)
            result.precision_effective = self.session.effective_precision()
            self.size_mb = self.session.model_size_mb()
        except Exception as exc:
            record_failure(result, exc)
            self.close()
            return False
        self.phase("measuring")
        return True

    def _request(self) -> RequestTiming:
        assert self.session is not None
        return time_request(self.session, self.prompt, self.case.gen_len, self.case.batch, self.clock)[0]

    def burst(self, min_s: float, max_s: float, min_iterations: int = 1, rewarm: int = 0) -> Burst:
        """Timed requests until `min_iterations` and `min_s` seconds (on the session's clock), or `max_s`; `rewarm`
        untimed requests first. Each sample is one request's end-to-end time. Without a --min-time the seconds
        do not count: an interleaved round is then one request per case (an inference burst's 20 ms floor is for
        inferences of microseconds; a request is long enough to be a round of its own)."""
        if self.case.settings.min_time_s <= 0:
            min_s = 0.0
        for _ in range(rewarm):
            self._request()
        before, wall_start = self._meter.snapshot(), time.perf_counter()
        timings: list[RequestTiming] = []
        elapsed_s = 0.0
        while not timings or not ((len(timings) >= min_iterations and elapsed_s >= min_s) or elapsed_s >= max_s):
            timings.append(self._request())
            elapsed_s = timings[-1].end_s - timings[0].start_s
        self.interference += self._meter.between(before, self._meter.snapshot(), time.perf_counter() - wall_start)
        if self._last_end_s is not None:
            self._gap_s += timings[0].start_s - self._last_end_s
        self._last_end_s = timings[-1].end_s
        self.timings += [_shifted(t, self._gap_s) for t in timings]
        self.burst_lengths.append(len(timings))
        return Burst([round((t.end_s - t.start_s) * 1e9) for t in timings], round(elapsed_s * 1e9))

    def finish(self, state: StopState, interleaved: bool = False) -> CaseResult:
        """The metrics over every timed request, the core's latency fields holding each request's E2E, and the
        warnings: too few requests, interference, oversubscription, --max-time reached."""
        result, case = self.result, self.case
        peak_mb = peak_rss_mb()
        self.close()
        result.duration_s = time.perf_counter() - self._started
        if result.status != "ok" or not self.timings:
            return result
        summary = summarize([t for t in self.timings for _ in range(case.batch)], self.slo)
        e2e_ms = [(t.end_s - t.start_s) * 1e3 for t in self.timings]
        result.latency_ms = latency_stats(e2e_ms, case.seed)
        result.timing.samples_ms, result.timing.iterations = e2e_ms, len(e2e_ms)
        result.timing.throughput = summary.output_tokens_per_s
        result.memory.peak_rss_mb = peak_mb
        result.timing.interference = self.interference
        result.timing.target_ci = case.settings.target_ci or None
        if interleaved:  # each burst was one round of its group: its median is that round's
            ends = list(itertools.accumulate(self.burst_lengths))
            result.timing.rounds_p50_ms = [
                statistics.median(e2e_ms[end - n : end]) for n, end in zip(self.burst_lengths, ends, strict=True)
            ]
        found = [
            *assess_run(e2e_ms, result.latency_ms, result.loading.first_inference_ms),
            interference_warning(self.interference),
            oversubscription_warning(case.threads, 1, self.interference.cpus),
            max_time_warning(state, case.settings),
        ]
        if self.engine_build is not None:
            write_record(result, self.engine_build)
            found.append(build_warning(self.engine_build))
        result.warnings += [_per_request_wording(w) for w in found if w is not None]
        write_record(result, summary)
        requests = GenerationCase(
            case.prompt_len, case.gen_len, throughput_unit=THROUGHPUT_UNIT, model_size_mb=self.size_mb
        )
        write_record(result, requests)
        return result

    def close(self) -> None:
        """Free the model (idempotent)."""
        if self.session is not None:
            self.session.close()
            self.session = None


def execute_generate_case(case: GenerateCase, slo: SLO | None = None, clock: Clock = time.perf_counter) -> CaseResult:
    """Load, warm up and measure `case` in this process until its stop rule; framework errors become a `failed`
    result."""
    runner = GenerationRunner(case, slo, clock)
    return measured_in_process(runner, case.settings) if runner.load() else runner.result


def _generation_job(
    conn: multiprocessing.connection.Connection, _started: WorkerStarted, case: GenerateCase, slo: SLO | None
) -> None:
    """The worker's job (under `isolation.worker_main`): load the case, then serve the parent's bursts
    (`measure.burstworker.serve_bursts`)."""
    runner = GenerationRunner(case, slo, on_phase=lambda name: conn.send(("phase", name)))
    if runner.load():
        serve_bursts(conn, runner)
    else:
        conn.send(("result", case_to_dict(runner.result)))


class GenerationWorker(BurstWorker):
    """One generation case in a fresh worker, driven from here (`measure.burstworker.BurstWorker`)."""

    def __init__(self, case: GenerateCase, slo: SLO | None, on_phase: PhaseCallback | None = None) -> None:
        def blank(status: str, error: str) -> CaseResult:
            return blank_generate_result(case, status, error)

        super().__init__(_generation_job, (case, slo), case.timeout_s, blank, on_phase, setup=WorkerSetup(case.threads))


def run_generate_isolated(
    case: GenerateCase, slo: SLO | None = None, on_phase: PhaseCallback | None = None
) -> CaseResult:
    """Run `case` alone in a fresh worker until its stop rule, within `case.timeout_s`; crashes and hangs become
    results."""
    reason = unavailable_reason(case)
    if reason:
        return blank_generate_result(case, "unavailable", reason)
    return run_worker_until_stopped(GenerationWorker(case, slo, on_phase), case.settings)
