"""`bench --precision int8` on a float model: quantize it once, with the quantizer of the engine that runs it
(`Backend.int8_quantizer_for`: ONNX Runtime's static QDQ, `ort-qdq`; OpenVINO's NNCF, `nncf`), cache the result by
content, and hand back the INT8 graph to benchmark (a QDQ .onnx, or an OpenVINO IR .xml + .bin).

Every quantizer calibrates on the same samples: the data the case names with `quantize.calib=DATA`, else generated
inputs, and the caller is told so (the accuracy of such a model is unknown: a `random_calibration` warning, never
silence). The warning comes back in the returned record, not through Python's warnings module: `case_build.py`
imports this module, below `measure`, and nothing here reaches back up (no `measure`, no `quantize`)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from infermeter.build.int8.calibration import RANDOM_CALIBRATION_SAMPLES, random_calibration_warning
from infermeter.build.int8.ort_quant import METHODS, QuantConfig, preprocess, quantize_onnx
from infermeter.build.validate import check_openvino_ir, check_quantized
from infermeter.core.case import Case
from infermeter.models.samples import SampleSet
from infermeter.models.spec import ModelSpec, file_sha256
from infermeter.results.schema import CaseWarning

# The file an NNCF cache entry (a folder) holds; its weights are the `.bin` beside it.
IR_FILE = "model.xml"


@dataclass(frozen=True)
class OnTheFlyInt8:
    """The INT8 graph `quantize_on_the_fly` built (or found cached), the quantizer that made it, and the warnings
    its case must carry."""

    path: Path
    warnings: tuple[CaseWarning, ...]
    quantizer: str = "ort-qdq"


@dataclass(frozen=True)
class Calibration:
    """The calibration set every quantizer uses for a case: `quantize.calib=DATA` or random inputs (with the
    warning), identified in cache keys by `identity`."""

    ref: str | None
    identity: str
    warnings: tuple[CaseWarning, ...]

    @classmethod
    def of(cls, case: Case) -> Calibration:
        """The case's calibration set (`quantize.calib`)."""
        from infermeter.backends.options import QUANTIZE_CALIB

        ref = QUANTIZE_CALIB.value(case)
        remedy = "pass --option quantize.calib=DATA, or quantize with `infermeter quantize --calib --eval`"
        found = () if ref is not None else (random_calibration_warning(RANDOM_CALIBRATION_SAMPLES, remedy),)
        return cls(ref, "random" if ref is None else _data_identity(ref), found)

    def samples(self, spec: ModelSpec, case: Case) -> SampleSet:
        """The samples themselves (loaded when a quantizer runs, not on a cache hit)."""
        from infermeter.build.int8.feeds import ModelInputs

        feeds = ModelInputs(spec.inputs, case.input_shapes, case.input_values)
        if self.ref is None:
            return feeds.random(RANDOM_CALIBRATION_SAMPLES, case.settings.seed + 1)
        return feeds.load(self.ref, 300)


def model_is_quantized(spec: ModelSpec) -> bool:
    """True when the model's own graph is already INT8 (QDQ operators, FakeQuantize, quantized tensors, int8
    weights; `ModelSpec.precision`, read with the model): it runs as it is and nothing is quantized on the fly."""
    if spec.precision is not None:
        return spec.precision == "int8"
    if spec.kind == "openvino_ir" and spec.path:
        from infermeter.build.int8.ov_quant import ir_precision

        return ir_precision(Path(spec.path)) == "int8"
    from infermeter.models.convert import onnx_for
    from infermeter.models.spec import onnx_graph_precision

    return onnx_graph_precision(str(onnx_for(spec).path)) == "int8"


def quantize_on_the_fly(spec: ModelSpec, case: Case, quantizer: str = "ort-qdq") -> OnTheFlyInt8:
    """The INT8 graph of `spec` made by `quantizer` (a key of `QUANTIZERS`), built on first use and cached
    (`models.convert.cached_build`). Without `quantize.calib`, the record carries a `random_calibration` warning.

    `ort-qdq` reads `quantize.method=minmax|entropy|percentile` and `quantize.per_channel=on`; NNCF picks its own
    range estimators and per-channel weight scales."""
    return QUANTIZERS[quantizer](spec, case)


