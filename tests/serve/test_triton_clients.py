"""Triton's own clients against `infermeter serve`: tritonclient.http and tritonclient.grpc list the repository,
read the model's configuration, infer (FP32 within the parity tolerance of a numpy reference) and read the
statistics, against `serve REPO` (a Triton repository, the real CLI in a child process) and against `serve MODEL`
(an ONNX file, a server thread). One server of each per module."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from serve_helpers import make_server

triton_http = pytest.importorskip("tritonclient.http")
triton_grpc = pytest.importorskip("tritonclient.grpc")
pytest.importorskip("onnxruntime")

FEATURES = 4
WEIGHT = np.random.default_rng(7).standard_normal((FEATURES, 3)).astype(np.float32)
BIAS = np.array([0.5, -1.0, 2.0], dtype=np.float32)
CONFIG = """name: "linear"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
dynamic_batching { max_queue_delay_microseconds: 1000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def _linear_onnx(path: Path) -> Path:
    """Y = X @ W + B, X float32[batch, 4]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["Y"])],
        "linear",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", FEATURES])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[numpy_helper.from_array(WEIGHT, "W"), numpy_helper.from_array(BIAS, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


@dataclass(frozen=True)
class Served:
    """A running server: its HTTP host:port, gRPC host:port, and whether it serves a repository."""

    http: str
    grpc: str
    repository: bool


@pytest.fixture(scope="module", params=["repo", "model"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from infermeter.serve.server import spawn_server

    root = tmp_path_factory.mktemp("triton")
    if request.param == "repo":
        repo = root / "repo"
        for name in ("linear", "other"):
            _linear_onnx(repo / name / "1" / "model.onnx")
            (repo / name / "config.pbtxt").write_text(CONFIG.replace('"linear"', f'"{name}"'))
        server = spawn_server([str(repo), "--name", "linear", "--threads", "1"], ready_timeout_s=120, grpc=True)
        assert server.grpc_address is not None
        try:
            yield Served(server.url.removeprefix("http://"), server.grpc_address, True)
        finally:
            assert server.stop() == 0
        return
    model = _linear_onnx(root / "linear.onnx")
    thread = make_server(str(model), "onnxruntime", max_batch=8, max_delay_ms=1.0, grpc=True)
    url = thread.start()
    assert thread.grpc_address is not None
    try:
        yield Served(url.removeprefix("http://"), thread.grpc_address, False)
    finally:
        thread.stop()


def _reference(x: np.ndarray) -> np.ndarray:
    return x @ WEIGHT + BIAS


def _assert_parity(served: np.ndarray, x: np.ndarray) -> None:
    from infermeter.parity import default_tolerance

    tolerance = default_tolerance("fp32")
    np.testing.assert_allclose(served, _reference(x), rtol=tolerance.rtol, atol=tolerance.atol)


def test_http_client_index_config_infer_stats(served: Served) -> None:
    client = triton_http.InferenceServerClient(url=served.http)
    index = client.get_model_repository_index()
    assert {"name": "linear", "version": "1", "state": "READY"} in index
    if served.repository:  # the other model of the repository is listed, not served
        other = next(m for m in index if m["name"] == "other")
        assert other["state"] == "UNAVAILABLE" and "--name other" in other["reason"]
    config = client.get_model_config("linear")
    assert config["name"] == "linear" and config["max_batch_size"] == 8
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [("X", "TYPE_FP32", [4])]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [("Y", "TYPE_FP32", [3])]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 1000
    before = client.get_inference_statistics("linear")["model_stats"][0]
    x = np.random.default_rng(1).standard_normal((3, FEATURES)).astype(np.float32)
    tensor = triton_http.InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    result = client.infer("linear", [tensor], outputs=[triton_http.InferRequestedOutput("Y")])
    _assert_parity(result.as_numpy("Y"), x)
    after = client.get_inference_statistics("linear")["model_stats"][0]
    assert after["name"] == "linear" and after["version"] == "1"
    stats, earlier = after["inference_stats"], before["inference_stats"]
    assert stats["success"]["count"] == earlier["success"]["count"] + 1
    assert stats["success"]["ns"] > earlier["success"]["ns"]
    assert after["inference_count"] == before["inference_count"] + 3  # rows, not requests
    assert after["execution_count"] == before["execution_count"] + 1
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert stats[key]["count"] == earlier[key]["count"] + 1
    assert stats["compute_infer"]["ns"] > earlier["compute_infer"]["ns"]
    assert after["last_inference"] > 0 and any(b["batch_size"] == 3 for b in after["batch_stats"])
    every = client.get_inference_statistics()["model_stats"]  # GET /v2/models/stats: every model's
    assert [m["name"] for m in every] == ["linear"]


def test_http_errors_in_triton_shape(served: Served) -> None:
    client = triton_http.InferenceServerClient(url=served.http)
    with pytest.raises(triton_http.InferenceServerException, match="unknown model 'nope'"):
        client.get_model_config("nope")
    with pytest.raises(triton_http.InferenceServerException, match="unknown model"):
        client.get_inference_statistics("nope")
    metadata = client.get_server_metadata()
    assert {"model_configuration", "model_repository", "statistics"} <= set(metadata["extensions"])
    import httpx

    for response in (
        httpx.get(f"http://{served.http}/v2/nowhere"),
        httpx.get(f"http://{served.http}/v2/repository/index"),
    ):
        assert response.status_code in (404, 405) and set(response.json()) == {"error"}


def test_grpc_client_index_config_infer_stats(served: Served) -> None:
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("linear")
    index = client.get_model_repository_index(as_json=True)["models"]
    assert {"name": "linear", "version": "1", "state": "READY"} in index
    assert len(index) == (2 if served.repository else 1)
    config = client.get_model_config("linear").config
    assert config.name == "linear" and config.max_batch_size == 8
    assert [(i.name, list(i.dims)) for i in config.input] == [("X", [4])]
    assert config.input[0].data_type == triton_grpc.model_config_pb2.TYPE_FP32
    metadata = client.get_model_metadata("linear")
    assert [(i.name, i.datatype, list(i.shape)) for i in metadata.inputs] == [("X", "FP32", [-1, 4])]
    before = client.get_inference_statistics("linear").model_stats[0]
    x = np.random.default_rng(2).standard_normal((2, FEATURES)).astype(np.float32)
    tensor = triton_grpc.InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("linear", [tensor], outputs=[triton_grpc.InferRequestedOutput("Y")], request_id="r1")
    _assert_parity(result.as_numpy("Y"), x)
    assert result.get_response().id == "r1"
    after = client.get_inference_statistics("linear").model_stats[0]
    assert after.inference_stats.success.count == before.inference_stats.success.count + 1
    assert after.inference_count == before.inference_count + 2
    assert after.inference_stats.queue.count == before.inference_stats.queue.count + 1


def test_grpc_typed_contents(served: Served) -> None:
    """A request with its tensor in `contents.fp32_contents` instead of raw_input_contents."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    x = np.arange(FEATURES, dtype=np.float32).reshape(1, FEATURES) / 7
    request = service_pb2.ModelInferRequest(model_name="linear")
    tensor = request.inputs.add(name="X", datatype="FP32", shape=[1, FEATURES])
    tensor.contents.fp32_contents.extend(x.ravel().tolist())
    with grpc.insecure_channel(served.grpc) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)  # type: ignore[no-untyped-call]
    served_y = np.frombuffer(response.raw_output_contents[0], dtype=np.float32).reshape(list(response.outputs[0].shape))
    _assert_parity(served_y, x)


