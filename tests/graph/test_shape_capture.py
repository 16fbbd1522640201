"""FLOPs for every node, or say which are missing: a MatMul after a Reshape whose target shape is computed by ops
ONNX shape inference does not follow gets its shapes from ONNX Runtime's symbolic inference or from one real
ONNX Runtime run; when neither can, `inspect` and the roofline name the uncounted nodes and mark lower bounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx
import pytest

from cli_helpers import run_cli
from graph.onnx_builders import BATCH, TARGET_DIM, reshape_matmul
from infermeter.graph.analysis import inspect_model
from infermeter.graph.flops import graph_cost
from infermeter.graph.loaded import load_graph

pytest.importorskip("onnxruntime")

MATMUL_MACS = BATCH * 4 * 4 * 32  # y is [N, 4, 4], each element a sum over K = 32


def _matmul(loaded_path: str) -> Any:
    cost = graph_cost(load_graph(loaded_path, batch=BATCH).view)
    return next(node for node in cost.nodes if node.op_type == "MatMul"), cost


@pytest.mark.parametrize("route", ["symbolic", "run"])
def test_onnx_inference_alone_leaves_the_matmul_unknown(tmp_path: Path, route: str) -> None:
    """The premise: static inference (with data propagation) cannot shape the Reshape's output."""
    model = onnx.load(reshape_matmul(tmp_path / "m.onnx", TARGET_DIM[route]))
    for axis, size in enumerate((BATCH, 8, 16)):
        model.graph.input[0].type.tensor_type.shape.dim[axis].dim_value = size
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    shapes = {v.name: v.type.tensor_type.shape.dim for v in inferred.graph.value_info}
    assert any(not d.HasField("dim_value") for d in shapes["r"])


@pytest.mark.parametrize(("route", "note"), [("symbolic", "symbolic shape inference"), ("run", "ONNX Runtime run")])
def test_matmul_is_counted_after_recovery(tmp_path: Path, route: str, note: str) -> None:
    path = reshape_matmul(tmp_path / "m.onnx", TARGET_DIM[route])
    matmul, cost = _matmul(path)
    assert matmul.counted and matmul.macs == MATMUL_MACS
    assert not cost.lower_bound and cost.uncounted_ops() == {}
    assert any(note in text for text in load_graph(path, batch=BATCH).notes)


def test_unrecoverable_nodes_are_named_and_totals_are_lower_bounds(tmp_path: Path, monkeypatch: Any) -> None:
    path = reshape_matmul(tmp_path / "mystery.onnx", TARGET_DIM["run"], mystery=True)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # the user's folder: a failed recovery must leave nothing in it
    matmul, cost = _matmul(path)
    assert not matmul.counted and matmul.macs == 0
    # The Reshape's output is unknown too: no recovery ran (the unknown op stops both).
    assert cost.lower_bound and cost.uncounted_ops() == {"Reshape": 1, "Mystery": 1, "MatMul": 1}
    report = inspect_model(path, BATCH, ort_levels=False)
    assert report["totals"]["lower_bound"] is True
    assert report["uncounted"] == {"nodes": 3, "ops": {"Reshape": 1, "Mystery": 1, "MatMul": 1}}
    assert any("3 nodes uncounted (Reshape ×1, Mystery ×1, MatMul ×1)" in note for note in report["notes"])
    assert any("could not be captured" in text and "Mystery" in text for text in report["notes"])
    assert not list(cwd.iterdir())  # no sym_shape_infer_temp.onnx from ONNX Runtime's incomplete inference

    done = run_cli("inspect", path, "--batch", str(BATCH), "--no-ort")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert (
        "MACs ≥" in text and "uncounted: 3 nodes whose shapes stay unknown (Reshape ×1, Mystery ×1, MatMul ×1)" in text
    )
    as_json = json.loads(run_cli("inspect", path, "--batch", str(BATCH), "--no-ort", "--json").stdout)
    assert [n["counted"] for n in as_json["nodes"] if n["op"] in ("Mystery", "MatMul")] == [False, False]
