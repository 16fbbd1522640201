"""`serve` and `load` with real inputs: constants a request may leave out (`--input NAME=VALUE`), and `--data`
samples for the server's warm-up and the load generator's requests, on 127.0.0.1 with ONNX Runtime."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "measure"))

from real_input_models import branch_model, lookup_model
from serve_helpers import run_cli

from infermeter.load.target import prepare_target
from infermeter.results.io import read_results
from infermeter.serve.protocol import encode_json_request

pytest.importorskip("onnxruntime")


def test_a_served_constant_is_filled_in_and_advertised(serve: Any, tmp_path: Path) -> None:
    model = branch_model(tmp_path / "branch.onnx")
    url = serve(model, "onnxruntime", input_values=(("sr", "16000"),))
    meta = httpx.get(f"{url}/v2/models/branch").json()
    assert meta["parameters"]["constant_inputs"] == {"sr": "16000"}
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    response = httpx.post(f"{url}/v2/models/branch/infer", content=encode_json_request({"x": x}))
    assert response.status_code == 200, response.text
    assert response.json()["outputs"][0]["data"] == (2 * x).ravel().tolist()
    # The load generator leaves out what the server fills in: its requests carry x alone.
    target = prepare_target(url, batch=3)
    assert all(b'"name":"sr"' not in request.replace(b" ", b"") for request in target.requests)


def test_load_sends_data_samples_to_a_server_warmed_up_on_them(tmp_path: Path) -> None:
    model = lookup_model(tmp_path / "lookup.onnx")
    np.savez(tmp_path / "three.npz", idx=np.array([[0], [5], [9]], dtype=np.int64))
    out = tmp_path / "load.json"
    result = run_cli(
        "load", model, "-b", "onnxruntime", "--data", str(tmp_path / "three.npz"), "--batch", "2",
        "--scenario", "offline", "--concurrency", "2", "--duration", "1", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "samples are reused" in " ".join(result.stderr.split())
    case = read_results(out).cases[0]
    # Generated indices (0..99) would fall outside the 10-row table: every request ran, so each carried data.
    assert case.status == "ok" and case.extra["load"]["errors"] == {}
    assert "three.npz (3 samples" in case.options["load.data"]
    assert "three.npz (3 samples" in case.options["serve.data"]
