"""`optimize --serve --slo-p99-ms X` runs tune-batching's search on the pick and `deploy --target triton` on the
folder writes the measured `dynamic_batching` and `instance_group` without another command; a model with a
static batch of 1 is said to be unbatchable and the step is skipped."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import load_json, run_cli
from infermeter.deploy.manifest import serve_settings
from infermeter.optimize.serving import SERVING_FILE, MeasuredPolicy

# Short measurements; no finalists' group (tests/optimize/test_optimize_cli.py runs it).
QUICK = ["--iterations", "10", "--min-time", "0.05", "--warmup", "1", "--max-time", "1", "--rounds", "2"]
QUICK += ["--threads", "1", "--target-ci", "0", "--finalists", "0", "-b", "onnxruntime", "--budget-minutes", "4"]
SERVE = ["--serve-max-batch", "2,4", "--serve-max-delay-ms", "1", "--serve-duration", "0.3"]
SERVE += ["--serve-concurrency", "4"]


def _step(folder: Path, key: str) -> dict[str, Any]:
    journal = load_json(folder / "results.json")["optimize"]
    step: dict[str, Any] = next(s for s in journal["steps"] if s["key"] == key)
    return step


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """tiny_cnn's ONNX file (dynamic batch) optimized on ONNX Runtime for a server with a loose SLO."""
    from infermeter.models.convert import onnx_for
    from infermeter.models.resolve import resolve_model

    root = tmp_path_factory.mktemp("serve")
    model = root / "tiny.onnx"
    shutil.copyfile(onnx_for(resolve_model("tiny_cnn")).path, model)
    folder = root / "out"
    args = ["optimize", str(model), "-o", str(folder), "--serve", "--slo-p99-ms", "2000", *SERVE, *QUICK]
    return folder, run_cli(*args, timeout=500)


@pytest.mark.slow
def test_the_measured_policy_is_recorded(served: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, proc = served
    assert proc.returncode == 0, proc.stderr[-3000:]
    step = _step(folder, "serving")
    assert step["status"] == "done", step
    policy = MeasuredPolicy.from_dict(step["details"]["policy"])
    manifest = load_json(folder / "deploy.json")
    assert manifest["serving"]["measured"] == policy.to_dict()
    assert policy.case_id == manifest["chosen"]["case_id"] and policy.max_batch in (2, 4)
    assert policy.preferred_batch_sizes == (policy.max_batch,) and policy.policies_tried == 2
    # The figures are those of the tune-batching point marked as the pick in serving.json.
    point = next(c for c in load_json(folder / SERVING_FILE)["cases"] if c["tune"]["pick"])
    assert point["id"] == policy.load_case_id
    assert int(point["options"]["serve.max_batch"]) == policy.max_batch
    assert float(point["options"]["serve.max_delay_ms"]) == policy.max_delay_ms
    assert int(point["options"]["serve.workers"]) == policy.workers
    assert point["timing"]["throughput"] == pytest.approx(policy.throughput_per_s)
    assert point["latency_ms"]["p99"] == pytest.approx(policy.p99_ms) and policy.p99_ms <= 2000
    assert f"serving: {policy.label()}" in proc.stdout
    # `serve DIR` starts the measured policy.
    settings = serve_settings(folder)
    assert (settings.max_batch, settings.max_delay_ms, settings.workers) == (
        policy.max_batch,
        policy.max_delay_ms,
        policy.workers,
    )
    assert "measured by the serving step" in (folder / "DEPLOY.md").read_text()
    assert 'id="step-serving"' in (folder / "report.html").read_text()


@pytest.mark.slow
def test_deploy_triton_writes_the_measured_dynamic_batching(
    served: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    text_format = pytest.importorskip("google.protobuf.text_format")
    model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    folder, proc = served
    assert proc.returncode == 0, proc.stderr[-3000:]
    policy = MeasuredPolicy.from_dict(_step(folder, "serving")["details"]["policy"])
    out = tmp_path / "deployed"
    deployed = run_cli("deploy", str(folder), "--target", "triton", "-o", str(out), timeout=120)
    assert deployed.returncode == 0, deployed.stderr[-2000:]
    path = next((out / "model_repository").glob("*/config.pbtxt"))
    config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
    assert config.max_batch_size == policy.max_batch
    assert config.HasField("dynamic_batching")
    assert list(config.dynamic_batching.preferred_batch_size) == list(policy.preferred_batch_sizes)
    assert config.dynamic_batching.max_queue_delay_microseconds == round(policy.max_delay_ms * 1000)
    assert [g.count for g in config.instance_group] == [policy.workers]
    assert f"{SERVING_FILE} tune-batching pick {policy.load_case_id}" in path.read_text()  # the origin, per value


def _static_batch_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "static",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_static_batch_is_named_as_the_reason() -> None:
    from infermeter.models.resolve import resolve_model
    from infermeter.optimize.steps.serving import static_batch_reason

    assert static_batch_reason(resolve_model("tiny_cnn")) is None


@pytest.mark.slow
def test_an_slo_alone_asks_for_serving_and_a_static_batch_skips_it(tmp_path: Path) -> None:
    model = _static_batch_onnx(tmp_path / "static.onnx")
    folder = tmp_path / "out"
    proc = run_cli("optimize", str(model), "-o", str(folder), "--slo-p99-ms", "50", *SERVE, *QUICK, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    step = _step(folder, "serving")
    assert step["status"] == "skipped"
    assert "static batch of 1 (input x: [1, 8])" in step["skipped"][0]["reason"]
    assert "static batch of 1" in proc.stderr
    manifest = load_json(folder / "deploy.json")
    assert "measured" not in manifest["serving"] and manifest["serving"]["max_batch"] == 1
    assert not (folder / SERVING_FILE).exists()


@pytest.mark.slow
def test_a_rerun_resumes_the_measured_policy(served: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, proc = served
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = (folder / SERVING_FILE).read_text()
    policy = _step(folder, "serving")["details"]["policy"]
    model = folder.parent / "tiny.onnx"
    args = ["optimize", str(model), "-o", str(folder), "--serve", "--slo-p99-ms", "2000", *SERVE, *QUICK]
    again = run_cli(*args, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed: this policy was measured earlier" in again.stderr
    assert (folder / SERVING_FILE).read_text() == before
    assert load_json(folder / "deploy.json")["serving"]["measured"] == policy


def test_the_search_is_estimated_from_its_points_and_server_starts() -> None:
    from crafted_results import make_case
    from infermeter.load.tune import policies
    from infermeter.optimize.request import ServingRequest
    from infermeter.optimize.steps.serving import _estimate_s

    grid = policies([1, 4], [1.0], [1])
    serving = ServingRequest(50.0, (1, 4), (1.0,), (1,), duration_s=0.3, concurrency=4)
    pick = make_case("onnxruntime", load_s=0.5)
    # b1: concurrency 1, 2; b4: 1, 2, 4 -> 5 points of 0.3 + 0.2 s; 3 server starts (2 policies + the check) of
    # 1.5 s; the Poisson check's 5 s.
    assert _estimate_s(grid, serving, pick) == pytest.approx(5 * 0.5 + 3 * 1.5 + 5.0)
