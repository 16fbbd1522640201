"""OpenVINO IR models (`model.xml` + `model.bin`): inputs and outputs read by OpenVINO itself, identity over both files.

An IR is the usual deliverable of OpenVINO's tools (`ovc`, NNCF, `infermeter quantize --engine openvino`); only
the openvino backend runs it (every other backend refuses it in `unsupported_reason`, with the reason).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from infermeter.core.errors import ModelError, engine_message
from infermeter.models.inputs import Dim, InputSpec
from infermeter.models.spec import ModelSpec, file_sha256

IR_KIND = "openvino_ir"


def weights_path(xml: Path) -> Path:
    """The `.bin` beside an IR's `.xml` (OpenVINO's own rule: same stem, same folder)."""
    return xml.with_suffix(".bin")


def ir_content_hash(xml: Path) -> str:
    """The IR's identity: a digest over the graph (.xml) and the weights (.bin) together (either may change)."""
    digest = hashlib.sha256()
    for part in (xml, weights_path(xml)):
        digest.update(file_sha256(part).encode())
    return digest.hexdigest()[:16]


def read_ir(path: Path) -> Any:
    """The IR read by OpenVINO (`openvino.Model`); ModelError with OpenVINO's own reason when it cannot be read
    (a truncated `.bin`: "Incorrect weights in bin file!"), or with the install line when OpenVINO is missing."""
    try:
        import openvino as ov
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise ModelError(f"reading an OpenVINO IR (.xml) needs OpenVINO: {install_line('openvino')}") from exc
    try:
        return ov.Core().read_model(str(path))
    except Exception as exc:
        raise ModelError(f"OpenVINO could not read the IR {path}: {engine_message(exc)}") from exc


def _dtype_name(port: Any) -> str:
    import numpy as np

    return str(np.dtype(port.get_element_type().to_dtype()))


def _dims(name: str, port: Any) -> tuple[Dim, ...]:
    """A port's dims: static sizes as ints; a dynamic axis 0 is `batch`, any other `NAME_dimN` (an IR keeps no
    dimension names, so such a dim is sized by `--input`)."""
    dims: list[Dim] = []
    for axis, dim in enumerate(port.get_partial_shape()):
        if dim.is_static and dim.get_length() > 0:
            dims.append(int(dim.get_length()))
        else:
            dims.append("batch" if axis == 0 else f"{name}_dim{axis}")
    return tuple(dims)


def ir_spec(ref: str, path: Path) -> ModelSpec:
    """A ModelSpec for an OpenVINO IR: ModelError (exit 2) when the `.xml` or its `.bin` is missing, or when
    OpenVINO cannot read them (a truncated or corrupt `.bin`: OpenVINO's message)."""
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist")
    weights = weights_path(path)
    if not weights.is_file():
        raise ModelError(
            f"the OpenVINO IR {path} has no weights file: {weights.name} is missing beside it "
            "(an IR is the .xml and its .bin together; copy both)"
        )
    model = read_ir(path)
    inputs = []
    for port in model.inputs:
        name = port.get_any_name()
        dims = _dims(name, port)
        inputs.append(InputSpec(name, _dtype_name(port), shape=dims, batch_axis=0 if dims else None))
    outputs = tuple((port.get_any_name() if port.get_names() else f"output{i}") for i, port in enumerate(model.outputs))
    return ModelSpec(
        ref=ref,
        name=path.stem,
        kind=IR_KIND,
        inputs=tuple(inputs),
        output_names=outputs,
        content_hash=ir_content_hash(path),
        path=str(path.resolve()),
        precision=ir_model_precision(model),
    )


def ir_model_precision(model: Any) -> str:
    """What an `openvino.Model` computes in, from its operations: int8 when it holds FakeQuantize (NNCF's
    INT8) or int8/uint8 weights, else fp16/fp32 by its weights."""
    types = {op.get_type_name() for op in model.get_ops()}
    if "FakeQuantize" in types or "FakeConvert" in types:
        return "int8"
    constants = {str(op.get_output_element_type(0)) for op in model.get_ops() if op.get_type_name() == "Constant"}
    if constants & {"<Type: 'int8_t'>", "<Type: 'uint8_t'>", "i8", "u8"}:
        return "int8"
    return "fp16" if constants & {"<Type: 'float16'>", "f16"} else "fp32"