def _bad(served: Served, request: object) -> object:
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    with grpc.insecure_channel(served.grpc) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request)
    return caught.value


def test_malformed_grpc_requests_get_protocol_codes(served: Served) -> None:
    import grpc
    from tritonclient.grpc import service_pb2

    def request(name: str = "linear", datatype: str = "FP32", shape: tuple[int, ...] = (1, FEATURES), raw: int = 16):
        message = service_pb2.ModelInferRequest(model_name=name)
        message.inputs.add(name="X", datatype=datatype, shape=list(shape))
        message.raw_input_contents.append(b"\0" * raw)
        return message

    cases = [
        (request(name="nope"), grpc.StatusCode.NOT_FOUND, "unknown model 'nope'"),
        (request(datatype="INT32"), grpc.StatusCode.INVALID_ARGUMENT, "the model expects FP32"),
        (request(datatype="STRING"), grpc.StatusCode.INVALID_ARGUMENT, "datatype 'STRING' is not supported"),
        (request(shape=(2, FEATURES)), grpc.StatusCode.INVALID_ARGUMENT, "holds 16 bytes but shape [2, 4]"),
        (request(shape=(1, 5), raw=20), grpc.StatusCode.INVALID_ARGUMENT, "dim 1 must be 4"),
        (request(shape=(1, -4)), grpc.StatusCode.INVALID_ARGUMENT, "negative dimension"),
    ]
    typed = service_pb2.ModelInferRequest(model_name="linear")
    typed.inputs.add(name="X", datatype="FP32", shape=[1, FEATURES]).contents.fp32_contents.extend([1.0, 2.0, 3.0])
    cases.append((typed, grpc.StatusCode.INVALID_ARGUMENT, "contents.fp32_contents holds 3 values"))
    two_raws = request()
    two_raws.raw_input_contents.append(b"\0" * 16)
    cases.append((two_raws, grpc.StatusCode.INVALID_ARGUMENT, "2 raw_input_contents for 1 inputs"))
    for message, code, text in cases:
        error = _bad(served, message)
        assert error.code() == code, (text, error.details())  # type: ignore[attr-defined]
        assert text in error.details()  # type: ignore[attr-defined]
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    assert client.is_server_ready() and client.is_model_ready("linear")
    fail = client.get_inference_statistics("linear").model_stats[0].inference_stats.fail
    assert fail.count >= len(cases) - 1  # every refusal but the unknown model's counts for this model
    with pytest.raises(triton_grpc.InferenceServerException, match="unknown model"):
        client.get_model_config("nope")


