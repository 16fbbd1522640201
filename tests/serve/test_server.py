"""The server on 127.0.0.1: protocol, batching, buckets, bad requests, overload, backend errors, shutdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from serve_helpers import make_server, metric, post_many

from infermeter.serve.protocol import decode_infer_response, encode_binary_request, encode_json_request

TINY = np.zeros((1, 3, 32, 32), dtype=np.float32)


def _json(inputs: dict[str, np.ndarray]) -> tuple[bytes, dict[str, str]]:
    return encode_json_request(inputs), {"content-type": "application/json"}


def test_health_metadata_json_and_binary_inference(serve: Any) -> None:
    url = serve(options=[("null.latency_ms", "1")])
    assert httpx.get(f"{url}/v2/health/live").status_code == 200
    assert httpx.get(f"{url}/v2/health/ready").status_code == 200
    meta = httpx.get(f"{url}/v2/models/tiny_cnn").json()
    assert meta["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 3, 32, 32]}]
    assert meta["parameters"]["backend"] == "null"
    assert meta["parameters"]["precision_effective"] == "fp32"
    assert httpx.get(f"{url}/v2/models/tiny_cnn/ready").status_code == 200

    response = httpx.post(f"{url}/v2/models/tiny_cnn/infer", content=encode_json_request({"input": TINY}))
    assert response.status_code == 200, response.text
    assert response.json()["outputs"][0]["name"] == "logits"
    assert response.json()["outputs"][0]["shape"] == [1, 1]

    body, headers = encode_binary_request({"input": np.ones((2, 3, 32, 32), np.float32)}, request_id="r-7")
    response = httpx.post(f"{url}/v2/models/tiny_cnn/infer", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert "inference-header-content-length" in response.headers
    outputs = decode_infer_response(response.content, response.headers["inference-header-content-length"])
    assert outputs["logits"].shape == (2, 1)
    assert json.loads(response.content[: int(response.headers["inference-header-content-length"])])["id"] == "r-7"


def test_not_ready_until_loaded_and_warmed_up() -> None:
    server = make_server(options=[("null.load_s", "1.0")])
    url = server.start(wait_ready=False)
    try:
        deadline = time.perf_counter() + 5
        while time.perf_counter() < deadline:
            try:
                live = httpx.get(f"{url}/v2/health/live")
                break
            except httpx.TransportError:
                time.sleep(0.02)
        assert live.status_code == 200
        assert httpx.get(f"{url}/v2/health/ready").status_code == 503
        response = httpx.post(f"{url}/v2/models/tiny_cnn/infer", content=encode_json_request({"input": TINY}))
        assert response.status_code == 503 and "not ready" in response.json()["error"]
        assert server.state.loaded.wait(30)
        assert httpx.get(f"{url}/v2/health/ready").status_code == 200
    finally:
        server.stop()


def test_batches_form_and_every_request_gets_its_own_answer(serve: Any, echo_onnx: str) -> None:
    url = serve(echo_onnx, "onnxruntime", max_batch=8, max_delay_ms=200.0, input_shapes=(("X", (1, 4)),))
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(24)]
    bodies = [encode_binary_request({"X": x}, request_id=str(i)) for i, x in enumerate(inputs)]
    responses = post_many(f"{url}/v2/models/echo/infer", bodies)
    assert [r.status_code for r in responses] == [200] * 24
    for i, (x, response) in enumerate(zip(inputs, responses, strict=True)):
        length = response.headers["inference-header-content-length"]
        assert json.loads(response.content[: int(length)])["id"] == str(i)
        outputs = decode_infer_response(response.content, length)
        np.testing.assert_array_equal(outputs["Y"], 2 * x)  # split back to the right request
    text = httpx.get(f"{url}/metrics").text
    batches = metric(text, "infermeter_batch_size_count")
    rows = metric(text, "infermeter_batch_size_sum")
    # Warm-up does not pass the batcher: exactly the 24 rows were batched, in fewer than 24 batches.
    assert rows == 24
    assert batches < 24
    assert metric(text, 'infermeter_requests_total{code="200"') == 24


def test_buckets_pad_to_the_next_size_and_slice_back(serve: Any, echo_onnx: str) -> None:
    url = serve(echo_onnx, "onnxruntime", max_batch=4, max_delay_ms=1.0, buckets=("8,16",))
    meta = httpx.get(f"{url}/v2/models/echo").json()
    assert meta["parameters"]["buckets"] == [{"input": "X", "axis": 1, "sizes": [8, 16]}]
    for length, bucket in ((5, 8), (8, 8), (12, 16)):
        x = np.arange(length, dtype=np.float32).reshape(1, length) + 1
        body, headers = encode_binary_request({"X": x})
        response = httpx.post(f"{url}/v2/models/echo/infer", content=body, headers=headers)
        assert response.status_code == 200, response.text
        outputs = decode_infer_response(response.content, response.headers["inference-header-content-length"])
        np.testing.assert_array_equal(outputs["Y"], 2 * x)  # sliced back to the request's own length
        assert outputs["C"].tolist() == [[float(bucket)]]  # the model saw the padded length
    body, headers = encode_binary_request({"X": np.ones((1, 17), np.float32)})
    response = httpx.post(f"{url}/v2/models/echo/infer", content=body, headers=headers)
    assert response.status_code == 400 and "largest bucket" in response.json()["error"]


def _binary_with_wrong_size() -> tuple[bytes, dict[str, str]]:
    body, headers = encode_binary_request({"input": TINY})
    return body[:-4], headers


@pytest.fixture(scope="module")
def shared_null_server() -> Iterator[str]:
    """One null server for the many bad-request cases (each leaves it serving)."""
    server = make_server(max_batch=8, options=[("null.latency_ms", "0.1")])
    yield server.start()
    server.stop()


BAD_REQUESTS = [
    ("malformed JSON", (b"{not json", {}), 400, "not valid JSON"),
    ("no inputs", (b'{"outputs": []}', {}), 400, "no 'inputs'"),
    ("wrong input name", _json({"image": TINY}), 400, "unknown input(s) image"),
    ("wrong shape", _json({"input": np.zeros((1, 3, 16, 16), np.float32)}), 400, "dim 2 must be 32"),
    ("wrong rank", _json({"input": np.zeros((3, 32, 32), np.float32)}), 400, "shape [3, 32, 32]"),
    ("wrong dtype", _json({"input": TINY.astype(np.float64)}), 400, "datatype FP64, the model expects FP32"),
    ("unknown datatype", (b'{"inputs":[{"name":"input","shape":[1],"datatype":"STRING","data":[1]}]}', {}), 400,
     "not supported"),
    ("data count", (b'{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":[1,2]}]}', {}), 400,
     "holds 2 values"),
    ("binary size mismatch", _binary_with_wrong_size(), 400, "binary data ends"),
    ("bad header length", (b"{}", {"inference-header-content-length": "99"}), 400, "does not fit"),
    ("too many rows", _json({"input": np.zeros((9, 3, 32, 32), np.float32)}), 400, "1 to 8 rows"),
    ("unknown output", (encode_json_request({"input": TINY})[:-1] + b',"outputs":[{"name":"prob"}]}', {}), 400,
     "unknown output(s) prob"),
    ("deeply nested JSON", (b'{"inputs":' + b"[" * 100_000 + b"]" * 100_000 + b"}", {}), 400, "too deeply"),
    ("data nested deeper than any tensor", (b'{"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":'
     + b"[" * 100 + b"1" + b"]" * 100 + b"}]}", {}), 400, "maximum number of dimension"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "needle"), [case[1:] for case in BAD_REQUESTS], ids=[c[0] for c in BAD_REQUESTS]
)
def test_bad_requests_get_a_4xx_that_says_what_is_wrong(
    shared_null_server: str, body: tuple[bytes, dict[str, str]], status: int, needle: str
) -> None:
    url = shared_null_server
    response = httpx.post(f"{url}/v2/models/tiny_cnn/infer", content=body[0], headers=body[1])
    assert response.status_code == status
    assert needle in response.json()["error"]
    # The server goes on answering good requests.
    assert (
        httpx.post(f"{url}/v2/models/tiny_cnn/infer", content=encode_json_request({"input": TINY})).status_code == 200
    )


def test_oversize_body_unknown_model_and_api_key(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = serve(max_body_mb=0.001, api_key="s3cret", options=[("null.latency_ms", "0.1")])
    auth = {"authorization": "Bearer s3cret"}
    assert httpx.get(f"{url}/v2/health/live").status_code == 200  # health needs no key
    assert httpx.get(f"{url}/v2/health/ready").status_code == 200
    denied = httpx.get(f"{url}/v2/models/tiny_cnn")
    assert denied.status_code == 401 and "API key" in denied.json()["error"]
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/v2/models/tiny_cnn", headers={"x-api-key": "wrong"}).status_code == 401
    assert httpx.get(f"{url}/v2/models/tiny_cnn", headers=auth).status_code == 200
    missing = httpx.get(f"{url}/v2/models/resnet", headers=auth)
    assert missing.status_code == 404 and "tiny_cnn" in missing.json()["error"]
    big = httpx.post(f"{url}/v2/models/tiny_cnn/infer", content=encode_json_request({"input": TINY}), headers=auth)
    assert big.status_code == 413 and "exceeds the limit" in big.json()["error"]


def test_overload_beyond_max_queue_is_503_at_once(serve: Any) -> None:
    url = serve(max_batch=1, max_queue=2, options=[("null.latency_ms", "300"), ("null.wait", "sleep")])
    body = _json({"input": TINY})
    responses = post_many(f"{url}/v2/models/tiny_cnn/infer", [body] * 8)
    codes = sorted(r.status_code for r in responses)
    assert set(codes) == {200, 503}
    assert codes.count(200) >= 1 and codes.count(503) >= 1
    assert all("queue full" in r.json()["error"] for r in responses if r.status_code == 503)
    text = httpx.get(f"{url}/metrics").text
    assert metric(text, 'infermeter_rejected_requests_total{model="tiny_cnn",reason="queue_full"}') == codes.count(503)


def test_backend_error_fails_only_its_batch(serve: Any, gather_onnx: str) -> None:
    url = serve(gather_onnx, "onnxruntime", max_batch=1)
    infer = f"{url}/v2/models/gather/infer"
    good = [encode_binary_request({"idx": np.array([[i]], np.int64)}) for i in (1, 2, 3)]
    bad = encode_binary_request({"idx": np.array([[500]], np.int64)})
    responses = post_many(infer, [good[0], bad, good[1], bad, good[2]])
    assert [r.status_code for r in responses] == [200, 500, 200, 500, 200]
    assert "inference failed in the backend" in responses[1].json()["error"]
    values = [
        decode_infer_response(r.content, r.headers["inference-header-content-length"])["out"] for r in responses[::2]
    ]
    assert [v.item() for v in values] == [10.0, 20.0, 30.0]
    assert metric(httpx.get(f"{url}/metrics").text, "infermeter_batch_failures_total") == 2


def test_null_backend_failing_every_run_still_serves_health_and_metrics(serve: Any) -> None:
    # Warm-up runs fail too: the server still comes up and answers each inference with a 500, not a hang.
    url = serve(options=[("null.fail", "run")])
    responses = post_many(f"{url}/v2/models/tiny_cnn/infer", [_json({"input": TINY})] * 3)
    assert [r.status_code for r in responses] == [500] * 3
    assert "null.fail" in responses[0].json()["error"]
    assert httpx.get(f"{url}/v2/health/live").status_code == 200
    assert httpx.get(f"{url}/metrics").status_code == 200


def test_graceful_shutdown_answers_every_accepted_request() -> None:
    command = [sys.executable, "-m", "infermeter", "serve", "tiny_cnn", "-b", "null", "--port", "0", "--max-batch", "1"]
    command += ["-O", "null.latency_ms=300", "-O", "null.wait=sleep", "--threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split("listening on ")[1].strip()
        deadline = time.perf_counter() + 60
        while httpx.get(f"{url}/v2/health/ready").status_code != 200:
            assert time.perf_counter() < deadline
            time.sleep(0.05)
        results: list[int] = []

        def send() -> None:
            response = httpx.post(
                f"{url}/v2/models/tiny_cnn/infer", content=encode_json_request({"input": TINY}), timeout=30
            )
            results.append(response.status_code)

        threads = [threading.Thread(target=send) for _ in range(6)]
        for thread in threads:
            thread.start()
        # Wait until all six are accepted (in flight or answered), then ask the server to stop while several
        # still wait in its queue.
        while (inflight := metric(httpx.get(f"{url}/metrics").text, "infermeter_inflight_requests{")) + len(
            results
        ) < 6:
            assert time.perf_counter() < deadline
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        assert inflight >= 2
        for thread in threads:
            thread.join(30)
        assert results == [200] * 6  # queued work finished after the signal
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
