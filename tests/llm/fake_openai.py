"""A tiny OpenAI-compatible streaming server on 127.0.0.1 that misbehaves on purpose (for tests).

Each request gets the next behaviour of `script` (cycled): `ok` streams `tokens` chunks then [DONE];
`drop` streams 2 chunks and closes the connection mid-chunked-body; `error` streams 2 chunks then an SSE
error object; `http500` / `http429` answer with that status; `garbage` sends a chunk that is not JSON; `empty`
answers 200 and ends the stream at once, without a token; `short` streams 2 chunks then [DONE] without a
finish_reason, as llama-cpp-python's server does when it interrupts a stream for a waiting request. A stream of
fewer tokens than the request's max_tokens ends as a model's end-of-sequence does (finish_reason `stop`), unless
the request sent ignore_eos, which this server honours no more than `tokens` allows (finish_reason `length`).

Like a real engine it has `slots` (streams generated at once; the others wait, so throughput stops growing
past `slots` clients), refuses a model name other than `model` when one is set (404, as vLLM does), serves a
Prometheus `/metrics` (llama.cpp's names) and llama.cpp's `/slots`, and goes down for good after `max_requests`
requests when set (a server that dies mid-sweep).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    # A real server's listen backlog, not socketserver's 5: a burst of connections (an open-loop client catching
    # up) must queue, not be reset.
    request_queue_size = 128


class FakeOpenAIServer:
    """Start with `with FakeOpenAIServer(script) as server: server.url`."""

    def __init__(
        self,
        script: list[str],
        tokens: int = 5,
        delay_s: float = 0.002,
        slots: int = 64,
        model: str | None = None,
        max_requests: int | None = None,
    ) -> None:
        self.behaviours = itertools.cycle(script)
        self.lock = threading.Lock()
        self.tokens = tokens
        self.delay_s = delay_s
        self.bodies: list[dict[str, Any]] = []
        self.slot_count = slots
        self.slots = threading.BoundedSemaphore(slots)
        self.model = model
        self.max_requests = max_requests
        self.processing = 0
        self.waiting = 0
        self.metrics_reads = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                with outer.lock:
                    outer.metrics_reads += 1
                    state = (outer.processing, outer.waiting)
                if self.path == "/metrics":
                    self.reply(200, outer.prometheus(*state).encode(), "text/plain; version=0.0.4")
                elif self.path == "/slots":
                    busy = [{"id": i, "is_processing": i < state[0]} for i in range(outer.slot_count)]
                    self.reply(200, json.dumps(busy).encode(), "application/json")
                elif self.path == "/v1/models":
                    self.reply(
                        200, json.dumps({"data": [{"id": outer.model or "default"}]}).encode(), "application/json"
                    )
                else:
                    self.reply(404, b"not found", "text/plain")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with outer.lock:
                    behaviour = next(outer.behaviours)
                    outer.bodies.append(body)
                    if outer.max_requests is not None and len(outer.bodies) >= outer.max_requests:
                        threading.Thread(target=outer.go_down, daemon=True).start()
                if not self.path.endswith("/completions"):
                    self.reply(404, b'{"error": {"message": "File Not Found"}}', "application/json")
                    return
                if outer.model is not None and body.get("model") != outer.model:
                    message = f"The model `{body.get('model')}` does not exist."
                    self.reply(404, json.dumps({"error": {"message": message}}).encode(), "application/json")
                    return
                if behaviour.startswith("http"):
                    self.reply(int(behaviour[4:]), b'{"error": {"message": "scripted failure"}}', "application/json")
                    return
                with outer.lock:
                    outer.waiting += 1
                with outer.slots:
                    with outer.lock:
                        outer.waiting -= 1
                        outer.processing += 1
                    try:
                        self.stream(behaviour, body)
                    finally:
                        with outer.lock:
                            outer.processing -= 1

            def reply(self, status: int, payload: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def stream(self, behaviour: str, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                count = outer.tokens if behaviour == "ok" else 0 if behaviour == "empty" else 2
                if behaviour == "short":
                    time.sleep(outer.delay_s)
                    self.event({"choices": [{"index": 0, "text": " t0", "finish_reason": None}]})
                    self.event({"choices": [{"index": 0, "text": " t1", "finish_reason": None}]})
                    self.raw(b"data: [DONE]\n\n")
                    self.raw(b"")
                    return
                for index in range(count):
                    time.sleep(outer.delay_s)
                    self.event({"choices": [{"index": 0, "text": f" t{index}", "finish_reason": None}]})
                if behaviour == "drop":
                    self.wfile.write(b'40\r\ndata: {"choices": [{"text"')  # a chunk cut short
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if behaviour == "error":
                    self.event({"error": {"message": "model crashed", "type": "server_error"}})
                elif behaviour == "garbage":
                    self.raw(b"data: {not json\n\n")
                else:
                    asked = int(body.get("max_tokens") or count)
                    finish = "stop" if count < asked and not body.get("ignore_eos") else "length"
                    self.event({"choices": [{"index": 0, "text": "", "finish_reason": finish}]})
                    self.event({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": count}})
                    self.raw(b"data: [DONE]\n\n")
                self.raw(b"")

            def event(self, data: dict[str, Any]) -> None:
                self.raw(f"data: {json.dumps(data)}\n\n".encode())

            def raw(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def prometheus(self, processing: int, waiting: int) -> str:
        """A /metrics page in llama.cpp's names, with a histogram (which the scraper leaves out)."""
        return (
            "# HELP llamacpp:requests_processing Number of requests processing.\n"
            "# TYPE llamacpp:requests_processing gauge\n"
            f"llamacpp:requests_processing {processing}\n"
            "# TYPE llamacpp:requests_deferred gauge\n"
            f"llamacpp:requests_deferred {waiting}\n"
            "# TYPE llamacpp:tokens_predicted counter\n"
            f"llamacpp:tokens_predicted_total {len(self.bodies) * self.tokens}\n"
            "# TYPE vllm:e2e_request_latency_seconds histogram\n"
            'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 3\n'
            'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 4\n'
            "vllm:e2e_request_latency_seconds_count 4\n"
            "vllm:e2e_request_latency_seconds_sum 2.5\n"
            "# TYPE process_cpu_seconds_total counter\n"
            "process_cpu_seconds_total 1.5\n"
        )

    def go_down(self) -> None:
        """Stop answering and close the listening socket: later connections are refused. The request that
        triggered it streams on in its own handler thread; no pause for it here, since a client that starts its
        next request at once (a sweep's next level) would then still find the server up."""
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
