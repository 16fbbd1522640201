"""`quantize` and `optimize` choose their INT8 study's calibration and evaluation data through one function
(`quantize.study_data.choose_study_data`): the same flags give the same sets, notes and warnings in both."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from quant_models import mlp, mlp_data

from infermeter.build.int8.ort_quant import QuantConfig
from infermeter.models.resolve import resolve_model
from infermeter.optimize import accuracy as optimize_accuracy
from infermeter.optimize.request import OptimizeRequest
from infermeter.quantize import pipeline as quantize_pipeline
from infermeter.quantize.request import QuantizeRequest
from infermeter.quantize.study_data import RANDOM_EVAL_SAMPLES, StudyData


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    model = mlp(tmp_path / "mlp.onnx")
    return model, mlp_data(tmp_path / "calib.npz", model, 40, 1), mlp_data(tmp_path / "eval.npz", model, 90, 2)


def _same_sets(a: StudyData, b: StudyData) -> None:
    assert (a.calib is None) == (b.calib is None)
    pairs = [(a.evaluation, b.evaluation)] + ([(a.calib, b.calib)] if a.calib and b.calib else [])
    for ours, theirs in pairs:
        assert ours.source == theirs.source and ours.arrays.keys() == theirs.arrays.keys()
        for name, array in ours.arrays.items():
            np.testing.assert_array_equal(array, theirs.arrays[name])
        assert (ours.labels is None) == (theirs.labels is None)
        if ours.labels is not None and theirs.labels is not None:
            np.testing.assert_array_equal(ours.labels, theirs.labels)


@pytest.mark.parametrize(
    "which",
    [
        {},
        {"calib": True},
        {"eval": True},
        {"calib": True, "eval": True},
        {"calib": True, "eval": True, "eval_size": 50, "calib_size": 30, "seed": 7},
    ],
    ids=["none", "calib", "eval", "calib+eval", "bounded"],
)
def test_quantize_and_optimize_choose_the_same_data(files: tuple[Path, Path, Path], which: dict[str, object]) -> None:
    model, calib, evaluation = files
    flags: dict[str, object] = {
        "calib": str(calib) if which.get("calib") else None,
        "eval": str(evaluation) if which.get("eval") else None,
        **{k: v for k, v in which.items() if k in ("eval_size", "calib_size", "seed")},
    }
    spec = resolve_model(str(model))
    quantized = quantize_pipeline.study_data(QuantizeRequest(str(model), Path("q.onnx"), **flags), spec)  # type: ignore[arg-type]
    optimized = optimize_accuracy.study_data(OptimizeRequest(str(model), Path("out"), **flags), spec)  # type: ignore[arg-type]
    assert quantize_pipeline.choose_study_data is optimize_accuracy.choose_study_data
    _same_sets(quantized, optimized)
    assert quantized.notes == optimized.notes and quantized.warnings == optimized.warnings
    assert quantized.notes[-1].startswith("evaluation data: ")
    if "eval_size" in which:  # the data held 90 samples: the first 50 are scored, and the note says so
        assert quantized.evaluation.count == 50 and quantized.calib is not None and quantized.calib.count == 30
        assert "the first 50 samples, the evaluation size, from" in quantized.notes[-1]
    # Static quantization without --calib calibrates on generated inputs, with the warning, in both commands.
    assert quantized.calibrated_on_random == (not which.get("calib"))
    if not which:
        assert quantized.evaluation.count == RANDOM_EVAL_SAMPLES
        assert any("random inputs" in note for note in quantized.notes)
    if which.get("calib"):
        assert "small_calibration_set" in [w.code for w in quantized.warnings]  # 40 samples, fewer than 100


def test_dynamic_quantization_generates_no_calibration(files: tuple[Path, Path, Path]) -> None:
    model, calib, _ = files
    spec = resolve_model(str(model))
    dynamic = QuantConfig(mode="dynamic")
    bare = quantize_pipeline.study_data(QuantizeRequest(str(model), Path("q.onnx"), config=dynamic), spec)
    assert bare.calib is None and bare.warnings == ()  # ranges are taken at run time: nothing to calibrate on
    given = quantize_pipeline.study_data(
        QuantizeRequest(str(model), Path("q.onnx"), config=dynamic, calib=str(calib)), spec
    )
    assert given.calib is not None and given.evaluation is given.calib
    assert "--calib is not used by dynamic quantization" in given.notes[0]


def test_an_eval_set_within_the_bound_is_not_called_cut(files: tuple[Path, Path, Path]) -> None:
    model, _, evaluation = files
    spec = resolve_model(str(model))
    exact = quantize_pipeline.study_data(
        QuantizeRequest(str(model), Path("q.onnx"), eval=str(evaluation), eval_size=90), spec
    )
    assert exact.evaluation.count == 90 and "evaluation size" not in exact.notes[-1]
