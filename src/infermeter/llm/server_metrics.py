"""The server's own state while a sweep runs: its Prometheus `/metrics` (vLLM, llama.cpp's `llama-server
--metrics`) and llama.cpp's `/slots`, read every `interval_s` on a background thread.

Every gauge and counter whose name starts with one of `ENGINE_PREFIXES` is kept, summed over its label sets (a
vLLM server labels by model name; one model is served), so a new engine metric is recorded without a code change.
Histograms are left out: their buckets are per-request figures the client measures itself. `/slots` (a JSON list
of slots) gives `slots:busy` and `slots:total`. A source that answers with an error is noted once and dropped.

Metric names, as the engines spell them today: vLLM `vllm:num_requests_running`, `vllm:num_requests_waiting`,
`vllm:kv_cache_usage_perc` (`vllm:gpu_cache_usage_perc` before V1), `vllm:num_preemptions_total`; llama.cpp
`llamacpp:requests_processing`, `llamacpp:requests_deferred`, `llamacpp:n_busy_slots_per_decode`,
`llamacpp:kv_cache_usage_ratio` (older builds).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from infermeter.results.records import ServerMetrics, ServerSample

ENGINE_PREFIXES = ("vllm:", "llamacpp:", "sglang:", "tgi_")
# The metrics drawn against time in the report, in this order, when the server exposes them.
CHARTED = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_preemptions_total",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:kv_cache_usage_ratio",
    "slots:busy",
)
SOURCE_TIMEOUT_S = 2.0
# A counter's `_created` is a timestamp, not a measurement; the others are histogram or summary parts.
SKIPPED_SUFFIXES = ("_created", "_bucket", "_count", "_sum")


def parse_prometheus(text: str) -> dict[str, float]:
    """The engine gauges and counters of a Prometheus text exposition, each summed over its label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        # The parser may not tie a counter's `<name>_total` sample to its TYPE line when the name has a colon
        # (vllm:…): it comes as "unknown"; histogram parts that come so are left out by their suffix.
        if family.type not in ("gauge", "counter", "untyped", "unknown"):
            continue
        for sample in family.samples:
            if not sample.name.startswith(ENGINE_PREFIXES) or sample.name.endswith(SKIPPED_SUFFIXES):
                continue
            values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
    return values


def parse_slots(data: Any) -> dict[str, float]:
    """`slots:busy` and `slots:total` from llama.cpp's `/slots` JSON (a list of slots)."""
    if not isinstance(data, list):
        raise ValueError("/slots did not answer with a list of slots")
    busy = 0
    for slot in data:
        # Newer servers say `is_processing`; older ones `state` (0 idle, 1 processing).
        if isinstance(slot, dict) and (slot.get("is_processing") or slot.get("state") == 1):
            busy += 1
    return {"slots:busy": float(busy), "slots:total": float(len(data))}


def metrics_sources(url: str) -> tuple[str, ...]:
    """The metrics endpoints of an OpenAI-compatible server at `url` (its base, with or without /v1)."""
    base = url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return (f"{base}/metrics", f"{base}/slots")


class MetricsSampler:
    """Sample `sources` every `interval_s` while the `with` block runs; `record()` gives what was read.
    Times are seconds since `t0_s` (a `time.perf_counter()` value), so levels of one sweep share an axis."""

    def __init__(self, sources: tuple[str, ...], interval_s: float, t0_s: float) -> None:
        self.sources = sources
        self.interval_s = interval_s
        self.t0_s = t0_s
        self.samples: list[ServerSample] = []
        self.unavailable: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="server-metrics", daemon=True)

    def __enter__(self) -> MetricsSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=SOURCE_TIMEOUT_S * len(self.sources) + 1.0)

    def _loop(self) -> None:
        import httpx

        with httpx.Client(timeout=SOURCE_TIMEOUT_S, trust_env=False) as client:
            while True:
                self.sample_once(client)
                if self._stop.wait(self.interval_s):
                    self.sample_once(client)  # the state at the level's end
                    return

    def sample_once(self, client: Any) -> None:
        """Read every live source once and append one sample (nothing when no source answered)."""
        import httpx

        values: dict[str, float] = {}
        read_any = False
        for source in self.sources:
            if source in self.unavailable:
                continue
            try:
                response = client.get(source)
                if response.status_code != 200:
                    raise ValueError(f"HTTP {response.status_code}")
                parsed = parse_slots(response.json()) if source.endswith("/slots") else parse_prometheus(response.text)
            except (httpx.HTTPError, ValueError) as exc:
                # A source down for one read (the server busy, or stopped mid-sweep) is dropped with its reason.
                self.unavailable[source] = f"{source}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                continue
            values.update(parsed)
            read_any = True
        if read_any:
            self.samples.append(ServerSample(round(time.perf_counter() - self.t0_s, 4), values))

    def record(self) -> ServerMetrics:
        """What was read, as the level's record."""
        return ServerMetrics(self.sources, self.interval_s, tuple(self.samples), tuple(self.unavailable.values()))