def test_load_drives_grpc_through_the_shared_batcher_and_metrics(served: Served) -> None:
    """`load grpc://...`'s driver: its requests reach the same statistics and Prometheus metrics as HTTP's."""
    import httpx
    from serve_helpers import metric

    from infermeter.load.driver import RunSettings, run_once
    from infermeter.load.target import prepare_target

    client = triton_http.InferenceServerClient(url=served.http)
    before = client.get_inference_statistics("linear")["model_stats"][0]["inference_stats"]["success"]["count"]
    counted = metric(httpx.get(f"http://{served.http}/metrics").text, 'infermeter_requests_total{code="200"')
    target = prepare_target(f"grpc://{served.grpc}/v2/models/linear", batch=2)
    assert target.model_name == "linear" and target.backend == "onnxruntime"
    run = run_once(target, RunSettings("offline", 0.5, concurrency=4, warmup_s=0))
    assert run.ok > 0 and not run.errors
    after = client.get_inference_statistics("linear")["model_stats"][0]["inference_stats"]["success"]["count"]
    assert after - before == run.ok
    assert metric(httpx.get(f"http://{served.http}/metrics").text, 'infermeter_requests_total{code="200"') >= (
        counted + run.ok
    )


def test_what_perf_analyzer_reads_over_http(served: Served) -> None:
    """DEPLOY.md replays the measured load with perf_analyzer: every field its Triton client backend reads from
    the statistics (ParseStatistics, rapidjson GetUint64 / GetString) is there, with that JSON type."""
    import httpx

    base = f"http://{served.http}"
    assert isinstance(httpx.get(f"{base}/v2").json()["extensions"], list)
    config = httpx.get(f"{base}/v2/models/linear/config").json()
    assert isinstance(config["max_batch_size"], int) and all(isinstance(d, int) for d in config["input"][0]["dims"])
    stat = httpx.get(f"{base}/v2/models/linear/stats").json()["model_stats"][0]
    assert isinstance(stat["name"], str) and isinstance(stat["version"], str)
    assert isinstance(stat["inference_count"], int) and isinstance(stat["execution_count"], int)
    for key in ("success", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"):
        assert isinstance(stat["inference_stats"][key]["count"], int), key
        assert isinstance(stat["inference_stats"][key]["ns"], int), key
    assert httpx.post(f"{base}/v2/repository/index", content=b'{"ready": true}').json() == [
        {"name": "linear", "version": "1", "state": "READY"}
    ]
    bad = httpx.post(f"{base}/v2/repository/index", content=b"{not json")
    assert bad.status_code == 400 and set(bad.json()) == {"error"}


def test_grpc_api_key_and_a_port_in_use() -> None:
    """The API key guards gRPC as it guards HTTP (metadata `authorization: Bearer KEY`); a gRPC port already in
    use is one UsageError (no silent port sharing)."""
    from infermeter.core.errors import UsageError
    from infermeter.serve.grpc_server import GrpcServer

    thread = make_server("tiny_cnn", "null", api_key="sesame", grpc=True)
    thread.start()
    try:
        assert thread.grpc_address is not None
        locked = triton_grpc.InferenceServerClient(url=thread.grpc_address)
        assert locked.is_server_live()  # health needs no key
        with pytest.raises(triton_grpc.InferenceServerException, match="API key"):
            locked.get_model_config("tiny_cnn")
        config = locked.get_model_config("tiny_cnn", headers={"authorization": "Bearer sesame"}).config
        assert config.name == "tiny_cnn" and config.platform == "infermeter_null"
        host, port = thread.grpc_address.rsplit(":", 1)
        with pytest.raises(UsageError, match="choose another --grpc-port"):
            GrpcServer(thread.state, host, int(port)).start()
    finally:
        thread.stop()
