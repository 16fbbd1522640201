"""Generation metrics, defined once for every backend and for endpoint benchmarks (pure: no clock, no I/O).

One request is described by a `RequestTiming`: when it was sent and when each output token arrived, all in
seconds on one monotonic clock. Every figure below is derived from that record and nothing else, so that a
llama.cpp run, a transformers run and a stream read from an OpenAI-compatible server are judged alike.

Definitions (the same as vLLM's `benchmark_serving` and MLPerf's LLM rules, written out here so nobody has to
guess):

- Request start: when the request was due. In an open-loop (rate) level that is its scheduled time from
  `load.arrivals`, not when the client got round to sending it (`load.timing`: the KServe load generator's
  definition too), so a client that falls behind cannot hide the queue; its lag is kept beside (`lag_s`).
- TTFT, time to first token (prefill): first token arrival − request start.
- E2E, end-to-end latency: request end − request start, where the end is the last byte of the response
  (the last token for in-process backends; the end of the stream for endpoints).
- TPOT, time per output token (decode): (E2E − TTFT) / (output tokens − 1). Undefined for one output token.
- ITL, inter-token latency: each gap between consecutive token arrivals. When every token arrives on its own,
  the mean ITL of a request equals its TPOT up to the tail after the last token; when a server batches several
  tokens into one chunk the ITL list is shorter and its gaps larger, while TPOT still counts tokens.
- Output tokens/s per request: output tokens / E2E (prefill included: what one user experiences).
- Decode tokens/s per request: 1 / TPOT.
- Aggregate output tokens/s: all output tokens of successful requests / wall time from the first request start
  to the last request end (what the system delivers).
- Goodput: requests per second that succeeded AND met the SLO (TTFT ≤ slo_ttft_ms and TPOT ≤ slo_tpot_ms;
  a one-token request is judged on TTFT alone), over the same wall time (DistServe, Zhong et al. 2024).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass

from infermeter.figures.latency_stats import percentile

# The summary's records (stored in a case's `generate` field), importable from here as before records.
from infermeter.results.records.generate import SLO as SLO
from infermeter.results.records.generate import Distribution, GenerationSummary


@dataclass(frozen=True)
class RequestTiming:
    """The raw record of one generation request, seconds on one monotonic clock.

    `token_times_s` holds one arrival time per chunk that carried output; `chunk_tokens` how many tokens each
    chunk carried (all 1 for in-process backends). `output_tokens` may come from the server's usage count
    and then overrides the chunk sum. `error_kind` is None for a success. `lag_s` is how late the client sent it
    after `start_s`, its scheduled time (0 in a closed loop); `finish_reason` is the server's, when it gave one.
    """

    start_s: float
    end_s: float
    _: KW_ONLY  # the rest by keyword
    token_times_s: tuple[float, ...] = ()
    chunk_tokens: tuple[int, ...] = ()
    prompt_tokens: int = 0
    reported_output_tokens: int | None = None
    error_kind: str | None = None
    error: str | None = None
    lag_s: float = 0.0
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when the request completed without error and produced at least one token."""
        return self.error_kind is None and len(self.token_times_s) > 0

    @property
    def output_tokens(self) -> int:
        """Output tokens: the server's own count when it gave one, else the sum over chunks."""
        if self.reported_output_tokens is not None:
            return self.reported_output_tokens
        if self.chunk_tokens:
            return sum(self.chunk_tokens)
        return len(self.token_times_s)


@dataclass(frozen=True)
class RequestMetrics:
    """Metrics of one successful request (milliseconds and tokens/s)."""

    ttft_ms: float
    e2e_ms: float
    _: KW_ONLY  # the rest by keyword
    tpot_ms: float | None
    itl_ms: tuple[float, ...]
    output_tokens: int
    prompt_tokens: int
    tokens_per_s: float
    decode_tokens_per_s: float | None


def request_metrics(timing: RequestTiming) -> RequestMetrics:
    """The metrics of one successful request; raises ValueError for a failed one (it has none)."""
    if not timing.ok:
        raise ValueError(f"request failed ({timing.error_kind}); it has no generation metrics")
    ttft_s = timing.token_times_s[0] - timing.start_s
    e2e_s = timing.end_s - timing.start_s
    tokens = timing.output_tokens
    tpot_s = (e2e_s - ttft_s) / (tokens - 1) if tokens > 1 else None
    gaps = tuple(
        (later - earlier) * 1e3 for earlier, later in zip(timing.token_times_s, timing.token_times_s[1:], strict=False)
    )
    return RequestMetrics(
        ttft_ms=ttft_s * 1e3,
        e2e_ms=e2e_s * 1e3,
        tpot_ms=tpot_s * 1e3 if tpot_s is not None else None,
        itl_ms=gaps,
        output_tokens=tokens,
        prompt_tokens=timing.prompt_tokens,
        tokens_per_s=tokens / e2e_s if e2e_s > 0 else float("inf"),
        decode_tokens_per_s=1.0 / tpot_s if tpot_s else None,
    )


def distribution(values: Sequence[float]) -> Distribution | None:
    """The distribution of `values`, or None when there are none."""
    if not values:
        return None
    return Distribution(
        p50=percentile(values, 50),
        p90=percentile(values, 90),
        p99=percentile(values, 99),
        mean=sum(values) / len(values),
        min=min(values),
        max=max(values),
        count=len(values),
    )


def summarize(timings: Sequence[RequestTiming], slo: SLO | None = None) -> GenerationSummary:
    """Summarize `timings` (successes and failures) run over one wall-clock span."""
    slo = slo or SLO()
    if timings:
        wall_s = max(t.end_s for t in timings) - min(t.start_s for t in timings)
    else:
        wall_s = 0.0
    good = [t for t in timings if t.ok]
    metrics = [request_metrics(t) for t in good]
    errors = Counter(t.error_kind or "no_output" for t in timings if not t.ok)
    output_tokens = sum(m.output_tokens for m in metrics)
    slo_met = sum(1 for m in metrics if slo.met_by(m))

    def rate(count: float) -> float:
        return count / wall_s if wall_s > 0 else 0.0

    return GenerationSummary(
        requests=len(timings),
        succeeded=len(good),
        failed=len(timings) - len(good),
        errors_by_kind=dict(sorted(errors.items())),
        wall_s=wall_s,
        requests_per_s=rate(len(good)),
        output_tokens=output_tokens,
        prompt_tokens=sum(m.prompt_tokens for m in metrics),
        output_tokens_per_s=rate(output_tokens),
        ttft_ms=distribution([m.ttft_ms for m in metrics]),
        tpot_ms=distribution([m.tpot_ms for m in metrics if m.tpot_ms is not None]),
        itl_ms=distribution([gap for m in metrics for gap in m.itl_ms]),
        e2e_ms=distribution([m.e2e_ms for m in metrics]),
        tokens_per_s_per_request=distribution([m.tokens_per_s for m in metrics]),
        slo=slo,
        slo_met=slo_met,
        goodput_rps=rate(slo_met),
        # Closed loops send when due (lag 0 throughout): only an open-loop level has a lag to report.
        lag_ms=distribution([t.lag_s * 1e3 for t in timings]) if any(t.lag_s for t in timings) else None,
    )
