"""`quantize_on_the_fly` (for `bench --precision int8`) and the digits end-to-end case (real data)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from quant_models import mlp, mlp_data

from infermeter.backends.onnxruntime import onnx_graph_precision
from infermeter.case import Case
from infermeter.models.spec import resolve_model
from infermeter.quantize.onthefly import RandomCalibrationWarning, quantize_on_the_fly


def test_on_the_fly_random_calibration_warns_and_caches(tmp_path: Path) -> None:
    spec = resolve_model(str(mlp(tmp_path / "mlp.onnx")))
    case = Case(spec.ref, "onnxruntime", "int8")
    with pytest.warns(RandomCalibrationWarning, match="random inputs"):
        first = quantize_on_the_fly(spec, case)
    assert onnx_graph_precision(str(first)) == "int8"
    calib = mlp_data(tmp_path / "calib.npz", Path(spec.ref), 50, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RandomCalibrationWarning)  # real data given: no warning
        second = quantize_on_the_fly(
            spec, Case(spec.ref, "onnxruntime", "int8", options=(("quantize.calib", str(calib)),))
        )
    assert second != first and onnx_graph_precision(str(second)) == "int8"
    with pytest.warns(RandomCalibrationWarning):
        assert quantize_on_the_fly(spec, case) == first  # cached by content


@pytest.mark.slow
def test_digits_end_to_end_with_qat(tmp_path: Path) -> None:
    from infermeter.quantize import digits
    from infermeter.quantize.pipeline import QuantizeRequest, quantize_model

    model, train, test, torch_top1 = digits.write_case(tmp_path, epochs=10)
    assert torch_top1 > 0.85  # real digits, 10 epochs: far above the 0.1 of chance
    outcome = quantize_model(
        QuantizeRequest(str(model), tmp_path / "d.int8.onnx", calib=str(train), eval=str(test), latency=False)
    )
    fp32, int8 = (row.accuracy for row in outcome.rows)
    assert fp32 is not None and int8 is not None and int8.metric == "top1" and int8.eval_samples == 540
    assert fp32.value == pytest.approx(torch_top1, abs=0.01)
    assert int8.drop_pct < 3.0
    assert "small_calibration_set" not in [w.code for w in outcome.warnings]


@pytest.mark.slow
def test_qat_row(tmp_path: Path) -> None:
    import numpy as np

    from infermeter.models.inputs import InputSpec
    from infermeter.quantize import digits, qat
    from infermeter.quantize.data import SampleSet

    data = digits.load_split()
    model = digits.train(data, epochs=2)
    before = digits.accuracy(model, data.x_test, data.y_test)
    train = SampleSet({"input": data.x_train}, data.y_train, "train")
    tuned = qat.finetune(model, (InputSpec("input", "float32", ("batch", 1, 8, 8)),), train, train.head(200), epochs=1)
    after = digits.accuracy(tuned, data.x_test, data.y_test)
    assert not any("parametrizations" in name for name, _ in tuned.named_parameters())  # fake quant removed
    assert after > before - 0.05 and np.isfinite(after)
