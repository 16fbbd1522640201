"""The generation records (`llm bench`, `llm quantize --compare`, `llm load`): the metrics of a
set of requests (`generate` field; definitions in `infermeter.llm.generation_metrics`), what the requests were
(`GenerationCase`, flat) and, for GGUF quantization levels, size and quality (`GgufQuality`, flat)."""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Any, ClassVar, Protocol, Self

from infermeter.results.records.base import Record, known_fields

# A generation case's throughput counts output tokens, not samples.
THROUGHPUT_UNIT = "output tokens/s"


@dataclass(frozen=True)
class Distribution:
    """P50/P99 and friends of one metric over requests (linear-interpolated percentiles,
    infermeter.figures.latency_stats)."""

    p50: float
    p90: float
    _: KW_ONLY  # the rest by keyword
    p99: float
    mean: float
    min: float
    max: float
    count: int


class TokenLatencies(Protocol):
    """What an SLO judges of one request (`generate.metrics.RequestMetrics` has it)."""

    @property
    def ttft_ms(self) -> float: ...

    @property
    def tpot_ms(self) -> float | None: ...

    @property
    def e2e_ms(self) -> float: ...


@dataclass(frozen=True)
class SLO:
    """A service-level objective for goodput; a None bound is not checked."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None  # `--slo latency_ms=`: end to end, from the request's scheduled time

    @property
    def is_set(self) -> bool:
        """Whether any bound is set."""
        return self.ttft_ms is not None or self.tpot_ms is not None or self.e2e_ms is not None

    def met_by(self, metrics: TokenLatencies) -> bool:
        """True when `metrics` satisfies every bound that is set."""
        if self.ttft_ms is not None and metrics.ttft_ms > self.ttft_ms:
            return False
        if self.e2e_ms is not None and metrics.e2e_ms > self.e2e_ms:
            return False
        return not (self.tpot_ms is not None and metrics.tpot_ms is not None and metrics.tpot_ms > self.tpot_ms)


_DISTRIBUTIONS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "tokens_per_s_per_request", "lag_ms")


@dataclass(frozen=True)
class GenerationSummary(Record):
    """Everything derived from a set of requests run together (one case, or one concurrency level)."""

    KEY: ClassVar[str] = "generate"

    requests: int
    succeeded: int
    _: KW_ONLY  # the rest by keyword
    failed: int
    errors_by_kind: dict[str, int]
    wall_s: float
    requests_per_s: float
    output_tokens: int
    prompt_tokens: int
    output_tokens_per_s: float
    ttft_ms: Distribution | None
    tpot_ms: Distribution | None
    itl_ms: Distribution | None
    e2e_ms: Distribution | None
    tokens_per_s_per_request: Distribution | None
    slo: SLO = field(default_factory=SLO)
    slo_met: int = 0
    goodput_rps: float = 0.0
    lag_ms: Distribution | None = None  # the client's send lag behind the schedule (open-loop levels)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of `to_dict`."""
        values = known_fields(cls, data)
        for name in _DISTRIBUTIONS:
            entry = values.get(name)
            values[name] = None if entry is None else Distribution(**known_fields(Distribution, entry))
        values["slo"] = SLO(**known_fields(SLO, values.get("slo") or {}))
        return cls(**values)


@dataclass(frozen=True)
class GenerationCase(Record):
    """What the requests of a generation case were (flat: these fields sit at the case's top level).
    `model_size_mb` is the loaded model's size (in-process backends); `concurrency` and `short_outputs` (streams
    that ended before `gen_len` tokens) belong to endpoint levels. Throughput is in `throughput_unit`."""

    KEY: ClassVar[str] = "generation case"
    FLAT: ClassVar[bool] = True
    MARKER: ClassVar[str] = "task"

    prompt_len: int
    gen_len: int
    _: KW_ONLY  # the rest by keyword
    throughput_unit: str | None = None
    model_size_mb: float | None = None
    concurrency: int | None = None
    short_outputs: int | None = None
    task: str = "generate"

    def to_dict(self) -> dict[str, Any]:
        """The case fields that are set (a field never written stays absent, as before records)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class GgufQuality(Record):
    """A GGUF quantization level's size on disk and, when scored, its perplexity over `scored_tokens` tokens
    and its top-1 next-token agreement with `agreement_reference` (another level, `f16` when measured)."""

    KEY: ClassVar[str] = "gguf quality"
    FLAT: ClassVar[bool] = True
    MARKER: ClassVar[str] = "gguf_level"

    gguf_level: str
    size_on_disk_mb: float
    _: KW_ONLY  # the rest by keyword
    perplexity: float | None = None
    scored_tokens: int | None = None
    top1_agreement: float | None = None
    agreement_reference: str | None = None
    perplexity_text: str | None = None  # the packaged text scored (`generate.packaged.TEXTS`)

    def to_dict(self) -> dict[str, Any]:
        """The case fields that are set."""
        return {k: v for k, v in asdict(self).items() if v is not None}
