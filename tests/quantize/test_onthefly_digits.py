"""`quantize_on_the_fly` (for `bench --precision int8`) and the digits end-to-end case (real data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from quant_models import mlp, mlp_data

from infermeter.build.int8.onthefly import quantize_on_the_fly
from infermeter.core.case import Case
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import onnx_graph_precision


def test_on_the_fly_random_calibration_warns_and_caches(tmp_path: Path) -> None:
    spec = resolve_model(str(mlp(tmp_path / "mlp.onnx")))
    case = Case(spec.ref, "onnxruntime", precision="int8")
    first = quantize_on_the_fly(spec, case)
    assert [w.code for w in first.warnings] == ["random_calibration"]
    assert "32 random inputs" in first.warnings[0].message and "quantize.calib=DATA" in first.warnings[0].message
    assert onnx_graph_precision(str(first.path)) == "int8"
    calib = mlp_data(tmp_path / "calib.npz", Path(spec.ref), 50, 1)
    second = quantize_on_the_fly(
        spec, Case(spec.ref, "onnxruntime", precision="int8", options=(("quantize.calib", str(calib)),))
    )
    assert second.warnings == ()  # real data given: no warning
    assert second.path != first.path and onnx_graph_precision(str(second.path)) == "int8"
    assert quantize_on_the_fly(spec, case) == first  # cached by content, warned again


def test_quantize_on_the_fly_does_not_import_the_measurement_package() -> None:
    """case_build.py (run by measure) imports onthefly: onthefly reaching measure, or the INT8 study in quantize/
    that runs in measure's workers (it once did, through quantize.pipeline and quantize.latency), is an import
    circle."""
    import inspect
    import subprocess
    import sys

    from infermeter.build.int8 import onthefly

    code = (
        "import sys, infermeter.build.int8.onthefly as m; print(sorted(n for n in sys.modules if 'measure' in n "
        "or n == 'infermeter.quantize' or n.startswith('infermeter.quantize.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    source = inspect.getsource(onthefly)
    assert "infermeter.measure" not in source and "infermeter.quantize." not in source


@pytest.mark.slow
def test_digits_end_to_end_with_qat(tmp_path: Path) -> None:
    from infermeter.quantize import digits
    from infermeter.quantize.pipeline import quantize_model
    from infermeter.quantize.request import QuantizeRequest

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
    from infermeter.models.samples import SampleSet
    from infermeter.quantize import digits, qat

    data = digits.load_split()
    model = digits.train(data, epochs=2)
    before = digits.accuracy(model, data.x_test, data.y_test)
    train = SampleSet({"input": data.x_train}, data.y_train, "train")
    tuned = qat.finetune(
        model, (InputSpec("input", "float32", shape=("batch", 1, 8, 8)),), train, train.head(200), epochs=1
    )
    after = digits.accuracy(tuned, data.x_test, data.y_test)
    assert not any("parametrizations" in name for name, _ in tuned.named_parameters())  # fake quant removed
    assert after > before - 0.05 and np.isfinite(after)
