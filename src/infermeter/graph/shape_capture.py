"""Shapes ONNX shape inference leaves unknown, recovered so that every node's FLOPs and bytes can be counted.

ONNX's inference stops at a shape computed by ops its data propagation does not follow (a Reshape whose target
is cast to float and back, a ReduceProd of dims...), and everything downstream, MatMuls included, would count 0.
Two recoveries, in order: ONNX Runtime's symbolic shape inference (`onnxruntime.tools.symbolic_shape_infer`,
which evaluates shape arithmetic), then one real ONNX Runtime run at the inspected input shapes with the still
unknown values exposed as graph outputs, whose shapes are then read off. Each writes the shapes it found into the
model's `value_info`. What neither recovers stays unknown: `GraphView.uncounted_nodes` names those nodes.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from infermeter.graph.model import graph_view

if TYPE_CHECKING:
    import onnx

    from infermeter.models.inputs import Feeds


@dataclass
class Recovered:
    """The model with what the recoveries found in its value_info, and what each did (for the report's notes)."""

    model: onnx.ModelProto
    notes: list[str] = field(default_factory=list)


def recover_shapes(model: onnx.ModelProto, feeds: Callable[[], Feeds]) -> Recovered:
    """Fill the shapes ONNX inference left unknown in `model` (whose inputs are already fixed): symbolic inference
    first, then one ONNX Runtime run on `feeds()` (called only when needed). Never raises: a recovery that fails
    is said in a note, and the shapes stay unknown."""
    result = Recovered(model)
    unknown = graph_view(model).unknown_shapes()
    if not unknown:
        return result
    symbolic = _symbolic(model)
    if isinstance(symbolic, str):
        result.notes.append(f"ONNX Runtime's symbolic shape inference failed ({symbolic})")
    else:
        found = _fill(model, _static_shapes(symbolic, set(unknown)))
        if found:
            result.notes.append(f"{found} tensor shapes from ONNX Runtime's symbolic shape inference")
        unknown = graph_view(model).unknown_shapes()
    if not unknown:
        return result
    captured = _capture(model, unknown, feeds)
    if isinstance(captured, str):
        result.notes.append(f"the shapes could not be captured from an ONNX Runtime run ({captured})")
        return result
    found = _fill(model, captured)
    if found:
        result.notes.append(f"{found} tensor shapes captured from one ONNX Runtime run at the inspected input shapes")
    return result


def _symbolic(model: onnx.ModelProto) -> onnx.ModelProto | str:
    """The model through ONNX Runtime's symbolic shape inference, or why not."""
    from infermeter.core.errors import describe_exception

    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:
        return "onnxruntime is not installed"
    logging.getLogger("onnxruntime.tools.symbolic_shape_infer").setLevel(logging.ERROR)
    try:
        # Where its inference stays incomplete, ONNX Runtime saves the partial model as sym_shape_infer_temp.onnx
        # (with external data) in the current folder before it raises: in a folder of its own, not the user's.
        with (
            tempfile.TemporaryDirectory(prefix="infermeter-shapes-") as scratch,
            contextlib.chdir(scratch),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            inferred: onnx.ModelProto = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
        return inferred
    except Exception as exc:  # an op it does not know, a shape it cannot merge: the next recovery tries
        return describe_exception(exc, 200)


def _static_shapes(model: onnx.ModelProto, names: set[str]) -> dict[str, tuple[tuple[int, ...], int]]:
    """(shape, element type) of each of `names` whose every dim the model's value_info gives as a number."""
    out: dict[str, tuple[tuple[int, ...], int]] = {}
    for value in (*model.graph.value_info, *model.graph.output):
        tensor_type = value.type.tensor_type
        if value.name not in names or not tensor_type.HasField("shape"):
            continue
        dims = tensor_type.shape.dim
        if all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
            out[value.name] = (tuple(int(d.dim_value) for d in dims), tensor_type.elem_type)
    return out


def _capture(
    model: onnx.ModelProto, names: list[str], feeds: Callable[[], Feeds]
) -> dict[str, tuple[tuple[int, ...], int]] | str:
    """(shape, element type) of `names` from one ONNX Runtime run with them exposed as outputs, or why not."""
    import onnx

    from infermeter.core.errors import describe_exception

    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed"
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    exposed = {value.name for value in probe.graph.output}
    for name in names:
        if name not in exposed:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # every value exists as written
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
        arrays = session.run(names, feeds())
    except Exception as exc:  # an op ORT lacks, inputs whose values matter: the shapes stay unknown
        return describe_exception(exc, 200)
    return {
        name: (tuple(int(d) for d in np.shape(array)), onnx.helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype))
        for name, array in zip(names, arrays, strict=True)
    }


def _fill(model: onnx.ModelProto, shapes: dict[str, tuple[tuple[int, ...], int]]) -> int:
    """Write `shapes` into the model's value_info (replacing what inference left partial); returns how many."""
    import onnx

    if not shapes:
        return 0
    keep = [value for value in model.graph.value_info if value.name not in shapes]
    del model.graph.value_info[:]
    model.graph.value_info.extend(keep)
    outputs = {value.name: value for value in model.graph.output}
    for name, (dims, elem_type) in shapes.items():
        filled = onnx.helper.make_tensor_value_info(name, elem_type, list(dims))
        if name in outputs:
            outputs[name].CopyFrom(filled)
        else:
            model.graph.value_info.append(filled)
    return len(shapes)
