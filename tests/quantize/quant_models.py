"""Tiny ONNX models for the quantization tests, built with onnx.helper (no torch export: fast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

FEATURES = 16
HIDDEN = 32
CLASSES = 10


def mlp(path: Path, sensitive: bool = False, seed: int = 0) -> Path:
    """x[batch,16] → MatMul mm1 → Relu → MatMul mm2 → Relu → MatMul mm3 → logits[batch,10].

    With `sensitive`, mm2's weights get one outlier of 1000 on a row that only ever meets zeros (mm1's output
    channel 0 is zeroed): the float function does not see it, but per-tensor int8 weights of mm2 get a step of
    ~8 that rounds every other weight to zero, so mm2 is the one layer that must stay in float.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((FEATURES, HIDDEN)).astype(np.float32) / 4
    w2 = rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32) / 5
    w3 = rng.standard_normal((HIDDEN, CLASSES)).astype(np.float32) / 5
    if sensitive:
        w1[:, 0] = 0.0
        w2[0, 0] = 1000.0
    nodes = [
        helper.make_node("MatMul", ["input", "w1"], ["h1"], name="mm1"),
        helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="mm2"),
        helper.make_node("Relu", ["h2"], ["r2"], name="relu2"),
        helper.make_node("MatMul", ["r2", "w3"], ["logits"], name="mm3"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def mlp_data(path: Path, model: Path, count: int, seed: int, shift: float = 0.0, labels: bool = True) -> Path:
    """Inputs ~ N(shift, 1) and (optionally) labels = the FP32 model's own top-1 (so FP32 scores 1.0)."""
    import onnxruntime as ort

    x = (np.random.default_rng(seed).standard_normal((count, FEATURES)) + shift).astype(np.float32)
    arrays = {"input": x}
    if labels:
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        arrays["labels"] = np.argmax(session.run(None, {"input": x})[0], axis=1)
    np.savez(path, **arrays)
    return path
