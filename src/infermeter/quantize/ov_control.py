"""NNCF's accuracy-aware INT8 (`nncf.quantize_with_accuracy_control`) for `quantize --engine openvino --max-drop`.
It scores each subset as every other row of `quantize` is scored (`evaluate.score`) and runs in one of measure's
workers (`call_in_worker`): study work, above `measure`, unlike the plain `nncf.quantize` of
`quantizers/ov_quant.py`, which `measure` reaches through on-the-fly INT8."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.build.int8.ov_quant import is_transformer
from infermeter.core.errors import ModelError
from infermeter.models.samples import SampleSet

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
