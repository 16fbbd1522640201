"""Engines' own warnings become findings: captured in the worker, deduplicated and counted, one line each under
the bench table, the full texts kept in the results file."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from infermeter.backends.engine_log import Capture, attach_engine_log, capture_engine_log, engine_log
from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model
from infermeter.report.summary import summary_table
from infermeter.results.records import EngineLog, read_record
from infermeter.results.schema import CaseResult, case_from_dict, case_to_dict

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
UNUSED = 150


def noisy_model(folder: Path) -> Path:
    """A Relu whose file carries UNUSED initializers no node reads: ONNX Runtime warns once for each."""
    from onnx import TensorProto, helper, numpy_helper

    unused = [numpy_helper.from_array(np.full((2,), i, np.float32), f"unused_{i}") for i in range(UNUSED)]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "noisy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        unused,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    path = folder / "noisy.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("cache", ["on", "off"])  # on: ORT warns while the build stage optimizes the graph
def test_many_ort_warnings_become_one_line_with_its_count(tmp_path: Path, cache: str, own_compile_cache: Path) -> None:
    spec = resolve_model(str(noisy_model(tmp_path)))
    settings = MeasureSettings(warmup_iterations=2, min_iterations=10, min_time_s=0.05, max_time_s=2.0)
    case = Case(
        spec.ref,
        "onnxruntime",
        precision="fp32",
        batch=1,
        shape_mode="static",
        threads=1,
        options=(("cache", cache),),
        settings=settings,
    )
    result = execute_case(spec, case)
    assert result.status == "ok", result.error
    log = read_record(result, EngineLog)
    assert log is not None
    removing = [w for w in log.warnings if "Removing initializer" in w.message]
    assert len(removing) == 1 and removing[0].count == UNUSED and removing[0].engine == "onnxruntime"
    assert "'…'" in removing[0].message and removing[0].remedy
    assert {t.split("'")[1] for t in removing[0].texts} == {f"unused_{i}" for i in range(UNUSED)}  # full texts
    lines = [n for n in summary_table([result]).footnotes if "Removing initializer" in n]
    assert lines == [f"engine warning: {removing[0].line()}"] and f"×{UNUSED}" in lines[0]
    assert read_record(case_from_dict(case_to_dict(result)), EngineLog) == log
    assert not any("Serializing optimized model" in w.message for w in log.warnings)  # our own doing, dropped


def test_python_warnings_are_captured_and_an_unoptimized_part_is_an_engine_warning() -> None:
    with capture_engine_log() as capture:
        for _ in range(3):
            warnings.warn("subgraph 12 could not be optimized and falls back", UserWarning, stacklevel=1)
    log = engine_log(capture)
    assert [(w.engine, w.count, w.unoptimized) for w in log.warnings] == [("python", 3, True)]
    result = CaseResult(
        "c",
        "m",
        backend="b",
        backend_version=None,
        device="cpu",
        batch=1,
        shape_mode="static",
        precision="fp32",
        precision_effective="fp32",
        threads=1,
        status="ok",
    )
    attach_engine_log(result, capture)
    assert [w.code for w in result.warnings] == ["engine_warning"]


def test_a_failed_load_keeps_the_engines_last_lines() -> None:
    capture = Capture(lines=["2026-01-01 [E:onnxruntime:, session.cc:12 Load] bad node Foo", "abort"])
    result = CaseResult(
        "c",
        "m",
        backend="b",
        backend_version=None,
        device="cpu",
        batch=1,
        shape_mode="static",
        precision="fp32",
        precision_effective=None,
        threads=1,
        status="failed",
        error="load failed",
    )
    attach_engine_log(result, capture)
    assert result.error is not None and "bad node Foo" in result.error and result.error.endswith("abort)")


def test_compare_names_an_engine_warning_next_to_the_figure() -> None:
    from crafted_results import make_case, make_results
    from infermeter.compare.verdict import compare_results
    from infermeter.results.schema import CaseWarning

    base, new = make_case("onnxruntime", 1, 10.0), make_case("onnxruntime", 1, 10.0)
    new.warnings.append(CaseWarning("engine_warning", "onnxruntime: could not fuse Attention", "onnxruntime ×2"))
    comparison = compare_results(make_results([base]), make_results([new]))
    (change,) = comparison.changes
    assert "engine warning (new): onnxruntime ×2" in change.notes
    assert comparison.remarks == [f"{change.label} (new): onnxruntime: could not fuse Attention"]
