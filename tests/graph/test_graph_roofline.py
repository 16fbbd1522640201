"""annotate_roofline: FLOPs per case from the graph, achieved GFLOP/s at the median, the fraction of the ceiling
for the case's effective precision, and a note when a case beats its ceiling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import helper

from crafted_results import make_case, make_results
from graph.onnx_builders import make_model, weight
from infermeter.graph.flops import graph_cost
from infermeter.graph.loaded import load_graph
from infermeter.graph.roofline import annotate_roofline, ceiling_key

PEAK: dict[str, Any] = {
    "fp32_gflops": 100.0,
    "bf16_gflops": 400.0,
    "fp16_gflops": None,
    "int8_gops": 800.0,
    "bandwidth_gbs": 20.0,
    "engines": {"fp32": "torch"},
    "threads": 4,
    "device": "cpu",
    "probes": [{"engine": "torch", "precision": "fp32", "best": 100.0}],
}


@pytest.fixture
def conv_model(tmp_path: Path) -> str:
    node = helper.make_node("Conv", ["input", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    model = make_model([node], {"input": ("batch", 3, 32, 32)}, ["y"], [weight("w", (16, 3, 3, 3))])
    path = tmp_path / "conv.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_cases_get_flops_achieved_and_fraction_of_their_precision(conv_model: str) -> None:
    fp32 = make_case("onnxruntime", batch=2, p50_ms=0.5, model=conv_model, sigma=0.0)
    int8 = make_case("openvino", batch=2, p50_ms=0.25, model=conv_model, precision="int8", sigma=0.0)
    failed = make_case("torch", model=conv_model, status="failed", error="boom")
    results = make_results([fp32, int8, failed])
    annotate_roofline(results, PEAK)

    cost = graph_cost(load_graph(conv_model, batch=2).view)
    assert fp32.extra["flops"] == cost.flops == 2 * (2 * 16 * 32 * 32 * 27)
    assert fp32.latency_ms is not None
    achieved = cost.flops / (fp32.latency_ms.p50 / 1000) / 1e9
    assert fp32.extra["achieved_gflops"] == pytest.approx(achieved)
    assert fp32.extra["arithmetic_intensity"] == pytest.approx(cost.flops / cost.bytes_moved)
    assert fp32.extra["peak_fraction"] == pytest.approx(achieved / 100.0)
    assert fp32.extra["peak_precision"] == "fp32_gflops"
    assert fp32.extra["attainable_gflops"] == pytest.approx(min(100.0, fp32.extra["arithmetic_intensity"] * 20.0))
    assert int8.extra["peak_precision"] == "int8_gops"
    assert int8.extra["peak_fraction"] == pytest.approx(int8.extra["achieved_gflops"] / 800.0)
    assert "flops" not in failed.extra
    assert results.extra["peak"]["fp32_gflops"] == 100.0 and "probes" not in results.extra["peak"]
    assert not any("exceeds" in note for note in fp32.notes)


def test_a_case_faster_than_its_ceiling_is_flagged(conv_model: str) -> None:
    case = make_case("onnxruntime", batch=1, p50_ms=0.001, model=conv_model, sigma=0.0, threads=8)
    annotate_roofline(make_results([case]), {**PEAK, "fp32_gflops": 1.0})
    assert case.extra["peak_exceeded"] is True and case.extra["peak_fraction"] > 1
    assert any("ceiling is wrong" in note for note in case.notes)
    assert any("measured with 4 threads, this case used 8" in note for note in case.notes)


def test_unanalysable_model_records_why_and_others_go_on(conv_model: str) -> None:
    missing = make_case("onnxruntime", model="/nonexistent/model.onnx")
    good = make_case("onnxruntime", batch=1, model=conv_model)
    annotate_roofline(make_results([missing, good]), PEAK)
    assert "does not exist" in missing.extra["roofline_error"]
    assert good.extra["flops"] > 0


def test_missing_ceiling_gives_no_fraction(conv_model: str) -> None:
    case = make_case("torch", model=conv_model, precision="fp16")
    annotate_roofline(make_results([case]), PEAK)
    assert case.extra["peak_fraction"] is None and case.extra["achieved_gflops"] > 0


@pytest.mark.parametrize(
    ("precision", "key"),
    [
        ("fp32", "fp32_gflops"),
        ("bf16", "bf16_gflops"),
        ("int8", "int8_gops"),
        ("int8/fp32", "int8_gops"),
        (None, "fp32_gflops"),
    ],
)
def test_ceiling_key(precision: str | None, key: str) -> None:
    assert ceiling_key(precision) == key
