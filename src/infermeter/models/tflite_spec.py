"""`.tflite` model files: their inputs read from LiteRT's interpreter (the file's own signature)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infermeter.core.errors import ModelError
from infermeter.models.inputs import Dim, InputSpec
from infermeter.models.spec import ModelSpec, file_sha256


def tflite_precision(tensor_details: list[dict[str, Any]]) -> str:
    """int8 when the model holds quantized 8-bit tensors (a scale in their quantization parameters), else
    fp32: LiteRT's CPU kernels (XNNPACK) compute float models in fp32, fp16-stored weights included."""
    for detail in tensor_details:
        scales = detail.get("quantization_parameters", {}).get("scales")
        if detail.get("dtype") in (np.int8, np.uint8) and scales is not None and len(scales):
            return "int8"
    return "fp32"


def tflite_spec(ref: str, path: Path) -> ModelSpec:
    """A ModelSpec for a .tflite file: inputs and outputs from the interpreter's tensor details; a dimension
    the file marks dynamic (-1 in `shape_signature`) becomes symbolic (`batch` on axis 0)."""
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist")
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise ModelError(f"reading .tflite files needs LiteRT: {install_line('tflite')}") from exc
    try:
        interpreter = Interpreter(model_path=str(path))
    except Exception as exc:
        raise ModelError(f"{path} is not a readable .tflite model ({type(exc).__name__}: {exc})") from exc
    inputs: list[InputSpec] = []
    for detail in interpreter.get_input_details():
        signature = detail.get("shape_signature")
        dims_raw = list(signature if signature is not None and len(signature) else detail["shape"])
        dims: list[Dim] = []
        for axis, dim in enumerate(dims_raw):
            if int(dim) > 0:
                dims.append(int(dim))
            else:
                dims.append("batch" if axis == 0 else f"{detail['name']}_dim{axis}")
        dtype = detail["dtype"]
        inputs.append(InputSpec(detail["name"], getattr(dtype, "__name__", str(dtype)), shape=tuple(dims)))
    outputs = tuple(detail["name"] for detail in interpreter.get_output_details())
    return ModelSpec(
        ref=ref,
        name=path.stem,
        kind="tflite",
        inputs=tuple(inputs),
        output_names=outputs,
        content_hash=file_sha256(path)[:16],
        path=str(path.resolve()),
        precision=tflite_precision(interpreter.get_tensor_details()),
    )
