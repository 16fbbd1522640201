"""A tiny KServe v2 HTTP server on 127.0.0.1 that refuses every `refuse_every`-th inference request with HTTP 400
and a KServe error body (for tests of how `load` reports a server's refusals)."""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METADATA = {
    "name": "m",
    "platform": "fake",
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
}
MESSAGE = "input 'x': expected shape [1,4], got [1,5]"


class FakeKServe:
    """`with FakeKServe(refuse_every=3) as server: server.url`."""

    def __init__(self, refuse_every: int) -> None:
        counter = itertools.count(1)
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path in ("/v2/models/m", "/v2/models/m/"):
                    self.reply(200, json.dumps(METADATA).encode())
                else:
                    self.reply(404, json.dumps({"error": "unknown"}).encode())

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock:
                    number = next(counter)
                if number % refuse_every == 0:
                    self.reply(400, json.dumps({"error": MESSAGE}).encode())
                else:
                    self.reply(200, json.dumps({"model_name": "m", "outputs": []}).encode())

            def reply(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.httpd.request_queue_size = 128  # a real server's backlog, not socketserver's 5
        self.httpd.server_bind()
        self.httpd.server_activate()
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The model's URL."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v2/models/m"

    def __enter__(self) -> FakeKServe:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
