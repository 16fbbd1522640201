"""`infermeter deploy`: config.pbtxt checked by Triton's own ModelConfig protobuf, the InferenceService by the
fields the KServe CRD requires, DEPLOY.md's numbers and perf_analyzer line read from the results, and the round
trip deploy -> `infermeter serve REPO` -> answered through tritonclient.http, matching the reference outputs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from deploy_helpers import LOAD_ID, ORT_ID, OV_ID

from cli_helpers import load_json, run_cli
from infermeter.deploy.kserve import check_manifest

text_format = pytest.importorskip("google.protobuf.text_format")
model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2")


def _deploy(*args: str) -> subprocess.CompletedProcess[str]:
    proc = run_cli("deploy", *args, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _model_config(path: Path) -> object:
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


@pytest.fixture(scope="module")
def kserve_deploy(optimize_folder: Path, load_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The optimize pick (OpenVINO INT8) deployed for KServe with the load run's batching."""
    out = tmp_path_factory.mktemp("deploy") / "ov"
    _deploy(str(optimize_folder), "--target", "kserve", "--load", str(load_file), "-o", str(out))
    return out


@pytest.fixture(scope="module")
def ort_deploy(optimize_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ONNX Runtime FP32 case of the same results file, deployed from the results file and --case."""
    out = tmp_path_factory.mktemp("deploy") / "ort"
    _deploy(str(optimize_folder / "results.json"), "--case", ORT_ID, "-o", str(out))
    return out


def test_openvino_int8_config_parses_with_triton_modelconfig(kserve_deploy: Path, load_file: Path) -> None:
    config = _model_config(kserve_deploy / "model_repository" / "tiny_cnn" / "config.pbtxt")
    assert config.name == "tiny_cnn" and config.backend == "openvino"  # type: ignore[attr-defined]
    load = next(c for c in load_json(load_file)["cases"] if c["id"] == LOAD_ID)
    assert config.max_batch_size == int(load["options"]["serve.max_batch"])  # type: ignore[attr-defined]
    batching = config.dynamic_batching  # type: ignore[attr-defined]
    assert list(batching.preferred_batch_size) == [8]
    assert batching.max_queue_delay_microseconds == 1500
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, model_config_pb2.ModelInstanceGroup.KIND_CPU)]  # type: ignore[attr-defined]
    assert [(i.name, list(i.dims), i.data_type) for i in config.input] == [  # type: ignore[attr-defined]
        ("input", [3, 32, 32], model_config_pb2.TYPE_FP32)
    ]
    assert [(o.name, list(o.dims)) for o in config.output] == [("logits", [10])]  # type: ignore[attr-defined]
    params = {k: v.string_value for k, v in config.parameters.items()}  # type: ignore[attr-defined]
    # The measured precision is deployed: an INT8 file whose float layers run f32, as when measured.
    assert params == {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": "2"}
    text = (kserve_deploy / "model_repository" / "tiny_cnn" / "config.pbtxt").read_text()
    assert f"case {OV_ID}" in text and "load.json" in text  # every value's origin is written beside it
    assert (kserve_deploy / "model_repository" / "tiny_cnn" / "1" / "model.onnx").is_file()


def test_ort_fp32_config_from_results_file(ort_deploy: Path) -> None:
    config = _model_config(ort_deploy / "model_repository" / "tiny_cnn" / "config.pbtxt")
    assert config.platform == "onnxruntime_onnx" and config.max_batch_size == 4  # type: ignore[attr-defined]
    # A bench case measured whole batches, not a batching policy: no dynamic_batching is invented.
    assert not config.HasField("dynamic_batching")  # type: ignore[attr-defined]
    params = {k: v.string_value for k, v in config.parameters.items()}  # type: ignore[attr-defined]
    assert params == {"intra_op_thread_count": "2", "inter_op_thread_count": "1"}
    assert not (ort_deploy / "inference-service.yaml").exists()


def test_a_misspelt_field_fails_the_real_schema(ort_deploy: Path) -> None:
    text = (ort_deploy / "model_repository" / "tiny_cnn" / "config.pbtxt").read_text()
    with pytest.raises(text_format.ParseError):
        text_format.Parse(text.replace("max_batch_size", "max_batch_sise"), model_config_pb2.ModelConfig())


def test_kserve_manifest_has_the_crd_fields_and_measured_resources(kserve_deploy: Path, optimize_folder: Path) -> None:
    document = yaml.safe_load((kserve_deploy / "inference-service.yaml").read_text())
    assert check_manifest(document) == []
    model = document["spec"]["predictor"]["model"]
    assert model["protocolVersion"] == "v2" and model["modelFormat"]["name"] == "triton"
    assert model["storageUri"].startswith("s3://")
    case = next(c for c in load_json(optimize_folder / "results.json")["cases"] if c["id"] == OV_ID)
    # 2 threads per instance x 2 instances; peak RSS 180 MB x 2.
    assert model["resources"]["requests"] == {"cpu": str(case["threads"] * 2), "memory": "360Mi"}
    assert model["resources"]["limits"]["cpu"] == model["resources"]["requests"]["cpu"]
    broken = {**document, "spec": {"predictor": {"model": {**model, "protocolVersion": "v3"}}}}
    assert any("protocolVersion" in p for p in check_manifest(broken))


def test_deploy_md_lists_files_and_replays_the_measured_load(kserve_deploy: Path, load_file: Path) -> None:
    text = (kserve_deploy / "DEPLOY.md").read_text()
    for name in ("config.pbtxt", "1/model.onnx", "inference-service.yaml"):
        assert name in text
    line = next(x for x in text.splitlines() if x.startswith("perf_analyzer"))
    assert "-m tiny_cnn" in line and "-b 1" in line and "--concurrency-range 8:8" in line
    grpc_line = next(x for x in text.splitlines() if x.startswith("perf_analyzer") and "-i grpc" in x)
    assert "-u localhost:8001" in grpc_line and "--concurrency-range 8:8" in grpc_line
    assert "--grpc-port 8001" in text and "--shared-memory" in text  # what only a real Triton has
    load = next(c for c in load_json(load_file)["cases"] if c["id"] == LOAD_ID)
    assert f"P99 {load['latency_ms']['p99']:.3f} ms" in text


@pytest.mark.parametrize(("which", "min_cosine"), [("ort", 0.99999), ("ov", 0.98)])
def test_round_trip_deploy_serve_tritonclient(
    which: str, min_cosine: float, ort_deploy: Path, kserve_deploy: Path
) -> None:
    import tritonclient.http as triton_http

    from infermeter.models.resolve import resolve_model
    from infermeter.models.torch_form import load_torch_module
    from infermeter.serve.server import spawn_server

    torch = pytest.importorskip("torch")
    repo = (ort_deploy if which == "ort" else kserve_deploy) / "model_repository"
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        reference = load_torch_module(resolve_model("tiny_cnn"))(torch.from_numpy(x)).numpy()
    server = spawn_server([str(repo), "--threads", "1"], ready_timeout_s=120)
    try:
        client = triton_http.InferenceServerClient(url=server.url.removeprefix("http://"))
        assert client.is_server_live() and client.is_model_ready("tiny_cnn")
        tensor = triton_http.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        result = client.infer("tiny_cnn", [tensor], outputs=[triton_http.InferRequestedOutput("logits")])
        served = result.as_numpy("logits")
        metadata = client.get_model_metadata("tiny_cnn")
    finally:
        server.stop()
    assert served.shape == reference.shape
    cosine = float(np.sum(served * reference) / (np.linalg.norm(served) * np.linalg.norm(reference)))
    assert cosine >= min_cosine
    if which == "ort":  # FP32: within the parity tolerance of the PyTorch reference
        np.testing.assert_allclose(served, reference, rtol=1e-4, atol=1e-5 * float(np.abs(reference).max()))
    else:  # INT8: the serving batch and instances came from config.pbtxt
        assert metadata["parameters"]["max_batch"] == 8 and metadata["parameters"]["workers"] == 2


def test_bad_sources_are_one_clear_error(optimize_folder: Path, tmp_path: Path) -> None:
    proc = run_cli("deploy", str(optimize_folder / "results.json"), "-o", str(tmp_path / "x"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "--case" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_manifest_of_another_format_is_refused_by_deploy_and_serve(optimize_folder: Path, tmp_path: Path) -> None:
    import json
    import shutil

    from infermeter.core.errors import UsageError
    from infermeter.deploy.manifest import serve_settings

    folder = tmp_path / "future"
    shutil.copytree(optimize_folder, folder)
    manifest = json.loads((folder / "deploy.json").read_text())
    (folder / "deploy.json").write_text(json.dumps({**manifest, "format": 99}))
    proc = run_cli("deploy", str(folder), "-o", str(tmp_path / "x"))
    assert proc.returncode == 2 and "manifest format 99" in proc.stderr and len(proc.stderr.splitlines()) == 1
    with pytest.raises(UsageError, match="reads format 1"):
        serve_settings(folder)
    assert not (tmp_path / "x").exists()


def test_tune_batching_pick_becomes_the_dynamic_batching(optimize_folder: Path, tmp_path: Path) -> None:
    tune = tmp_path / "tune.json"
    args = ["tune-batching", "tiny_cnn", "-b", "onnxruntime", "--threads", "1", "--slo-p99-ms", "500"]
    args += [
        "--max-batch",
        "2,4",
        "--max-delay-ms",
        "1",
        "--duration",
        "0.2",
        "--concurrency",
        "4",
        "--no-check",
        "--no-race",
    ]
    proc = run_cli(*args, "-o", str(tune), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    picks = [c for c in load_json(tune)["cases"] if c["tune"]["pick"]]
    assert len(picks) == 1
    pick = picks[0]
    out = tmp_path / "deployed"
    _deploy(str(optimize_folder), "--which", "fallback", "--load", str(tune), "-o", str(out))
    config = _model_config(out / "model_repository" / "tiny_cnn" / "config.pbtxt")
    assert config.max_batch_size == int(pick["options"]["serve.max_batch"])  # type: ignore[attr-defined]
    assert config.dynamic_batching.max_queue_delay_microseconds == 1000  # type: ignore[attr-defined]
    assert config.instance_group[0].count == 1  # type: ignore[attr-defined]
    line = next(x for x in (out / "DEPLOY.md").read_text().splitlines() if x.startswith("perf_analyzer"))
    assert f"--concurrency-range {pick['load']['concurrency']}:{pick['load']['concurrency']}" in line


@pytest.mark.parametrize(
    ("backend", "precision", "options", "platform"),
    [
        ("onnxruntime", "fp32", {"onnxruntime.opt_level": "extended"}, "onnxruntime_onnx"),
        ("onnxruntime-tensorrt", "fp16", {}, "onnxruntime_onnx"),
        ("openvino", "bf16", {"openvino.hint": "throughput", "openvino.streams": "2"}, "openvino"),
        ("tensorrt", "int8", {}, "tensorrt_plan"),
        ("torchscript", "fp32", {}, "pytorch_libtorch"),
    ],
)
def test_every_engine_config_parses(backend: str, precision: str, options: dict[str, str], platform: str) -> None:
    from crafted_results import make_case
    from infermeter.deploy.source import DeploySource, Figure, TensorSpec
    from infermeter.deploy.triton import render_config

    case = make_case(backend, 8, 1.0, precision=precision, threads=3)
    case.options = dict(options)
    source = DeploySource(
        case=case,
        results_path=Path("r.json"),
        environment={},
        model_file=Path("m.onnx"),
        name="m",
        inputs=(TensorSpec("input_ids", "int64", (-1, -1)),),
        outputs=(TensorSpec("out", "float32", (-1, 4)),),
        max_batch=Figure(8, "batch"),
        max_delay_ms=Figure(0.5, "delay"),
        instances=Figure(2, "instances"),
        load=None,
    )
    config = _model_config_text(render_config(source))
    assert platform in (config.platform, config.backend)  # type: ignore[attr-defined]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500  # type: ignore[attr-defined]
    assert list(config.input[0].dims) == [-1] and config.input[0].data_type == model_config_pb2.TYPE_INT64  # type: ignore[attr-defined]
    params = {k: v.string_value for k, v in config.parameters.items()}  # type: ignore[attr-defined]
    if backend == "onnxruntime":
        assert config.optimization.graph.level == 1  # type: ignore[attr-defined]
    if backend == "onnxruntime-tensorrt":
        accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator[0]  # type: ignore[attr-defined]
        assert accelerator.name == "tensorrt" and accelerator.parameters["precision_mode"] == "FP16"
    if backend == "openvino":
        assert params["INFERENCE_PRECISION_HINT"] == "bf16" and params["NUM_STREAMS"] == "2"
        assert params["PERFORMANCE_HINT"] == "THROUGHPUT"
    if backend == "torchscript":
        assert params["INTRA_OP_THREAD_COUNT"] == "3"


def _model_config_text(text: str) -> object:
    return text_format.Parse(text, model_config_pb2.ModelConfig())
