"""An OpenVINO IR (.xml + .bin) is a model: resolved with OpenVINO's own reading of its inputs, benched, parity-
checked, inspected and served on the openvino backend, refused by the others with the reason; a missing or
truncated .bin is one clear error. The IR is one NNCF wrote from the zoo's tiny_cnn, as `quantize --engine
openvino` writes it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from cli_helpers import run_cli
from infermeter.results.io import read_results
from infermeter.results.records import Int8Run, read_record

pytest.importorskip("openvino")
pytest.importorskip("nncf")

FAST = ["--warmup", "2", "--iterations", "20", "--min-time", "0", "--max-time", "5", "--target-ci", "0"]


@pytest.fixture(scope="module")
def irs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """tiny_cnn as an FP32 IR and as the INT8 IR NNCF makes of it (random calibration: a test model)."""
    import openvino as ov

    from infermeter.build.int8.ort_quant import QuantConfig
    from infermeter.build.int8.ov_quant import quantize_openvino
    from infermeter.models.convert import onnx_for
    from infermeter.models.resolve import resolve_model
    from infermeter.models.samples import random_samples

    folder = tmp_path_factory.mktemp("ir")
    spec = resolve_model("tiny_cnn")
    source = onnx_for(spec).path
    ov.save_model(ov.Core().read_model(str(source)), str(folder / "fp32.xml"), compress_to_fp16=False)
    quantize_openvino(source, folder / "int8.xml", QuantConfig(), random_samples(spec.inputs, 16, 1))
    return {"fp32": folder / "fp32.xml", "int8": folder / "int8.xml"}


def test_an_ir_resolves_to_its_own_kind_with_inputs_read_by_openvino(irs: dict[str, Path], tmp_path: Path) -> None:
    from infermeter.models.resolve import resolve_model

    spec = resolve_model(str(irs["int8"]))
    assert (spec.kind, spec.has_torch_form) == ("openvino_ir", False)
    assert [(i.name, i.dtype, i.shape) for i in spec.inputs] == [("input", "float32", ("batch", 3, 32, 32))]
    assert spec.output_names == ("logits",)
    # The identity covers the weights too: the same graph with other weights is another model.
    copy = tmp_path / "copy.xml"
    shutil.copy(irs["int8"], copy)
    shutil.copy(irs["int8"].with_suffix(".bin"), copy.with_suffix(".bin"))
    assert resolve_model(str(copy)).content_hash == spec.content_hash
    weights = bytearray(copy.with_suffix(".bin").read_bytes())
    weights[-1] ^= 0xFF
    copy.with_suffix(".bin").write_bytes(bytes(weights))
    assert resolve_model(str(copy)).content_hash != spec.content_hash


def test_a_missing_or_truncated_bin_is_one_clear_error(irs: dict[str, Path], tmp_path: Path) -> None:
    lonely = tmp_path / "lonely.xml"
    shutil.copy(irs["int8"], lonely)
    done = run_cli("bench", str(lonely), "-b", "openvino", *FAST)
    assert done.returncode == 2, done.stderr
    assert "lonely.bin is missing" in " ".join(done.stderr.split())
    assert done.stderr.count("error:") == 1 and "Traceback" not in done.stderr
    short = tmp_path / "short.xml"
    shutil.copy(irs["int8"], short)
    weights = irs["int8"].with_suffix(".bin").read_bytes()
    short.with_suffix(".bin").write_bytes(weights[: len(weights) // 2])
    done = run_cli("bench", str(short), "-b", "openvino", *FAST)
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert "OpenVINO could not read the IR" in message and "Incorrect weights in bin file" in message
    assert "core.cpp" not in message  # the engine's reason, not its source location


def test_bench_runs_an_ir_on_openvino_and_other_engines_say_why_not(irs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "ir.json"
    done = run_cli(
        "bench", str(irs["int8"]), "-b", "openvino,onnxruntime,torch", "--precision", "int8", *FAST,
        "--no-roofline", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cases = {c.backend: c for c in read_results(out).cases}
    openvino = cases["openvino"]
    assert openvino.status == "ok", openvino.error
    assert openvino.precision_effective == "int8"
    record = read_record(openvino, Int8Run)
    assert record is not None and record.quantizer == "given" and record.source == "given"
    assert record.mix is not None and record.mix.counts.get("int8", 0) >= 2
    assert cases["onnxruntime"].status == "unavailable"
    assert "OpenVINO IR" in (cases["onnxruntime"].error or "")
    assert cases["torch"].status == "unavailable" and "no PyTorch form" in (cases["torch"].error or "")


def test_parity_of_an_ir_against_openvino_fp32_and_against_the_float_model(irs: dict[str, Path]) -> None:
    done = run_cli("parity", str(irs["fp32"]), "-b", "openvino", "--samples", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reference openvino fp32" in done.stdout and "PASS" in done.stdout
    # The quantized IR against the PyTorch model it was made from, judged at int8's tolerance.
    done = run_cli(
        "parity", "tiny_cnn", "-b", "openvino", "--candidate-onnx", f"openvino={irs['int8']}",
        "--tolerance", "int8", "--samples", "2",
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert "reference torch fp32" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("│ openvino"))
    assert "int8" in row and ("PASS" in row or "FAIL" in row)


def test_inspect_reports_what_openvino_says_about_an_ir(irs: dict[str, Path]) -> None:
    done = run_cli("inspect", str(irs["int8"]), "--batch", "2", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["fake_quantize"] >= 2 and report["input_shapes"] == {"input": [2, 3, 32, 32]}
    assert report["mix"].get("int8", 0) >= 2
    assert {"i8", "f32"} <= set(report["weights"])
    assert any(row["layer"] == "Convolution" for row in report["runtime_layers"])


def test_serve_an_ir_with_openvino(irs: dict[str, Path]) -> None:
    from infermeter.serve.model import ServeConfig
    from infermeter.serve.protocol import encode_json_request
    from infermeter.serve.server import ServerThread

    server = ServerThread(ServeConfig(model=str(irs["int8"]), backend="openvino", threads=1, max_batch=4))
    url = server.start()
    try:
        x = np.random.default_rng(0).random((3, 3, 32, 32), dtype=np.float32)
        response = httpx.post(f"{url}/v2/models/int8/infer", content=encode_json_request({"input": x}), timeout=30)
        assert response.status_code == 200, response.text
        output = response.json()["outputs"][0]
        assert output["name"] == "logits" and output["shape"] == [3, 10]
    finally:
        server.stop()
