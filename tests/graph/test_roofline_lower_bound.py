"""The roofline of a model with nodes whose shapes no recovery found: `% peak` and GFLOP/s are marked as lower
bounds (`≥`) in the summary table, the record says how many nodes are uncounted, and the case's notes say why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crafted_results import make_case, make_results
from graph.onnx_builders import BATCH, TARGET_DIM, reshape_matmul
from infermeter.graph.roofline import annotate_roofline
from infermeter.report.summary import summary_table

pytest.importorskip("onnxruntime")

PEAK: dict[str, Any] = {"fp32_gflops": 100.0, "bandwidth_gbs": 20.0, "threads": 4, "device": "cpu"}


def test_roofline_marks_percent_of_peak_as_a_lower_bound(tmp_path: Path) -> None:
    partial = reshape_matmul(tmp_path / "mystery.onnx", TARGET_DIM["run"], mystery=True)
    whole = reshape_matmul(tmp_path / "whole.onnx", TARGET_DIM["run"])
    cases = [make_case("onnxruntime", batch=BATCH, p50_ms=0.01, model=m, sigma=0.0) for m in (partial, whole)]
    for case in cases:
        case.shapes.input_shapes = {"x": [BATCH, 8, 16]}
    annotate_roofline(make_results(cases), PEAK)
    assert cases[0].extra["uncounted_nodes"] == 3 and "uncounted_nodes" not in cases[1].extra
    assert any("lower bounds" in note for note in cases[0].notes)
    table = summary_table(cases)
    peak_cells = [row[table.columns.index("% peak")] for row in table.rows]
    assert peak_cells[0].startswith("≥") and not peak_cells[1].startswith("≥"), peak_cells
