"""`infermeter inspect model.xml`: what OpenVINO itself can say about an IR, since the ONNX-based analysis (FLOPs,
bytes moved, memory plan, fusion) needs an ONNX graph an IR does not have: the operations by type, the weights by
element type, the quantize operations, and, from the compiled model's runtime information, the layers the CPU
plugin really runs (after its fusions) with the precision of each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.models.spec import ModelSpec


@dataclass
class IrReport:
    """An IR's report: `ops` (operation type -> count, as written in the IR), `weights` (element type ->
    [constants, bytes]), `fake_quantize` (FakeQuantize operations: NNCF's INT8), `runtime_layers` ((layer type,
    runtime precision) -> count in the compiled model), `mix` (compute layers per runtime precision)."""

    model: str
    input_shapes: dict[str, list[int]]
    _: KW_ONLY  # the rest by keyword
    node_count: int
    ops: dict[str, int]
    weights: dict[str, list[int]]
    fake_quantize: int
    runtime_layers: list[dict[str, Any]] = field(default_factory=list)
    mix: dict[str, int] = field(default_factory=dict)
    float_layers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`inspect --json`)."""
        return asdict(self)


def inspect_ir(spec: ModelSpec, batch: int, overrides: Sequence[tuple[str, tuple[int, ...]]] = ()) -> IrReport:
    """The report of the IR `spec` (or a .tflite file, read by OpenVINO's TFLite frontend) at `batch` /
    `overrides` (shapes fixed before compiling, as bench's static mode does), compiled for the CPU at the f32
    hint (the hint of the layers left in float)."""
    import openvino as ov

    from infermeter.backends.openvino_profile import runtime_mix
    from infermeter.models.inputs import resolve_shapes
    from infermeter.models.openvino_ir import read_ir

    assert spec.path is not None
    model = read_ir(Path(spec.path))
    ops = Counter(op.get_type_name() for op in model.get_ops())
    weights: dict[str, list[int]] = {}
    for op in model.get_ops():
        if op.get_type_name() == "Constant":
            element = op.get_output_element_type(0).get_type_name()
            count = int(np.prod(list(op.get_output_shape(0)), dtype=np.int64))
            entry = weights.setdefault(element, [0, 0])
            entry[0] += 1
            entry[1] += count * op.get_output_element_type(0).bitwidth // 8
    shapes = resolve_shapes(spec.inputs, batch, overrides)
    model.reshape({name: list(shape) for name, shape in shapes.items()})
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    layers: Counter[tuple[str, str]] = Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        layer_type = info["layerType"].astype(str)
        if layer_type not in ("Const", "Input", "Output"):  # the graph's edges, not work
            layers[(layer_type, info["runtimePrecision"].astype(str))] += 1
    mix = runtime_mix(compiled)
    report = IrReport(
        model=spec.ref,
        input_shapes={name: list(shape) for name, shape in shapes.items()},
        node_count=sum(ops.values()),
        ops=dict(ops.most_common()),
        weights=weights,
        fake_quantize=ops.get("FakeQuantize", 0),
        runtime_layers=[{"layer": t, "precision": p, "count": n} for (t, p), n in layers.most_common()],
        mix=mix.counts,
        float_layers=mix.float_layers,
    )
    report.notes.append(
        f"{'a .tflite file' if spec.kind == 'tflite' else 'an OpenVINO IR'} has no ONNX form: FLOPs, bytes moved, "
        "the activation memory plan and fusion opportunities are computed on ONNX graphs (inspect the ONNX or "
        "PyTorch model it was made from)"
    )
    return report
