"""`bench --precision int8` on a float model: quantize it once (static QDQ, ONNX Runtime), cache the result by
content, and hand back the INT8 file to benchmark. Calibration uses generated inputs unless the case names
real data with the option `quantize.calib=DATA`, and the caller is told so (the accuracy of such a model is
unknown: a warning, never silence). The warning comes back in the returned record, not through Python's warnings
module, and nothing here imports the measurement package (measure/execute.py imports this module)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from infermeter.case import Case
from infermeter.models.spec import ModelSpec, file_sha256
from infermeter.quantize.data import (
    RANDOM_CALIBRATION_SAMPLES,
    load_samples,
    random_calibration_warning,
    random_samples,
)
from infermeter.quantize.ort_quant import METHODS, QuantConfig, preprocess, quantize_onnx
from infermeter.results.schema import CaseWarning


@dataclass(frozen=True)
class OnTheFlyInt8:
    """The INT8 file `quantize_on_the_fly` built (or found cached), and the warnings its case must carry."""

    path: Path
    warnings: tuple[CaseWarning, ...]


def quantize_on_the_fly(spec: ModelSpec, case: Case) -> OnTheFlyInt8:
    """The INT8 (QDQ) ONNX file for `spec`, built on first use and cached (`models.convert.cached_build`).

    Case options: `quantize.calib=DATA` (calibration data, as for `infermeter quantize --calib`),
    `quantize.method=minmax|entropy|percentile`, `quantize.per_channel=on`. Without `quantize.calib`, the record
    carries a `random_calibration` warning.
    """
    from infermeter.backends.options import QUANTIZE_CALIB, QUANTIZE_METHOD, QUANTIZE_PER_CHANNEL
    from infermeter.models.convert import cached_build, onnx_for

    calib_ref = QUANTIZE_CALIB.value(case)
    method = QUANTIZE_METHOD.value(case)
    per_channel = QUANTIZE_PER_CHANNEL.value(case)
    config = QuantConfig("static", method, per_channel)
    config.check()
    source = onnx_for(spec).path
    calib_id = "random" if calib_ref is None else _data_identity(calib_ref)
    key = {"model": spec.content_hash, "source": file_sha256(source)[:16], "calib": calib_id, "method": method,
           "per_channel": per_channel, "v": 1}  # fmt: skip
    remedy = "pass --option quantize.calib=DATA, or quantize with `infermeter quantize --calib --eval`"
    found = () if calib_ref is not None else (random_calibration_warning(RANDOM_CALIBRATION_SAMPLES, remedy),)

    def build(target: Path) -> str:
        if calib_ref is None:
            calib = random_samples(spec.inputs, RANDOM_CALIBRATION_SAMPLES, case.settings.seed + 1)
        else:
            calib = load_samples(spec.inputs, calib_ref, 300)
        with tempfile.TemporaryDirectory(prefix="infermeter-otf-") as scratch:
            prepared = Path(scratch) / "fp32.onnx"
            note = preprocess(source, prepared)
            quantize_onnx(prepared, target, config, calib)
        return f"int8 static QDQ ({method}) calibrated on {calib.source}; {note}"

    return OnTheFlyInt8(cached_build("int8", key, ".onnx", build).path, found)


def _data_identity(ref: str) -> str:
    path = Path(ref.rpartition(":")[0] if ".py:" in ref else ref)
    if path.is_file():
        return f"{ref}@{file_sha256(path)[:16]}"
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return f"{ref}@{len(files)}:{max((p.stat().st_mtime_ns for p in files), default=0)}"
    return ref


__all__ = ["METHODS", "OnTheFlyInt8", "quantize_on_the_fly"]
