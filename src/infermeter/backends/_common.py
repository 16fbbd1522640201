"""Helpers shared by the framework backends: CPU precision support, shapes, dummy feeds (options: `options.py`)."""

from __future__ import annotations

from infermeter.core.case import Case
from infermeter.models.inputs import Feeds, generate_feeds, resolve_shapes
from infermeter.models.spec import ModelSpec

# The ISA flags (as /proc/cpuinfo spells them) that give a CPU native arithmetic in a precision. Without one of
# them a framework either refuses or emulates the precision in software, which measures nothing useful.
NATIVE_ISA = {
    "bf16": ("avx512_bf16", "amx_bf16"),
    "fp16": ("avx512_fp16", "amx_fp16"),
}


def cpu_precision_reason(precision: str, framework: str) -> str | None:
    """Why this CPU cannot compute `precision` natively (None when it can, or for fp32/int8)."""
    needed = NATIVE_ISA.get(precision)
    if needed is None:
        return None
    from infermeter.results.env import cpu_isa

    if set(needed) & set(cpu_isa()):
        return None
    return (
        f"this CPU has no native {precision} arithmetic (needs {' or '.join(needed)} in /proc/cpuinfo); "
        f"{framework} would emulate it, which measures nothing useful"
    )


def case_shapes(model: ModelSpec, case: Case) -> dict[str, tuple[int, ...]]:
    """The concrete input shapes of `case` (batch and `--input` overrides applied)."""
    return resolve_shapes(model.inputs, case.batch, case.input_shapes)


def dummy_feeds(model: ModelSpec, case: Case) -> Feeds:
    """One feed set of the case's shapes, used by `load` to trigger lazy compilation (never timed)."""
    return generate_feeds(model.inputs, case_shapes(model, case), 1, seed=12345)[0]


def precision_from_dtype_name(name: str) -> str:
    """`float32`/`f32`/`bfloat16`/`bf16`/`float16`/`f16`/`int8`/`i8`/`u8` -> fp32/bf16/fp16/int8 (else the name)."""
    lowered = name.lower().removeprefix("torch.")
    table = {
        "float32": "fp32",
        "f32": "fp32",
        "fp32": "fp32",
        "bfloat16": "bf16",
        "bf16": "bf16",
        "float16": "fp16",
        "f16": "fp16",
        "fp16": "fp16",
        "half": "fp16",
        "int8": "int8",
        "i8": "int8",
        "u8": "int8",
        "uint8": "int8",
    }
    return table.get(lowered, lowered)


def onnx_form_reason(model: ModelSpec, backend: str) -> str | None:
    """Why an ONNX-based backend cannot take `model` (a .tflite file or an OpenVINO IR has no ONNX form here),
    else None."""
    if model.kind == "tflite":
        return f"{backend} needs an ONNX or PyTorch model; {model.ref} is a .tflite file (use the tflite backend)"
    if model.kind == "openvino_ir":
        return (
            f"{backend} needs an ONNX or PyTorch model; {model.ref} is an OpenVINO IR (.xml + .bin), which only "
            "OpenVINO reads (use the openvino backend, or bench the ONNX or PyTorch model the IR was made from)"
        )
    return None
