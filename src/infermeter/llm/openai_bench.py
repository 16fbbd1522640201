"""Benchmark any OpenAI-compatible server (llama.cpp server, Ollama, vLLM, ours) with streaming requests.

Each concurrency level runs a closed loop: `concurrency` clients, each sending its next request as soon as the
previous one ends, until `requests` have been sent. TTFT and inter-token gaps are read from the SSE stream as
chunks arrive (one monotonic clock, `time.perf_counter`). Failures never stop a level: each one is counted by
kind (see `ERROR_KINDS`) and the level goes on.

The prompt is `prompt_len` words: a tag first, then the shipped text from a word that depends on the request's
index. The tag is drawn afresh for every level (`fresh_level`) and numbers the request within it, so no two
requests of a run, nor of two runs against one server, share more than the chat template as a prefix: a server's
prefix cache (vLLM's, llama.cpp's prompt cache) cannot turn a later request into a cache hit and its TTFT into a
lookup. The server's own count of prompt and output tokens is recorded when it reports `usage`.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from infermeter.core.case import endpoint_case_id
from infermeter.core.errors import UsageError
from infermeter.figures.latency_stats import latency_stats
from infermeter.llm.generation_metrics import SLO, GenerationSummary, RequestTiming, summarize
from infermeter.llm.short_outputs import is_short, mark_short
from infermeter.llm.tinyllama import corpus_text
from infermeter.load.timing import Issue
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
}
APIS = ("completions", "chat")


@dataclass(frozen=True)
class EndpointSettings:
    """What to send and how hard."""

    url: str
    model: str = "default"
    _: KW_ONLY  # the rest by keyword
    api: str = "completions"
    prompt_len: int = 64
    gen_len: int = 32
    concurrency: tuple[int, ...] = (1, 4, 16)
    requests: int | None = None  # per level; default max(8, 2 × concurrency)
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
        """How many requests one level sends."""
        return self.requests if self.requests is not None else max(8, 2 * concurrency)


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


def _chunk_text(event: dict[str, Any]) -> str:
    choices = event.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if "text" in choice:
        return str(choice.get("text") or "")
    return str((choice.get("delta") or {}).get("content") or "")


def _finished(event: dict[str, Any]) -> bool:
    return any(choice.get("finish_reason") for choice in event.get("choices") or [])


def _finish_reason(event: dict[str, Any]) -> str | None:
    return next((str(c["finish_reason"]) for c in event.get("choices") or [] if c.get("finish_reason")), None)


@dataclass
class _Stream:
    """What one streamed response has shown so far: an arrival time per chunk with text, the server's usage
    block, whether the stream ended properly ([DONE] or a finish_reason), and the server's finish_reason."""

    token_times: list[float] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    finish: str | None = None


async def _read_stream(response: Any, stream: _Stream) -> tuple[str, str] | None:
    """Read the server-sent events of `response` into `stream`; (error kind, message) when one is a failure."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            stream.done = True
            break
        try:
            event = json.loads(data)
        except ValueError:
            return "bad_payload", data
        if "error" in event:
            return "stream_error_event", json.dumps(event["error"])
        if _chunk_text(event):
            stream.token_times.append(time.perf_counter())
        if event.get("usage"):
            stream.usage = event["usage"]
        if _finished(event):
            stream.done = True
            stream.finish = _finish_reason(event)
    return None


def _completed(start: float, end: float, stream: _Stream, lag_s: float) -> RequestTiming:
    """The record of a stream that ended properly: a success, or `no_output` when no chunk carried text."""
    if not stream.token_times:
        return RequestTiming(
            start,
            end,
            error_kind="no_output",
            error="no output tokens",
            lag_s=lag_s,
            finish_reason=stream.finish,
        )
    reported = stream.usage.get("completion_tokens")
    return RequestTiming(
        start_s=start,
        end_s=end,
        token_times_s=tuple(stream.token_times),
        prompt_tokens=int(stream.usage.get("prompt_tokens") or 0),
        reported_output_tokens=int(reported) if reported else None,
        lag_s=lag_s,
        finish_reason=stream.finish,
    )


async def stream_request(
    client: Any, settings: EndpointSettings, index: int, issue: Issue | None = None
) -> RequestTiming:
    """Send request `index` and time its stream from its scheduled time (`issue`, an open-loop arrival; now in a
    closed loop), with the client's lag beside; every failure becomes a RequestTiming with an error kind."""
    import httpx

    stream = _Stream()
    sent = time.perf_counter()
    start = issue.scheduled_s if issue is not None else sent
    lag_s = max(sent - start, 0.0)

    def failed(kind: str, message: str) -> RequestTiming:
        return RequestTiming(
            start,
            time.perf_counter(),
            token_times_s=tuple(stream.token_times),
            error_kind=kind,
            error=message[:300],
            lag_s=lag_s,
            finish_reason=stream.finish,
        )

    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    try:
        async with client.stream(
            "POST", settings.endpoint(), json=request_body(settings, index), headers=headers
        ) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                return failed(f"http_{response.status_code}", body)
            failure = await _read_stream(response, stream)
            if failure is not None:
                return failed(*failure)
    except httpx.ConnectError as exc:
        return failed("connect", str(exc))
    except httpx.TimeoutException as exc:
        return failed("timeout", str(exc) or type(exc).__name__)
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.StreamError) as exc:
        return failed("stream_dropped", str(exc) or type(exc).__name__)
    end = time.perf_counter()
    if not stream.done:
        return failed("stream_dropped", "the stream ended without [DONE] or a finish_reason")
    return _completed(start, end, stream, lag_s)


async def run_level(settings: EndpointSettings, concurrency: int) -> list[RequestTiming]:
    """One closed-loop level: `concurrency` clients share `requests_for(concurrency)` requests."""
    import httpx

    total = settings.requests_for(concurrency)
    settings = fresh_level(settings)
    next_index = 0
    timings: list[RequestTiming] = []
    timeout = httpx.Timeout(settings.request_timeout_s, connect=min(10.0, settings.request_timeout_s))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:

        async def client_loop() -> None:
            nonlocal next_index
            while next_index < total:
                index = next_index
                next_index += 1
                timings.append(await stream_request(client, settings, index))

        await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return timings


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


def run_endpoint_benchmark(
    settings: EndpointSettings, on_level: Callable[[CaseResult], None] | None = None
) -> list[CaseResult]:
    """Run every concurrency level in order; one CaseResult per level."""
    if settings.api not in APIS:
        raise UsageError(f"--api-kind {settings.api!r} is not one of {', '.join(APIS)}")
    settings.endpoint()  # a bad URL is a usage error before anything is sent
    results = []
    for concurrency in settings.concurrency:
        timings = asyncio.run(run_level(settings, concurrency))
        result = level_result(settings, concurrency, timings)
        results.append(result)
        if on_level:
            on_level(result)
    return results
