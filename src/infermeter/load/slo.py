"""One way to state a service-level objective for every load client, and one goodput figure under it.

`--slo NAME=MS` (repeatable) sets a per-request bound: `latency_ms` (a KServe request's latency; an LLM request's
end-to-end time), `ttft_ms` and `tpot_ms` (streamed LLM answers only). A request meets the SLO when it succeeded
and every bound set holds; goodput is the requests per second that meet it, over the run's wall time (DistServe,
Zhong et al. 2024). Latencies count from each request's scheduled time (`load.timing`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infermeter.core.errors import UsageError

SLO_NAMES = {
    "latency_ms": "a request's latency (LLM: end to end), from its scheduled send time",
    "ttft_ms": "time to first token (streamed LLM answers)",
    "tpot_ms": "time per output token (streamed LLM answers)",
}
STREAM_ONLY = ("ttft_ms", "tpot_ms")


@dataclass(frozen=True)
class SloBounds:
    """The bounds set with --slo, in milliseconds; None is not checked."""

    latency_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None

    @property
    def is_set(self) -> bool:
        """Whether any bound is set."""
        return any(v is not None for v in (self.latency_ms, self.ttft_ms, self.tpot_ms))

    def describe(self) -> str:
        """`latency ≤ 50 ms`, `TTFT ≤ 200 ms, TPOT ≤ 50 ms`."""
        parts = [
            f"{label} ≤ {value:g} ms"
            for label, value in (("latency", self.latency_ms), ("TTFT", self.ttft_ms), ("TPOT", self.tpot_ms))
            if value is not None
        ]
        return ", ".join(parts)


def parse_slo(items: Iterable[str], stream: bool = True) -> SloBounds:
    """The bounds of `--slo NAME=MS` items; UsageError (exit 2) for an unknown name, a bound that is not a
    positive number, a name given twice, or (`stream` False: a KServe target) a bound of streamed answers."""
    values: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in SLO_NAMES:
            known = ", ".join(f"{n} ({what})" for n, what in SLO_NAMES.items())
            raise UsageError(f"--slo {item!r}: write NAME=MS with NAME one of {known}")
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"--slo {item!r}: {text!r} is not a number of milliseconds") from None
        if not value > 0:
            raise UsageError(f"--slo {item!r}: the bound must be a positive number of milliseconds")
        if name in values:
            raise UsageError(f"--slo {name} is given twice")
        if not stream and name in STREAM_ONLY:
            raise UsageError(
                f"--slo {name} bounds streamed LLM answers (llm load); a KServe request has one latency: "
                "--slo latency_ms=MS"
            )
        values[name] = value
    return SloBounds(**values)


def goodput(latencies_ms: Sequence[float], bound_ms: float, elapsed_s: float) -> tuple[int, float]:
    """(requests within `bound_ms`, those per second over `elapsed_s`) of a run's successful requests."""
    met = sum(1 for latency in latencies_ms if latency <= bound_ms)
    return met, met / elapsed_s if elapsed_s > 0 else 0.0
