"""Responses that come back shorter than asked. A level whose streams were cut short is not `ok`: its tokens/s and
latencies describe answers nobody asked for (a server that ends each stream early looks fast), so its status is
`short_outputs`, the console says so with the likely cause, and its figures stay out of the knee, the goodput and
any comparison (the case carries no latency or throughput; its `GenerationSummary` keeps what was measured).

A response is short when it has fewer output tokens than `max_tokens` and either `ignore_eos` was sent (it should
have run to the end) or the server did not say it stopped at an end-of-sequence (`finish_reason` other than `stop`:
`length` before max_tokens, or none at all, as llama-cpp-python's server sends when it interrupts a stream).
"""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.llm.generation_metrics import RequestTiming
from infermeter.results.schema import CaseResult

STATUS = "short_outputs"
LIKELY_CAUSE = (
    "the server likely ended streams early (llama-cpp-python's server interrupts a stream whenever another request "
    "waits, unless started with --interrupt_requests False)"
)


def is_short(timing: RequestTiming, max_tokens: int, ignore_eos: bool) -> bool:
    """True for a successful response cut short of `max_tokens` without an end-of-sequence (see the module)."""
    if not timing.ok or timing.output_tokens >= max_tokens:
        return False
    return ignore_eos or timing.finish_reason != "stop"


def mark_short(result: CaseResult, timings: Sequence[RequestTiming], max_tokens: int, short: int) -> None:
    """Make `result` a `short_outputs N of M` level: the status, one line with the likely cause, and no figures
    for comparisons to read."""
    ok = [t for t in timings if t.ok]
    back = sum(t.output_tokens for t in ok)
    result.status = STATUS
    result.error = (
        f"{short} of {len(ok)} responses came back shorter than the {max_tokens} tokens asked ({back} tokens of "
        f"{len(ok) * max_tokens}); {LIKELY_CAUSE}"
    )
    result.latency_ms = None
    result.timing.samples_ms = []
    result.timing.throughput = None