def _ort_qdq(spec: ModelSpec, case: Case, tensorrt: bool = False) -> OnTheFlyInt8:
    """ONNX Runtime's static QDQ quantizer on the model's ONNX form: a QDQ .onnx. With `tensorrt`, the graph
    TensorRT's explicit quantization takes: int8 activations and weights, symmetric (zero points 0), per-channel
    weight scales."""
    from infermeter.backends.options import QUANTIZE_METHOD, QUANTIZE_PER_CHANNEL
    from infermeter.models.convert import cached_build, onnx_for

    calibration = Calibration.of(case)
    method = QUANTIZE_METHOD.value(case)
    per_channel = QUANTIZE_PER_CHANNEL.value(case) or tensorrt
    config = QuantConfig("static", method, per_channel, activations="s8" if tensorrt else "u8", symmetric=tensorrt)
    config.check()
    source = onnx_for(spec).path
    key = {"model": spec.content_hash, "source": file_sha256(source)[:16], "calib": calibration.identity,
           "method": method, "per_channel": per_channel, "tensorrt": tensorrt, "v": 1}  # fmt: skip

    def build(target: Path) -> str:
        calib = calibration.samples(spec, case)
        with tempfile.TemporaryDirectory(prefix="infermeter-otf-") as scratch:
            prepared = Path(scratch) / "fp32.onnx"
            note = preprocess(source, prepared)
            quantize_onnx(prepared, target, config, calib)
            # A wrong build is refused here, before any timing (and never cached): `build_invalid`.
            check_quantized(prepared, target, next(calib.head(1).batches(1)), case.threads, spec.ref, per_channel)
        return f"int8 static QDQ ({method}) calibrated on {calib.source}; {note}"

    quantizer = "trt-qdq" if tensorrt else "ort-qdq"
    return OnTheFlyInt8(cached_build("int8", key, ".onnx", build).path, calibration.warnings, quantizer)


def _nncf(spec: ModelSpec, case: Case) -> OnTheFlyInt8:
    """OpenVINO's NNCF (`nncf.quantize`) on the model as OpenVINO reads it (an IR as it is, else the ONNX form):
    an IR (.xml + .bin) in a cache folder."""
    from infermeter.build.int8.ov_quant import quantize_openvino
    from infermeter.models.convert import cached_build, onnx_for

    calibration = Calibration.of(case)
    source = Path(spec.path) if spec.kind == "openvino_ir" and spec.path else onnx_for(spec).path
    source_id = spec.content_hash if spec.kind == "openvino_ir" else file_sha256(source)[:16]
    key = {"model": spec.content_hash, "source": source_id, "calib": calibration.identity,
           "nncf": version("nncf"), "openvino": version("openvino"), "v": 2}  # fmt: skip

    def build(target: Path) -> str:
        calib = calibration.samples(spec, case)
        note = quantize_openvino(source, target / IR_FILE, QuantConfig("static", "minmax"), calib)
        # Read back as OpenVINO reads it and compared with FP32 before any timing (never cached): `build_invalid`.
        check_openvino_ir(source, target / IR_FILE, next(calib.head(1).batches(1)), case.threads, spec.ref)
        return f"int8 by NNCF: {note}, calibrated on {calib.source}"

    folder = cached_build("int8-nncf", key, "/", build).path
    return OnTheFlyInt8(folder / IR_FILE, calibration.warnings, "nncf")


# The on-the-fly quantizers by the name a backend gives in `int8_quantizer`.
QUANTIZERS: dict[str, Callable[[ModelSpec, Case], OnTheFlyInt8]] = {
    "ort-qdq": _ort_qdq,
    "trt-qdq": lambda spec, case: _ort_qdq(spec, case, tensorrt=True),
    "nncf": _nncf,
}


def _data_identity(ref: str) -> str:
    path = Path(ref.rpartition(":")[0] if ".py:" in ref else ref)
    if path.is_file():
        return f"{ref}@{file_sha256(path)[:16]}"
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return f"{ref}@{len(files)}:{max((p.stat().st_mtime_ns for p in files), default=0)}"
    return ref


__all__ = ["METHODS", "QUANTIZERS", "Calibration", "OnTheFlyInt8", "model_is_quantized", "quantize_on_the_fly"]
