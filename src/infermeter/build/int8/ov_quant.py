"""INT8 for OpenVINO with NNCF: `nncf.quantize` (static, calibrated on our samples) or `nncf.compress_weights`
(int8 weights only: OpenVINO's counterpart of dynamic quantization). Writes an OpenVINO IR (.xml + .bin).

NNCF's accuracy-aware quantization scores its subsets as the INT8 study does and runs in one of measure's workers:
it is study work, in `quantize/ov_control.py`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from infermeter.build.int8.ort_quant import QuantConfig
from infermeter.core.errors import ModelError, UsageError, describe_exception
from infermeter.models.samples import SampleSet


def quantize_openvino(source: Path, target: Path, config: QuantConfig, calib: SampleSet | None) -> str:
    """Quantize the float ONNX model `source` into the IR `target` (.xml); returns a note on what was done.

    `config.exclude` names OpenVINO operations (as `nncf.IgnoredScope` names). Only the min/max method is
    offered: NNCF chooses its own range estimators per tensor.
    """
    try:
        import nncf
        import openvino as ov
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise UsageError(f"--engine openvino needs {exc.name}: {install_line('quantize')}") from exc
    if target.suffix.lower() != ".xml":
        raise UsageError(f"--engine openvino writes an OpenVINO IR: give -o a .xml path, not {target.name!r}")
    if config.method != "minmax":
        raise UsageError("--method applies to --engine onnxruntime; NNCF picks its own range estimators")
    logging.getLogger("nncf").setLevel(logging.ERROR)
    try:
        model = ov.Core().read_model(str(source))
        ignored = nncf.IgnoredScope(names=list(config.exclude), validate=True) if config.exclude else None
        if config.mode == "dynamic":
            quantized = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
            note = "nncf.compress_weights INT8_ASYM (int8 weights, float activations)"
        else:
            if calib is None:
                raise UsageError("static quantization needs calibration samples")
            dataset = nncf.Dataset(list(calib.batches(1)))
            kwargs: dict[str, object] = {"ignored_scope": ignored} if ignored is not None else {}
            transformer = is_transformer(model)
            if transformer:
                # NNCF's transformer scheme keeps softmax, GELU and normalization inputs in float: without it, an
                # encoder loses almost all its accuracy (MiniLM: a 90-point cosine drop, 1.2 with it).
                kwargs["model_type"] = nncf.ModelType.TRANSFORMER
            quantized = nncf.quantize(model, dataset, subset_size=calib.count, **kwargs)
            scheme = ", transformer scheme" if transformer else ""
            note = f"nncf.quantize on {calib.count} calibration samples{scheme}"
        # compress_to_fp16 would halve the file but change what a reader of the file sees as its precision.
        ov.save_model(quantized, str(target), compress_to_fp16=False)
    except UsageError:
        raise
    except Exception as exc:
        raise ModelError(f"NNCF could not quantize {source.name}: {describe_exception(exc)}") from exc
    return note


def float_compute_layers(path: Path) -> list[str]:
    """The compute layers (convolutions, matmuls) of the IR at `path` that OpenVINO's CPU plugin runs in float."""
    import openvino as ov

    from infermeter.backends.openvino_profile import runtime_mix

    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return runtime_mix(compiled, listed=None).float_layers


def is_transformer(model: Any) -> bool:
    """True when an OpenVINO model has attention (a Softmax beside MatMuls): NNCF's `ModelType.TRANSFORMER`."""
    types = {op.get_type_name() for op in model.get_ops()}
    return "Softmax" in types and "MatMul" in types


def ir_precision(path: Path) -> str:
    """int8 when the IR holds FakeQuantize operations or int8/uint8 weights, else fp32/fp16 by its weights."""
    import openvino as ov

    from infermeter.models.openvino_ir import ir_model_precision

    return ir_model_precision(ov.Core().read_model(str(path)))
