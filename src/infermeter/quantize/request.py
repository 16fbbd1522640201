"""What `infermeter quantize` is asked (`QuantizeRequest`) and what it gives back (`QuantizeOutcome`, one `ModelRow`
per variant), the quantizer each engine runs, and the request's checks before any slow step. The pipeline that
fills the outcome is `quantize.pipeline`."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from infermeter.build.int8.ort_quant import QuantConfig
from infermeter.core.errors import UsageError
from infermeter.models.input_flags import Sizes, Values
from infermeter.quantize.evaluate import Accuracy
from infermeter.quantize.sensitivity import FrontierPoint, LayerSensitivity
from infermeter.quantize.study_data import CALIB_SAMPLES, EVAL_SAMPLES
from infermeter.results.schema import CaseResult, CaseWarning


def quantize_engines() -> list[str]:
    """The backends whose framework ships an INT8 quantizer (`Backend.quantizer`): the `--engine` values."""
    from infermeter.backends.registry import inference_backends

    return [cls.name for cls in inference_backends() if cls.quantizer]


# What each quantizer of the study writes. An engine names its own (`Backend.int8_quantizer`); one that names none
# quantizes with ONNX Runtime's static QDQ, the graph every ONNX engine reads.
QDQ, NNCF = "ort-qdq", "nncf"
QUANTIZED_FILE = {QDQ: ".onnx", NNCF: ".xml"}


def quantizer_of(engine: str) -> str:
    """The quantizer `--engine ENGINE` runs (its backend's own, else ONNX Runtime's QDQ)."""
    from infermeter.backends.registry import get_backend

    return get_backend(engine).int8_quantizer or QDQ


@dataclass(frozen=True)
class QuantizeRequest:
    """Everything `infermeter quantize` was asked to do."""

    model: str
    output: Path
    _: KW_ONLY  # the rest by keyword
    engine: str = "onnxruntime"
    config: QuantConfig = field(default_factory=QuantConfig)
    calib: str | None = None
    calib_size: int = CALIB_SAMPLES
    eval: str | None = None
    eval_size: int = EVAL_SAMPLES
    sensitivity: bool = False
    max_drop_pct: float | None = None
    finetune: str | None = None
    finetune_epochs: int = 3
    latency: bool = True
    threads: int = 1
    seed: int = 0
    input_shapes: Sizes = ()  # --input NAME:DIMS: the generated samples' shapes
    input_values: Values = ()  # --input NAME=VALUE: constant inputs the data need not hold
    reshape: Sizes = ()  # --reshape NAME:DIMS: the model's declared dims rewritten before anything runs


@dataclass
class ModelRow:
    """One variant (FP32, INT8, mixed, QAT): where it is, what it computes in, how accurate and how fast."""

    role: str
    label: str
    _: KW_ONLY  # the rest by keyword
    path: Path
    precision: str
    accuracy: Accuracy | None = None
    timing: CaseResult | None = None
    float_nodes: tuple[str, ...] = ()


@dataclass
class QuantizeOutcome:
    """What `quantize_model` did: rows, warnings, notes, the sensitivity ranking and the frontier."""

    output: Path
    rows: list[ModelRow] = field(default_factory=list)
    _: KW_ONLY  # the rest by keyword
    warnings: list[CaseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sensitivity: list[LayerSensitivity] = field(default_factory=list)
    frontier: list[FrontierPoint] = field(default_factory=list)
    budget_met: bool | None = None


def check_request(request: QuantizeRequest) -> None:
    """UsageError for combinations that cannot work, before any slow step."""
    request.config.check()
    engines = quantize_engines()
    if request.engine not in engines:
        raise UsageError(f"--engine {request.engine!r} is not one of {', '.join(engines)}")
    if request.calib_size <= 0:
        raise UsageError(f"--calib-size {request.calib_size} must be positive")
    if request.eval_size <= 0:
        raise UsageError(f"--eval-size {request.eval_size} must be positive")
    if request.max_drop_pct is not None and request.max_drop_pct < 0:
        raise UsageError(f"--max-drop {request.max_drop_pct:g} must be zero or more (percentage points)")
    quantizer = quantizer_of(request.engine)
    if quantizer == NNCF and request.sensitivity:
        raise UsageError(
            f"--sensitivity re-quantizes per layer with ONNX Runtime's quantizer; --engine {request.engine} "
            "quantizes with NNCF, whose own accuracy control --max-drop runs"
        )
    if quantizer != NNCF and request.model.lower().endswith(".xml"):
        raise UsageError(f"{request.model} is an OpenVINO IR: only NNCF quantizes it (--engine openvino)")
    if request.finetune and request.config.mode != "static":
        raise UsageError("--finetune fine-tunes for static quantization; drop --mode dynamic")
    suffix = request.output.suffix.lower()
    wanted = QUANTIZED_FILE[quantizer]
    if suffix != wanted:
        raise UsageError(f"-o {str(request.output)!r}: --engine {request.engine} writes a {wanted} file")
