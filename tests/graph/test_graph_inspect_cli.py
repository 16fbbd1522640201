"""`infermeter inspect` end to end, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import helper

from cli_helpers import run_cli
from graph.onnx_builders import make_model, weight


@pytest.fixture
def conv_relu(tmp_path: Path) -> str:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["y"], name="pool"),
    ]
    path = tmp_path / "conv_relu.onnx"
    onnx.save(make_model(nodes, {"x": ("N", 3, 16, 16)}, ["y"], [weight("w", (8, 3, 3, 3))]), str(path))
    return str(path)


def test_inspect_json_report(conv_relu: str) -> None:
    proc = run_cli("inspect", conv_relu, "--batch", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["input_shapes"] == {"x": [4, 3, 16, 16]}
    assert report["op_histogram"] == {"Conv": 1, "Relu": 1, "GlobalAveragePool": 1}
    assert report["totals"]["macs"] == 4 * 8 * 16 * 16 * 27
    assert report["parameters"] == {"count": 8 * 27, "bytes": 8 * 27 * 4, "bytes_by_dtype": {"float32": 864}}
    assert [n["name"] for n in report["nodes"]] == ["conv", "relu", "pool"]
    assert report["memory"]["peak_node"]["name"] in ("conv", "relu")
    assert report["memory"]["planned_bytes"] <= report["memory"]["naive_bytes"]
    assert report["fusion"]["patterns"]["conv_chain"]["chains"] == {"Conv→Relu": 1}
    levels = {lv["level"]: lv["node_count"] for lv in report["onnxruntime_optimizer"]["levels"]}
    assert levels["disable"] == 3 and levels["extended"] == 2  # Conv+Relu -> FusedConv


def test_inspect_table_and_bad_input(conv_relu: str) -> None:
    proc = run_cli("inspect", conv_relu, "--input", "x:2x3x16x16", "--no-ort")
    assert proc.returncode == 0, proc.stderr
    assert "activation memory" in proc.stdout and "peak at" in proc.stdout and "Conv→Relu" in proc.stdout
    for args, message in (
        (("inspect", conv_relu, "--batch", "0"), "--batch 0 must be positive"),
        (("inspect", conv_relu, "--input", "y:1x2"), "--input names 'y', not an input of the model"),
        (("inspect", "no_such_model"), "unknown model"),
    ):
        bad = run_cli(*args)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_inspect_zoo_model() -> None:
    proc = run_cli("inspect", "tiny_cnn", "--json", "--no-ort")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["input_shapes"] == {"input": [1, 3, 32, 32]} and report["totals"]["macs"] > 0
