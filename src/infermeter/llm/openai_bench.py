"""What an OpenAI-compatible server (llama.cpp server, Ollama, vLLM, ours) is sent, and one level's case.

A level's requests go through the one load generator (`load.generator`: a closed loop of `concurrency` clients
until `requests` were sent, or open-loop arrivals at a rate) by the OpenAI streaming client
(`llm.openai_client`), which reads TTFT and inter-token gaps from the SSE stream and counts each failure by kind
(`ERROR_KINDS`) without stopping the level.

The prompt is `prompt_len` words: a tag first, then the shipped text from a word that depends on the request's
index. The tag is drawn afresh for every level (`fresh_level`) and numbers the request within it, so no two
requests of a run, nor of two runs against one server, share more than the chat template as a prefix: a server's
prefix cache (vLLM's, llama.cpp's prompt cache) cannot turn a later request into a cache hit and its TTFT into a
lookup. The server's own count of prompt and output tokens is recorded when it reports `usage`.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from infermeter.core.case import endpoint_case_id
from infermeter.core.errors import UsageError
from infermeter.figures.latency_stats import latency_stats
from infermeter.llm.generation_metrics import SLO, GenerationSummary, RequestTiming, summarize
from infermeter.llm.short_outputs import is_short, mark_short
from infermeter.llm.tinyllama import corpus_text
from infermeter.results.records import GenerationCase, write_record
from infermeter.results.records.generate import THROUGHPUT_UNIT
from infermeter.results.schema import CaseResult, ShapeFigures

ERROR_KINDS = {
    "connect": "could not connect to the server",
    "timeout": "no response or no next chunk within --request-timeout",
    "http_<status>": "the server answered with a non-200 status",
    "stream_error_event": "the stream carried an error object mid-way",
    "stream_dropped": "the connection closed before the stream finished ([DONE] or finish_reason)",
    "bad_payload": "a chunk was not valid JSON",
    "no_output": "the stream finished without any output token",
    "client_error": "the client itself failed on the request (its message says how)",
}
APIS = ("completions", "chat")
# A rate level sends this many seconds' worth of requests at its rate (at least MIN_RATE_REQUESTS).
RATE_LEVEL_S = 10.0
MIN_RATE_REQUESTS = 16


@dataclass(frozen=True)
class EndpointSettings:
    """What to send and how hard."""

    url: str
    model: str = "default"
    _: KW_ONLY  # the rest by keyword
    api: str = "completions"
    prompt_len: int = 64
    gen_len: int = 32
    requests: int | None = None  # per level; default `requests_for` / `requests_at`
    request_timeout_s: float = 60.0
    ignore_eos: bool = False
    api_key: str | None = None
    slo: SLO = field(default_factory=SLO)
    prompt_tag: str = ""  # the first word of every prompt of one level (`fresh_level`)

    def endpoint(self) -> str:
        """The full URL of the completions or chat endpoint."""
        base = self.url.rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise UsageError(f"endpoint {self.url!r} must start with http:// or https://")
        if not base.endswith("/v1"):
            base += "/v1"
        return base + ("/completions" if self.api == "completions" else "/chat/completions")

    def requests_for(self, concurrency: int) -> int:
        """How many requests a concurrency level sends: `requests`, else max(8, 2 × concurrency)."""
        return self.requests if self.requests is not None else max(8, 2 * concurrency)

    def requests_at(self, rate_per_s: float) -> int:
        """How many requests a rate level sends: `requests`, else RATE_LEVEL_S seconds' worth (at least
        MIN_RATE_REQUESTS)."""
        if self.requests is not None:
            return self.requests
        return max(MIN_RATE_REQUESTS, math.ceil(rate_per_s * RATE_LEVEL_S))


def make_prompt(prompt_len: int, index: int, tag: str = "") -> str:
    """`prompt_len` words of the shipped text, starting at a word that depends on `index`; with `tag`, the first
    word is `TAG-INDEX:` instead, so that the prompt shares no prefix with any other level's."""
    words = corpus_text().split()
    start = (index * 37) % len(words)
    picked = [words[(start + i) % len(words)] for i in range(prompt_len)]
    if tag and picked:
        picked[0] = f"{tag}-{index}:"
    return " ".join(picked)


def fresh_level(settings: EndpointSettings) -> EndpointSettings:
    """The settings of one level: a prompt tag of its own, drawn at random (not from --seed: a second run with the
    same seed against a warm server must not find its prompts cached)."""
    return replace(settings, prompt_tag=secrets.token_hex(4))


def request_body(settings: EndpointSettings, index: int) -> dict[str, Any]:
    """The JSON body of request `index`: greedy, streaming, usage requested."""
    prompt = make_prompt(settings.prompt_len, index, settings.prompt_tag)
    body: dict[str, Any] = {
        "model": settings.model,
        "max_tokens": settings.gen_len,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if settings.api == "completions":
        body["prompt"] = prompt
    else:
        body["messages"] = [{"role": "user", "content": prompt}]
    if settings.ignore_eos:
        body["ignore_eos"] = True  # vLLM and llama.cpp's server honour it; others ignore or reject it
    return body


def level_result(settings: EndpointSettings, concurrency: int, timings: list[RequestTiming]) -> CaseResult:
    """A `CaseResult` for one level: E2E latency stats in the core fields, the generation metrics in its
    `GenerationSummary` record."""
    summary: GenerationSummary = summarize(timings, settings.slo)
    identity = f"{settings.endpoint()}|{settings.model}|{settings.api}|{settings.prompt_len}|{settings.gen_len}"
    ok = [t for t in timings if t.ok]
    result = CaseResult(
        id=endpoint_case_id(identity, concurrency, settings.prompt_len, settings.gen_len),
        model=settings.model,
        backend="openai-endpoint",
        backend_version=None,
        device=settings.endpoint(),
        batch=1,
        shape_mode="dynamic",
        precision="native",
        precision_effective=None,
        threads=0,
        status="ok" if ok else "failed",
        error=None if ok else f"all {len(timings)} requests failed: {summary.errors_by_kind}",
        options={"api": settings.api, "concurrency": str(concurrency)},
        shapes=ShapeFigures(input_shapes={"prompt_words": [settings.prompt_len]}),
        isolated=False,
        duration_s=summary.wall_s,
    )
    # A stream cut short without an end-of-sequence (a server that interrupts streams) makes the level
    # `short_outputs`, not `ok` (generate/short_outputs.py); streams that stopped at an EOS are only noted.
    short = sum(1 for t in ok if is_short(t, settings.gen_len, settings.ignore_eos))
    eos_stops = sum(1 for t in ok if t.output_tokens < settings.gen_len) - short
    requests = GenerationCase(
        settings.prompt_len,
        settings.gen_len,
        throughput_unit=THROUGHPUT_UNIT,
        concurrency=concurrency,
        short_outputs=short,
    )
    write_record(result, requests)
    write_record(result, summary)
    if eos_stops:
        result.notes.append(
            f"{eos_stops} of {len(ok)} streams stopped at an end-of-sequence before {settings.gen_len} tokens; use "
            "--ignore-eos where the server supports it for equal-length requests"
        )
    if ok:
        e2e_ms = [(t.end_s - t.start_s) * 1e3 for t in ok]
        result.latency_ms = latency_stats(e2e_ms)
        result.timing.samples_ms = e2e_ms
        result.timing.iterations = len(e2e_ms)
        result.timing.throughput = summary.output_tokens_per_s
    if short:
        mark_short(result, timings, settings.gen_len, short)
    return result
