"""explain on real engines (ONNX Runtime, OpenVINO, torch eager, TorchScript) with tiny models built in code: the
planted expensive node ranks first on every engine, a fusion only one engine does is found, the alignment covers
the graph, and the record has the keys the JSON promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explain.builders import PLANTED, conv_bn_relu_model, planted_model
from infermeter.explain.output import write_record
from infermeter.explain.run import ExplainRequest, explain_model
from infermeter.results.explain import ExplainRecord

pytestmark = pytest.mark.slow
ITERATIONS = 8
TORCH_MODEL = """
import torch


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))) + 1


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(Block())
        self.fc = torch.nn.Linear(8 * 8 * 8, 16)

    def forward(self, x):
        return self.fc(torch.flatten(self.body(x), 1))


def make():
    return Net().eval(), (torch.randn(1, 3, 8, 8),)
"""

# A torch model with one planted expensive node: a [16, 512] x [512, 4096] Linear among small layers.
PLANTED_TORCH = """
import torch


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Linear(64, 512)
        self.act = torch.nn.ReLU()
        self.planted = torch.nn.Linear(512, 4096)
        self.gate = torch.nn.Sigmoid()
        self.head = torch.nn.Linear(4096, 8)

    def forward(self, x):
        return self.head(self.gate(self.planted(self.act(self.scale(x)))))


def make():
    return Net().eval(), (torch.randn(1, 64),)
"""


def _explain(model: Path | str, engines: str, **more: object) -> ExplainRecord:
    request = ExplainRequest(model=str(model), engines=tuple(engines.split(",")), threads=1, iterations=ITERATIONS)
    return explain_model(ExplainRequest(**{**request.__dict__, **more}))


def test_the_planted_node_ranks_first_on_every_engine(tmp_path: Path) -> None:
    record = _explain(planted_model(tmp_path / "planted.onnx"), "onnxruntime,openvino", batch=16)
    assert record.profiled_engines() == ["onnxruntime", "openvino"]
    for engine in record.profiled_engines():
        hottest = max(record.blocks, key=lambda b: b.time_us[engine])
        assert PLANTED in hottest.nodes, (engine, hottest)
        assert hottest.share[engine] > 0.3
        assert hottest.flops is not None and hottest.flops >= 2 * 16 * 512 * 2048
    for summary in record.engines:
        assert summary.coverage is not None and summary.coverage >= 0.95, summary


def test_a_fusion_only_one_engine_does_is_a_finding(tmp_path: Path) -> None:
    model = conv_bn_relu_model(tmp_path / "cbr.onnx")
    record = _explain(model, "onnxruntime,openvino", options=(("onnxruntime.opt_level", "disable"),))
    fusions = [f for f in record.findings if f.code == "fusion_one_engine"]
    assert any(f.engine == "openvino" and "onnxruntime runs 3 kernels" in f.text for f in fusions), record.findings
    block = next(b for b in record.blocks if "conv0" in b.nodes)
    assert {"conv0", "bn0", "relu0"} <= set(block.nodes)
    assert block.units["onnxruntime"] == 3 and block.units["openvino"] == 1
    for summary in record.engines:
        assert summary.coverage is not None and summary.coverage >= 0.95, summary


def test_the_record_has_the_promised_keys(tmp_path: Path) -> None:
    record = _explain(conv_bn_relu_model(tmp_path / "cbr.onnx", blocks=2), "onnxruntime,openvino")
    write_record(record, tmp_path / "explain.json")
    data = json.loads((tmp_path / "explain.json").read_text())
    for engine in ("onnxruntime", "openvino"):
        row = data["engines"][engine]
        assert {"p50_us", "attributed_us", "data_movement_us", "unattributed_us"} <= set(row)
        assert row["p50_us"] > 0 and row["attributed_us"] > 0
        assert row["unattributed_us"] == pytest.approx(row["p50_us"] - row["attributed_us"])
    nodes = [n for block in data["blocks"] for n in block["nodes"]]
    assert sorted(nodes) == sorted(["conv0", "bn0", "relu0", "conv1", "bn1", "relu1", "pool", "flatten"])
    for block in data["blocks"]:
        assert {"nodes", "op_types", "time_us", "kernels", "share"} <= set(block)
        assert set(block["time_us"]) == {"onnxruntime", "openvino"}
    assert all({"block", "engine", "code", "text"} <= set(f) for f in data["findings"])
    write_record(record, tmp_path / "explain.html")
    page = (tmp_path / "explain.html").read_text()
    assert 'id="chart-explain-blocks"' in page and 'id="explain-engines"' in page
    assert all(block.label in page for block in record.blocks)


def test_torch_eager_units_are_its_modules(tmp_path: Path) -> None:
    source = tmp_path / "net.py"
    source.write_text(TORCH_MODEL)
    record = _explain(f"{source}:make", "torch,onnxruntime")
    assert record.profiled_engines() == ["torch", "onnxruntime"]
    torch_row = next(e for e in record.engines if e.engine == "torch")
    assert torch_row.coverage is not None and torch_row.coverage >= 0.95
    linear = next(b for b in record.blocks if "Gemm" in b.op_types or "MatMul" in b.op_types)
    assert "Linear" in linear.kernels["torch"]


@pytest.mark.parametrize("optimize", ["on", "off"])
def test_torchscript_units_are_its_modules_and_the_planted_node_ranks_first(tmp_path: Path, optimize: str) -> None:
    source = tmp_path / "planted.py"
    source.write_text(PLANTED_TORCH)
    record = _explain(f"{source}:make", "torchscript,torch", batch=16, options=(("torchscript.optimize", optimize),))
    assert record.profiled_engines() == ["torchscript", "torch"]
    heaviest = max(record.blocks, key=lambda b: b.flops or 0)  # the planted Linear's Gemm (and what joins it)
    assert heaviest.flops is not None and heaviest.flops >= 2 * 16 * 512 * 4096
    for engine in record.profiled_engines():
        hottest = max(record.blocks, key=lambda b: b.time_us[engine])
        assert hottest is heaviest, (engine, hottest)
    torchscript = next(e for e in record.engines if e.engine == "torchscript")
    assert torchscript.coverage is not None and torchscript.coverage >= 0.95, torchscript
    assert "Linear" in heaviest.kernels["torchscript"] and "(torchscript)" in heaviest.kernels["torchscript"]
