"""A tiny OpenAI-compatible streaming server on 127.0.0.1 that misbehaves on purpose (for tests).

Each request gets the next behaviour of `script` (cycled): `ok` streams `tokens` chunks then [DONE];
`drop` streams 2 chunks and closes the connection mid-chunked-body; `error` streams 2 chunks then an SSE
error object; `http500` / `http429` answer with that status; `garbage` sends a chunk that is not JSON.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAIServer:
    """Start with `with FakeOpenAIServer(script) as server: server.url`."""

    def __init__(self, script: list[str], tokens: int = 5, delay_s: float = 0.002) -> None:
        self.behaviours = itertools.cycle(script)
        self.lock = threading.Lock()
        self.tokens = tokens
        self.delay_s = delay_s
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with outer.lock:
                    behaviour = next(outer.behaviours)
                    outer.bodies.append(body)
                if behaviour.startswith("http"):
                    payload = b'{"error": {"message": "scripted failure"}}'
                    self.send_response(int(behaviour[4:]))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                count = outer.tokens if behaviour == "ok" else 2
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
                    self.event({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
                    self.event({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": count}})
                    self.raw(b"data: [DONE]\n\n")
                self.raw(b"")

            def event(self, data: dict[str, Any]) -> None:
                self.raw(f"data: {json.dumps(data)}\n\n".encode())

            def raw(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

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
