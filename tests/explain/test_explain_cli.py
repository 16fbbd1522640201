"""`infermeter explain` on bad input: an engine without a per-unit profile keeps its row (exit 0 with two others
profiled), fewer than two profiled engines exit 2 naming the engines that can (the record still written), unnamed
nodes are named and the run says so, and one engine is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explain.builders import conv_bn_relu_model
from infermeter.cli import app as cli_app

pytestmark = pytest.mark.slow


def _main(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        cli_app.main(["explain", *args, "--threads", "1", "--profile-iterations", "5"])
    return int(exit_info.value.code or 0)


def test_an_engine_without_profile_keeps_its_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = conv_bn_relu_model(tmp_path / "m.onnx", blocks=1)
    out = tmp_path / "explain.json"
    assert _main(str(model), "-b", "onnxruntime,openvino,null", "-o", str(out)) == 0
    assert "null gives no per-unit profile here: end-to-end time only" in capsys.readouterr().out
    row = json.loads(out.read_text())["engines"]["null"]
    assert row["p50_us"] > 0 and row["profiled"] is False and row["attributed_us"] is None


def test_fewer_than_two_profiles_exit_2_and_keep_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = conv_bn_relu_model(tmp_path / "m.onnx", blocks=1)
    out = tmp_path / "explain.json"
    assert _main(str(model), "-b", "onnxruntime,torch", "-o", str(out)) == 2
    captured = capsys.readouterr()
    assert "torch has no module map for a model given as ONNX" in captured.out
    assert "profiled: onnxruntime. Engines that profile here:" in captured.err
    named = captured.err.split("Engines that profile here:")[1].split("(")[0]
    assert {"onnxruntime", "openvino", "torch"} <= {word.strip(" ,") for word in named.split()}
    data = json.loads(out.read_text())
    assert data["engines"]["onnxruntime"]["profiled"] is True
    assert "no module map" in data["engines"]["torch"]["error"]


def test_unnamed_nodes_are_named_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = conv_bn_relu_model(tmp_path / "m.onnx", blocks=1, named=False)
    out = tmp_path / "explain.json"
    assert _main(str(model), "-b", "onnxruntime,openvino", "-o", str(out)) == 0
    assert "5 unnamed nodes were named <OpType>_<index>" in capsys.readouterr().out
    nodes = {n for block in json.loads(out.read_text())["blocks"] for n in block["nodes"]}
    assert nodes == {"Conv_0", "BatchNormalization_1", "Relu_2", "GlobalAveragePool_3", "Flatten_4"}


def test_one_engine_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(str(conv_bn_relu_model(tmp_path / "m.onnx", blocks=1)), "-b", "onnxruntime") == 2
    assert "give at least two with -b" in capsys.readouterr().err
