"""TorchScript backend: trace + freeze + optimize_for_inference agree with eager; precision read back."""

from __future__ import annotations

import numpy as np
import pytest

from backend_helpers import feeds_for, outputs_of, torch_reference
from infermeter.backends.torchscript import TorchScriptBackend
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model
from infermeter.results.env import cpu_isa

pytest.importorskip("torch")


def test_fp32_outputs_match_torch(tiny_cnn, make_case):
    case = make_case("torchscript")
    feeds = feeds_for(tiny_cnn, case)
    np.testing.assert_allclose(
        outputs_of(tiny_cnn, case, feeds)[0], torch_reference(tiny_cnn, case, feeds)[0], rtol=1e-4, atol=1e-5
    )


def test_load_phases_and_precision(tiny_cnn, make_case):
    result = execute_case(tiny_cnn, make_case("torchscript"))
    assert result.status == "ok", result.error
    assert result.precision_effective == "fp32"
    assert {"import_s", "model_init_s", "compile_s"} <= set(result.loading.load_phases_s)


@pytest.mark.skipif(not {"avx512_bf16", "amx_bf16"} & set(cpu_isa()), reason="no native bf16")
def test_bf16_read_back_from_outputs(tiny_cnn, make_case):
    session = TorchScriptBackend().load(tiny_cnn, make_case("torchscript", precision="bf16"))
    assert session.effective_precision() == "bf16"


def test_onnx_only_model_is_unavailable(make_case, tmp_path):
    from infermeter.models.convert import onnx_for

    onnx_model = resolve_model(str(onnx_for(resolve_model("tiny_cnn")).path))
    assert "no PyTorch form" in (TorchScriptBackend.unsupported_reason(onnx_model, make_case("torchscript")) or "")
