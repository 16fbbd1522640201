"""OpenAI streaming as a load client (`load.client.LoadClient`): each request is one streamed completion (or
chat completion) read as server-sent events, its TTFT and inter-token gaps taken as chunks arrive, its clock
started at the request's scheduled time like every load client's (`load.timing`); and one level of requests sent
through the one load generator (`load.generator`), a closed loop at a concurrency or open-loop arrivals at a rate.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infermeter.llm.generation_metrics import RequestTiming
from infermeter.llm.openai_bench import EndpointSettings, fresh_level, request_body
from infermeter.load.arrivals import Arrivals
from infermeter.load.generator import Traffic, closed_loop, open_loop
from infermeter.load.timing import Issue


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


async def stream_request(client: Any, settings: EndpointSettings, issue: Issue) -> RequestTiming:
    """Send request `issue.index` and time its stream from the issue's scheduled time (`load.timing`), with the
    client's lag beside; every failure becomes a RequestTiming with an error kind."""
    import httpx

    stream = _Stream()
    start = issue.scheduled_s
    lag_s = issue.lag_ns / 1e9

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
            "POST", settings.endpoint(), json=request_body(settings, issue.index), headers=headers
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


class OpenAIClient:
    """Streamed requests of `settings` through `http` (an httpx.AsyncClient); the outcome of each is its
    RequestTiming. A failure the stream reader does not classify is the request's `client_error`, never a
    request left without an answer (the generator would wait for it)."""

    def __init__(self, http: Any, settings: EndpointSettings) -> None:
        self.http = http
        self.settings = settings
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, issue: Issue, done: Callable[[Issue, RequestTiming, int], None]) -> None:
        """Start streaming request `issue.index`; `done(issue, timing, answered_ns)` when it ends."""
        task = asyncio.get_running_loop().create_task(self._stream(issue, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _stream(self, issue: Issue, done: Callable[[Issue, RequestTiming, int], None]) -> None:
        try:
            timing = await stream_request(self.http, self.settings, issue)
        except Exception as exc:  # a bug or a transport error not classified: counted, the level goes on
            message = f"{type(exc).__name__}: {exc}"[:300]
            end_s = time.perf_counter()
            timing = RequestTiming(issue.scheduled_s, end_s, error_kind="client_error", error=message)
        done(issue, timing, time.perf_counter_ns())


async def run_openai_level(
    settings: EndpointSettings, concurrency: int | None = None, arrivals: Arrivals | None = None
) -> list[RequestTiming]:
    """One level, its prompts tagged afresh (`fresh_level`): a closed loop of `concurrency` clients sending
    `requests_for(concurrency)` requests, or `requests_at(rate)` requests due at the times of `arrivals`; the
    timings in the order the requests were issued."""
    import httpx

    settings = fresh_level(settings)
    timeout = httpx.Timeout(settings.request_timeout_s, connect=min(10.0, settings.request_timeout_s))
    if concurrency is not None:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    else:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as http:
        client = OpenAIClient(http, settings)
        # No drain deadline: every stream ends by itself, on its answer or on httpx's per-chunk timeout.
        traffic: Traffic[RequestTiming]
        if concurrency is not None:
            requests = settings.requests_for(concurrency)
            traffic = await closed_loop(client, concurrency, requests=requests, drain_timeout_s=None)
        elif arrivals is not None:
            requests = settings.requests_at(arrivals.rate_per_s)
            traffic = await open_loop(client, arrivals, requests=requests, drain_timeout_s=None)
        else:
            raise ValueError("a level runs at a concurrency or at a rate of arrivals")
    return [timing for _, timing, _ in sorted(traffic.answers, key=lambda answer: answer[0].index)]
