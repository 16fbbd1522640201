"""INT8 for OpenVINO with NNCF: `nncf.quantize` (static, calibrated on our samples) or `nncf.compress_weights`
(int8 weights only: OpenVINO's counterpart of dynamic quantization). Writes an OpenVINO IR (.xml + .bin)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.errors import ModelError, UsageError, describe_exception
from infermeter.models.samples import SampleSet
from infermeter.quantize.ort_quant import QuantConfig


def quantize_openvino(source: Path, target: Path, config: QuantConfig, calib: SampleSet | None) -> str:
    """Quantize the float ONNX model `source` into the IR `target` (.xml); returns a note on what was done.

    `config.exclude` names OpenVINO operations (as `nncf.IgnoredScope` names). Only the min/max method is
    offered: NNCF chooses its own range estimators per tensor.
    """
    try:
        import nncf
        import openvino as ov
    except ImportError as exc:
        from infermeter.extras import install_line

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


# Seconds NNCF's accuracy control may run in its worker (it ranks every group of quantizers: minutes to hours).
CONTROL_TIMEOUT_S = 6 * 3600.0


def quantize_openvino_controlled(
    source: Path,
    target: Path,
    calib: SampleSet,
    evaluation: SampleSet,
    reference: tuple[str, np.ndarray],
    max_drop_pct: float,
) -> str:
    """NNCF's accuracy-aware INT8 (`nncf.quantize_with_accuracy_control`) of the float ONNX model `source` into the
    IR `target`: quantize, then return the layers that cost most accuracy to float, one at a time, until the drop
    is within `max_drop_pct` points. `reference` is (task kind, FP32's first outputs on `evaluation`): each subset
    NNCF ranks layers on is scored as every other row of `quantize` is (`evaluate.score`). Runs in a worker
    process of its own: after NNCF's accuracy control, the next SIGINT (Ctrl-C) segfaults the process it ran in.
    Returns a note on what was done."""
    from infermeter.measure.isolation import call_in_worker

    args = (source, target, calib, evaluation, reference, max_drop_pct)
    kind, payload = call_in_worker(_controlled, args, CONTROL_TIMEOUT_S)
    if kind != "result":
        raise ModelError(f"NNCF's accuracy control could not quantize {source.name}: {payload}")
    return str(payload)


def _controlled(
    source: Path,
    target: Path,
    calib: SampleSet,
    evaluation: SampleSet,
    reference: tuple[str, np.ndarray],
    max_drop_pct: float,
) -> str:
    import nncf
    import openvino as ov

    from infermeter.quantize.evaluate import ModelRunner, score

    logging.getLogger("nncf").setLevel(logging.ERROR)
    kind, fp32_outputs = reference

    def validate(compiled: Any, indices: Iterable[int]) -> float:
        chosen = np.fromiter(indices, dtype=np.int64)
        subset = SampleSet({k: v[chosen] for k, v in evaluation.arrays.items()}, None, evaluation.source)
        outputs = ModelRunner.of_compiled(compiled).predict(subset, batch_size=1)
        labels = None if evaluation.labels is None else evaluation.labels[chosen]
        return score(kind, fp32_outputs[chosen], outputs, labels).value

    model = ov.Core().read_model(str(source))
    kwargs: dict[str, object] = {"model_type": nncf.ModelType.TRANSFORMER} if is_transformer(model) else {}
    quantized = nncf.quantize_with_accuracy_control(
        model,
        nncf.Dataset(list(calib.batches(1))),
        nncf.Dataset(list(range(evaluation.count))),
        validate,
        max_drop=max_drop_pct / 100.0,
        drop_type=nncf.DropType.ABSOLUTE,
        subset_size=calib.count,
        **kwargs,
    )
    ov.save_model(quantized, str(target), compress_to_fp16=False)
    return f"nncf.quantize_with_accuracy_control: max drop {max_drop_pct:g} points on {evaluation.count} samples"


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
