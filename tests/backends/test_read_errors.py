"""One-line errors that end with the remedy: a fixed dim names `--reshape` ready to paste; OpenVINO failing to read
a TFLite model names what it lacks, is never cut mid-word, and suggests the tflite backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend_helpers import write_tflite_mlp
from infermeter.backends.read_errors import TFLITE_REMEDY, lacking, openvino_read_error
from infermeter.core.errors import InputSpecError, cut_at_word, engine_message
from infermeter.models.inputs import InputSpec, resolve_shapes
from infermeter.models.spec import ModelSpec


def test_a_fixed_dim_refusal_names_reshape_ready_to_paste() -> None:
    spec = InputSpec("images", "float32", shape=(1, 3, 224, 224))
    with pytest.raises(InputSpecError) as caught:
        resolve_shapes((spec,), 1, (("images", (1, 3, 480, 640)),))
    message = str(caught.value)
    assert "dim 2 is fixed at 224" in message and message.endswith("--reshape images:1x3x480x640")
    assert "\n" not in message


def test_cut_never_mid_word() -> None:
    text = "alpha beta gamma delta " * 40
    cut = cut_at_word(text, 50)
    assert len(cut) <= 50 and cut.endswith("…") and cut[:-1].split(" ")[-1] in {"alpha", "beta", "gamma", "delta"}
    assert engine_message("word " * 200, max_chars=52).endswith("word…")


def vars_tflite(folder: Path) -> Path:
    """A real .tflite flatbuffer whose operator is VAR_HANDLE (a model with internal state), which OpenVINO's TFLite
    frontend has no translator for."""
    flatbuffers = pytest.importorskip("flatbuffers")
    pytest.importorskip("ai_edge_litert")
    from ai_edge_litert import schema_py_generated as schema

    path = write_tflite_mlp(folder / "mlp.tflite", [(np.ones((4, 3), np.float32), np.ones(4, np.float32))], 3)
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(path.read_bytes(), 0))
    model.operatorCodes[0].builtinCode = schema.BuiltinOperator.VAR_HANDLE
    model.operatorCodes[0].deprecatedBuiltinCode = 127  # the int8 field's "see builtinCode" value
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    target = folder / "stateful.tflite"
    target.write_bytes(bytes(builder.Output()))
    return target


def test_openvino_tflite_read_error_names_the_operator_and_the_tflite_backend(tmp_path: Path) -> None:
    ov = pytest.importorskip("openvino")
    path = vars_tflite(tmp_path)
    with pytest.raises(Exception) as caught:
        ov.Core().read_model(str(path))
    spec = ModelSpec(str(path), "stateful", kind="tflite", inputs=(), output_names=(), content_hash="0", path=str(path))
    message = openvino_read_error(spec, caught.value)
    assert "(it lacks VAR_HANDLE)" in message and message.endswith(TFLITE_REMEDY)
    assert "\n" not in message and "frontend.cpp" not in message


def test_a_long_reason_is_cut_at_a_word_and_still_ends_with_the_remedy() -> None:
    long = RuntimeError("Op conversion failed: " + "unsupported feature resource variables " * 30)
    spec = ModelSpec("m.tflite", "m", kind="tflite", inputs=(), output_names=(), content_hash="0", path="m.tflite")
    message = openvino_read_error(spec, long)
    reason = message.split(": ", 1)[1].removesuffix("; " + TFLITE_REMEDY)
    assert reason.endswith("…") and reason[:-1].split(" ")[-1] in {"unsupported", "feature", "resource", "variables"}
    assert lacking("OpenVINO does not support the following TFLite operation(s): VAR_HANDLE, READ_VARIABLE") == (
        "VAR_HANDLE, READ_VARIABLE"
    )
