"""The evaluation runner says what it fed when the engine refuses the samples, instead of a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from infermeter.core.errors import BackendError
from infermeter.quantize.evaluate import ModelRunner


def _two_inputs_that_must_agree(path: Path) -> Path:
    # Two inputs whose second dims have different symbolic names but meet in an Add, as some exporters write
    # input_ids [batch, sequence] and attention_mask [batch, attention_mask_dim1].
    a = helper.make_tensor_value_info("ids", TensorProto.FLOAT, ["batch", "sequence"])
    b = helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "mask_dim1"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Add", ["ids", "mask"], ["out"])], "g", [a, b], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def test_feeds_the_engine_refuses_give_its_message_and_the_shapes_fed(tmp_path: Path) -> None:
    runner = ModelRunner(_two_inputs_that_must_agree(tmp_path / "add.onnx"))
    agreeing = {"ids": np.ones((2, 8), np.float32), "mask": np.ones((2, 8), np.float32)}
    assert runner.run(agreeing).shape == (2, 8)
    with pytest.raises(BackendError) as error:
        runner.run({"ids": np.ones((2, 8), np.float32), "mask": np.ones((2, 4), np.float32)})
    message = str(error.value)
    assert "ids:2x8, mask:2x4" in message and "--input NAME:DIMS" in message
    assert "broadcast" in message.lower() or "incompatible" in message.lower()
