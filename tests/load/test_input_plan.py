"""The input plan of `serve` + `load` (and quantize's calibration samples): free dims nobody set get a stated
default said in one line with its flag, a refusal only when the model fails on those inputs (naming the flag),
inputs sharing a symbolic dim sized together, control vectors carried, `load --reshape`, and the model's own
precision by default. Models are built in code (onnx_models.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx_models
import pytest
from serve_helpers import make_server, post_many, run_cli

from infermeter.build.int8.feeds import own
from infermeter.models.dim_defaults import IMAGE_SIDE, SEQUENCE_LENGTH, plan_shapes
from infermeter.models.inputs import InputSpec
from infermeter.models.resolve import resolve_model

TEXT = [
    InputSpec("input_ids", "int64", shape=("batch", "sequence")),
    InputSpec("attention_mask", "int64", shape=("batch", "sequence")),
]
QUICK = ("--scenario", "offline", "--concurrency", "2", "--duration", "0.3")


def test_free_dims_get_stated_defaults_said_in_one_line_with_the_flag() -> None:
    shapes, line = plan_shapes(TEXT, 2)
    assert shapes == {"input_ids": (2, SEQUENCE_LENGTH), "attention_mask": (2, SEQUENCE_LENGTH)}
    assert line is not None and "\n" not in line
    assert "input_ids [2, 128], attention_mask [2, 128]" in line and line.endswith("--input input_ids:2x128")
    # One input sized: the input sharing its symbolic dim follows, and nothing was sized by default.
    assert plan_shapes(TEXT, 1, [("input_ids", (1, 64))]) == ({"input_ids": (1, 64), "attention_mask": (1, 64)}, None)
    image = [
        InputSpec("pixels", "float32", shape=("batch", 3, "?", "?")),
        InputSpec("speed", "float32", shape=("batch", "k")),
    ]
    shapes, line = plan_shapes(image, 1)
    assert shapes == {"pixels": (1, 3, IMAGE_SIDE, IMAGE_SIDE), "speed": (1, 1)}
    assert line and "--input pixels:1x3x224x224" in line


def test_quantize_calibration_sizes_the_mask_from_input_ids(tmp_path: Path) -> None:
    spec = resolve_model(onnx_models.encoder(tmp_path / "encoder.onnx"))
    samples = own(spec.inputs, (("input_ids", (1, 64)),), ()).random(8, seed=0)
    assert {name: array.shape for name, array in samples.arrays.items()} == {
        "input_ids": (8, 64),
        "attention_mask": (8, 64),
    }


def test_load_sizes_the_mask_from_input_ids_and_says_what_it_defaulted(tmp_path: Path) -> None:
    model = onnx_models.encoder(tmp_path / "encoder.onnx")
    given = run_cli("load", model, "-b", "onnxruntime", "--input", "input_ids:1x64", *QUICK)
    assert given.returncode == 0, given.stderr
    assert "sized by default" not in given.stderr
    defaulted = run_cli("load", model, "-b", "onnxruntime", *QUICK)
    assert defaulted.returncode == 0, defaulted.stderr
    assert "input_ids [1, 128], attention_mask [1, 128]; change them with --input input_ids:1x128" in " ".join(
        defaulted.stderr.split()
    )


def test_a_model_that_fails_on_the_default_is_refused_naming_the_flag(tmp_path: Path) -> None:
    model = onnx_models.frames_of_fifty(tmp_path / "frames.onnx")
    refused = run_cli("load", model, "-b", "onnxruntime", *QUICK)
    assert refused.returncode != 0
    said = " ".join(refused.stderr.split())
    assert "http_500" in said and "Reshape" in said and "change them with --input x:1x1" in said
    fitted = run_cli("load", model, "-b", "onnxruntime", "--input", "x:1x100", *QUICK)
    assert fitted.returncode == 0, fitted.stderr


def test_a_control_vector_is_carried_and_never_concatenated(tmp_path: Path) -> None:
    model = onnx_models.controlled(tmp_path / "controlled.onnx")
    for extra in ((), ("--input", "scales=0.5,1,0.5")):
        out = tmp_path / "load.json"
        result = run_cli("load", model, "-b", "onnxruntime", "--input", "x:1x20", *extra, *QUICK, "-o", str(out))
        assert result.returncode == 0, result.stderr
        record = json.loads(out.read_text())["cases"][0]["load"]
        assert record["errors"] == {} and record["ok"] > 0
    # Requests with different control values, batched by the server at once: each gets its own scale.
    server = make_server(model, "onnxruntime", max_batch=8, max_delay_ms=50.0)
    url = server.start()
    try:
        bodies = []
        for scale in (1.0, 2.0, 1.0, 3.0):
            body = {
                "inputs": [
                    {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1.0, 2.0]},
                    {"name": "scales", "shape": [3], "datatype": "FP32", "data": [scale, 0.0, 0.0]},
                ]
            }
            bodies.append((json.dumps(body).encode(), {"Content-Type": "application/json"}))
        responses = post_many(f"{url}/v2/models/controlled/infer", bodies)
    finally:
        server.stop()
    assert [r.status_code for r in responses] == [200] * 4, [r.text for r in responses]
    outputs = [np.array(r.json()["outputs"][0]["data"]) for r in responses]
    for scale, output in zip((1.0, 2.0, 1.0, 3.0), outputs, strict=True):
        np.testing.assert_allclose(output, [scale, 2 * scale])


def test_load_reshapes_a_model_it_serves(tmp_path: Path) -> None:
    model = onnx_models.fixed_image(tmp_path / "fixed.onnx")
    out = tmp_path / "load.json"
    result = run_cli("load", model, "-b", "onnxruntime", "--reshape", "x:1x3x16x16", *QUICK, "-o", str(out))
    assert result.returncode == 0, result.stderr
    case = json.loads(out.read_text())["cases"][0]
    assert case["load"]["errors"] == {} and case["load"]["ok"] > 0
    declared = run_cli("load", model, "-b", "onnxruntime", *QUICK)  # the graph needs 16×16: refused as declared
    assert declared.returncode != 0 and "Reshape" in declared.stderr
    url = run_cli("load", "http://127.0.0.1:1", "--reshape", "x:1x3x16x16", "--scenario", "offline")
    assert url.returncode == 2 and "--reshape rewrites a MODEL served here" in url.stderr
    bad = run_cli("load", model, "-b", "onnxruntime", "--reshape", "x:1xq")
    assert bad.returncode == 2 and "--reshape" in bad.stderr


@pytest.mark.parametrize(("builder", "precision"), [(onnx_models.quantized, "int8"), (onnx_models.encoder, "fp32")])
def test_serve_and_load_default_to_the_models_own_precision(tmp_path: Path, builder: object, precision: str) -> None:
    model = builder(tmp_path / "m.onnx")  # type: ignore[operator]
    out = tmp_path / "load.json"
    result = run_cli("load", model, "-b", "onnxruntime", *QUICK, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["cases"][0]["precision"] == precision


def test_bench_sizes_free_dims_by_their_stated_default(tmp_path: Path) -> None:
    from infermeter.measure.request import BenchRequest, build_matrix

    model = onnx_models.encoder(tmp_path / "encoder.onnx")
    notes: list[str] = []
    matrix = build_matrix(BenchRequest(models=(model,), backends=("onnxruntime",), batch=(1,)), notes.append)
    assert dict(matrix.input_shapes) == {"input_ids": (1, SEQUENCE_LENGTH), "attention_mask": (1, SEQUENCE_LENGTH)}
    assert any("--input input_ids:1x128" in note for note in notes)
    given = build_matrix(
        BenchRequest(models=(model,), backends=("onnxruntime",), batch=(1,), inputs=(("input_ids", (1, 32)),)),
        notes.append,
    )
    assert dict(given.input_shapes) == {"input_ids": (1, 32)}  # the mask follows it by its shared dim, at run time


def test_inspect_and_parity_size_free_dims_by_their_stated_default(tmp_path: Path) -> None:
    from infermeter.graph.loaded import load_graph

    model = onnx_models.encoder(tmp_path / "encoder.onnx")
    graph = load_graph(model)
    assert graph.input_shapes == {"input_ids": (1, SEQUENCE_LENGTH), "attention_mask": (1, SEQUENCE_LENGTH)}
    assert any("change them with --input input_ids:1x128" in note for note in graph.notes)
    parity = run_cli("parity", model, "-b", "onnxruntime")
    assert parity.returncode == 0, parity.stderr
    assert "change them with --input input_ids:1x128" in " ".join(parity.stderr.split())
