"""Running generation cases: the timed driver, and each case in its own worker process (`measure.isolation`).

The driver owns the clock: it reads it before a request, in each `on_token()` callback and after the
backend returns. Warm-up requests run first and are not counted; the first of them is kept as the cold
figure. A case's result is a core `CaseResult` with the generation metrics in a `GenerationSummary` record and
what the requests were in a `GenerationCase` record (`results.records`).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import time
from collections.abc import Callable

import psutil

from infermeter.errors import InfermeterError
from infermeter.generate.backends import get_generation_backend
from infermeter.generate.backends.base import GenerateCase, GenerationSession
from infermeter.generate.engine_build import build_warning
from infermeter.generate.metrics import SLO, RequestTiming, summarize
from infermeter.generate.tinyllama import corpus_text
from infermeter.measure.execute import now_iso, peak_rss_mb, record_failure
from infermeter.measure.isolation import die_with_parent, run_in_worker, set_thread_environment
from infermeter.results.records import GenerationCase, write_record
from infermeter.results.records.generate import THROUGHPUT_UNIT
from infermeter.results.schema import CaseResult, CaseWarning, case_from_dict, case_to_dict
from infermeter.stats import assess_run, latency_stats

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
        input_shapes={"prompt": [case.batch, case.prompt_len]},
        started=now_iso(),
    )
    write_record(result, GenerationCase(case.prompt_len, case.gen_len))
    return result


def unavailable_reason(case: GenerateCase) -> str | None:
    """Why `case` cannot run here, checked without loading."""
    backend = get_generation_backend(case.backend)
    return backend.available() or backend.unsupported_reason(case)


def execute_generate_case(case: GenerateCase, slo: SLO | None = None, clock: Clock = time.perf_counter) -> CaseResult:
    """Load, warm up and measure `case` in this process; framework errors become a `failed` result."""
    result = blank_generate_result(case, "ok")
    reason = unavailable_reason(case)
    if reason:
        result.status, result.error = "unavailable", reason
        return result
    started = time.perf_counter()
    session: GenerationSession | None = None
    timings: list[RequestTiming] = []
    warmup_e2e_ms: list[float] = []
    try:
        result.rss_before_load_mb = psutil.Process().memory_info().rss / 2**20
        load_start = time.perf_counter()
        session = get_generation_backend(case.backend)().load(case)
        result.load_s = time.perf_counter() - load_start
        result.load_phases_s = dict(session.load_phases_s)
        result.notes = list(session.notes)
        clock = getattr(session, "clock", None) or clock  # the fake backend brings its own clock
        prompt = prompt_ids_for(session, case.prompt_len)
        for _ in range(case.warmup):
            warm = time_request(session, prompt, case.gen_len, case.batch, clock)[0]
            warmup_e2e_ms.append((warm.end_s - warm.start_s) * 1e3)
        for _ in range(case.requests):
            timings.extend(time_request(session, prompt, case.gen_len, case.batch, clock))
        result.precision_effective = session.effective_precision()
        size_mb = session.model_size_mb()
    except Exception as exc:
        record_failure(result, exc)
    finally:
        if session is not None:
            session.close()
    result.duration_s = time.perf_counter() - started
    if result.status != "ok":
        return result
    summary = summarize(timings, slo)
    # One sample per request (a batch's sequences share one timeline): the core's latency fields hold E2E.
    e2e_ms = [(t.end_s - t.start_s) * 1e3 for t in timings[:: case.batch]]
    result.latency_ms = latency_stats(e2e_ms, case.seed)
    result.samples_ms = e2e_ms
    result.iterations = len(e2e_ms)
    result.warmup_iterations = len(warmup_e2e_ms)
    result.warmup_ms = warmup_e2e_ms
    result.first_inference_ms = warmup_e2e_ms[0] if warmup_e2e_ms else None
    result.throughput = summary.output_tokens_per_s
    result.peak_rss_mb = peak_rss_mb()
    result.warnings = assess_run(e2e_ms, result.latency_ms, result.first_inference_ms)
    # The core's warning says `--iterations`; a generation case counts requests instead.
    result.warnings = [
        CaseWarning(w.code, w.message.replace("--iterations", "--requests").replace("iterations", "requests"), w.detail)
        if w.code == "too_few_samples"
        else w
        for w in result.warnings
    ]
    write_record(result, summary)
    build = getattr(session, "engine_build", None)  # an engine that reads back its build's ISA (llama-cpp)
    if build is not None:
        write_record(result, build)
        warning = build_warning(build)
        result.warnings += [warning] if warning else []
    requests = GenerationCase(case.prompt_len, case.gen_len, throughput_unit=THROUGHPUT_UNIT, model_size_mb=size_mb)
    write_record(result, requests)
    return result


def _child_main(conn: multiprocessing.connection.Connection, case: GenerateCase, slo: SLO | None) -> None:
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_thread_environment(case.threads)
    try:
        conn.send(("result", case_to_dict(execute_generate_case(case, slo))))
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_generate_isolated(case: GenerateCase, slo: SLO | None = None) -> CaseResult:
    """Run `case` in a fresh spawned worker with a `case.timeout_s` limit; crashes and hangs become results."""
    reason = unavailable_reason(case)
    if reason:
        return blank_generate_result(case, "unavailable", reason)
    kind, payload = run_in_worker(_child_main, (case, slo), case.timeout_s)
    if kind == "result":
        return case_from_dict(payload)
    status = {"timeout": "timeout", "crashed": "crashed"}.get(kind, "failed")
    return blank_generate_result(case, status, str(payload))
