"""INT8 quantization of ONNX models with `onnxruntime.quantization`: static QDQ with calibration, or dynamic.

Static: `quant_pre_process` (shape inference + graph optimisation) first, then `quantize_static` with our
samples behind a `CalibrationDataReader`, QDQ format. Dynamic: `quantize_dynamic` (weights int8, activations
quantized at run time: the usual choice for transformer encoders).
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.backends.options import CALIBRATION_METHODS
from infermeter.core.errors import ModelError, UsageError, describe_exception
from infermeter.models.samples import SampleSet

MODES = ("static", "dynamic")
METHODS = CALIBRATION_METHODS  # declared with the backends' `quantize.method` option, which offers them
# The operators whose quantization changes accuracy and speed: the layers the sensitivity search ranks.
WEIGHTED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


@dataclass(frozen=True)
class QuantConfig:
    """How to quantize: `static` (calibrated) or `dynamic`; calibration method; per-channel weights; node
    names left in float."""

    mode: str = "static"
    method: str = "minmax"
    per_channel: bool = False
    exclude: tuple[str, ...] = ()
    # uint8 activations with int8 weights (U8S8) is what ONNX Runtime's x86 kernels run fastest (VNNI/AMX);
    # s8 (S8S8) is the portable choice for other CPUs and execution providers.
    activations: str = "u8"
    # Symmetric ranges (zero points 0) for activations and weights: what TensorRT's INT8 Q/DQ layers take.
    symmetric: bool = False

    def check(self) -> None:
        """UsageError for a mode or method this module does not know."""
        if self.mode not in MODES:
            raise UsageError(f"--mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.method not in METHODS:
            raise UsageError(f"--method {self.method!r} is not one of {', '.join(METHODS)}")
        if self.activations not in ("u8", "s8"):
            raise UsageError(f"--activations {self.activations!r} is not one of u8, s8")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The quantization tools log and print per node; keep the CLI's output readable."""
    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _scratch_cwd() -> Iterator[None]:
    """Run ORT's quantization tools from a scratch folder that is removed afterwards: they round-trip large models
    through external-data files named by uuid, and some land in the working directory (90 MB each for MiniLM)."""
    with tempfile.TemporaryDirectory(prefix="infermeter-quant-") as scratch, contextlib.chdir(scratch):
        yield


def preprocess(source: Path, target: Path) -> str:
    """`quant_pre_process` (symbolic shape inference and ORT's basic graph optimisations, e.g. folding
    BatchNorm into Conv) from `source` to `target`; on failure the model is copied as is. Returns a note."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    source, target = source.resolve(), target.resolve()
    try:
        with _quiet(), _scratch_cwd():
            quant_pre_process(str(source), str(target), skip_symbolic_shape=False)
        return "pre-processed with onnxruntime quant_pre_process"
    except Exception as first:
        try:
            with _quiet(), _scratch_cwd():
                quant_pre_process(str(source), str(target), skip_symbolic_shape=True)
            return "pre-processed with onnxruntime quant_pre_process (without symbolic shape inference)"
        except Exception:
            shutil.copyfile(source, target)
            return f"quant_pre_process failed ({type(first).__name__}: {first}); quantized the model as given"


def weighted_nodes(path: Path) -> list[str]:
    """Names of the Conv/Gemm/MatMul nodes of a float ONNX graph, in graph order (unnamed nodes skipped)."""
    return _weighted_names(_graph(path))


def _graph(path: Path) -> Any:
    import onnx

    return onnx.load(str(path), load_external_data=False).graph


def _weighted_names(graph: Any) -> list[str]:
    return [node.name for node in graph.node if node.op_type in WEIGHTED_OPS and node.name]


def layer_groups(path: Path, max_depth: int = 6) -> dict[str, tuple[str, ...]]:
    """Weighted node -> the nodes to leave in float to keep that layer float: itself and the single-input,
    non-weighted nodes (Relu, MaxPool, Reshape...) that feed it since the previous weighted node. Leaving the
    weighted node alone out is not enough: its input tensor is still quantized as the output of the activation
    before it."""
    graph = _graph(path)
    initializers = {i.name for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    groups: dict[str, tuple[str, ...]] = {}
    for node in graph.node:
        if node.op_type not in WEIGHTED_OPS or not node.name:
            continue
        members = [node.name]
        tensor = node.input[0] if node.input else ""
        for _ in range(max_depth):
            before = producer.get(tensor)
            if before is None or before.op_type in WEIGHTED_OPS or not before.name:
                break
            data_inputs = [i for i in before.input if i and i not in initializers and i in producer]
            if len(data_inputs) != 1:  # a join (Add, Concat): the other branch is another layer's business
                break
            members.append(before.name)
            tensor = data_inputs[0]
        groups[node.name] = tuple(members)
    return groups


def _attention_products(graph: Any) -> list[str]:
    """The MatMul nodes whose B is not a constant weight: a transformer's attention products (Q.K^T, scores.V).
    Empty for a CNN or an MLP (a classifier's Softmax head alone does not count)."""
    initializers = {i.name for i in graph.initializer}
    return [n.name for n in graph.node if n.op_type == "MatMul" and n.name and n.input[1] not in initializers]


def _fixed_batch(graph: Any) -> bool:
    init = {i.name for i in graph.initializer}
    for value in graph.input:
        if value.name in init:
            continue
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value"):
            return True
    return False


def _reader(samples: SampleSet, batch_size: int) -> Any:
    from onnxruntime.quantization import CalibrationDataReader

    class _SampleReader(CalibrationDataReader):  # type: ignore[misc]
        """Hands our samples to the calibrator one batch at a time."""

        def __init__(self) -> None:
            self._batches = samples.batches(batch_size)

        def get_next(self) -> dict[str, Any] | None:
            return next(self._batches, None)

        def rewind(self) -> None:
            self._batches = samples.batches(batch_size)

    return _SampleReader()


def _check_exclude(graph: Any, exclude: Sequence[str]) -> None:
    """Refuse `--exclude` names that are not nodes of `graph`, naming some weighted nodes that are."""
    known = set(_weighted_names(graph))
    all_nodes = {n.name for n in graph.node}
    missing = [name for name in exclude if name not in all_nodes]
    if missing:
        hint = ", ".join(sorted(known)[:8]) + (" ..." if len(known) > 8 else "")
        raise UsageError(f"--exclude names node(s) not in the graph: {', '.join(missing)}; weighted nodes: {hint}")


def _quantize_static(
    graph: Any,
    source: Path,
    target: Path,
    config: QuantConfig,
    calib: SampleSet | None,
    calibration_cache: Path | None,
) -> None:
    """Static (QDQ) quantization of `source` into `target`, calibrated on `calib` (ranges cached when asked)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    if calib is None:
        raise UsageError("static quantization needs calibration samples")
    # In attention, per-tensor static ranges ruin the activation x activation products (Q.K^T, scores.V),
    # whose ranges vary with every input, and the Softmax/mask/LayerNorm tensors (all-MiniLM-L6-v2: mean
    # cosine to FP32 0.40). Only the weighted products are quantized there, as dynamic quantization does.
    # (ONNX Runtime's MatMulConstBOnly option is not applied by its QDQ quantizer: the products are
    # excluded by name.)
    products = _attention_products(graph)
    method = {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }[config.method]
    quantize_static(
        str(source),
        str(target),
        # Histogram calibrators stack per-batch outputs and fail on a ragged last batch: feed them one by one.
        _reader(calib, 1 if _fixed_batch(graph) or config.method != "minmax" else 16),
        quant_format=QuantFormat.QDQ,
        per_channel=config.per_channel,
        activation_type=QuantType.QUInt8 if config.activations == "u8" else QuantType.QInt8,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=[*config.exclude, *products],
        calibrate_method=method,
        calibration_providers=["CPUExecutionProvider"],
        calibration_cache_path=str(calibration_cache) if calibration_cache else None,
        op_types_to_quantize=list(WEIGHTED_OPS) if products else None,
        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True} if config.symmetric else None,
    )


def quantize_onnx(
    source: Path,
    target: Path,
    config: QuantConfig,
    calib: SampleSet | None,
    calibration_cache: Path | None = None,
) -> None:
    """Quantize the pre-processed float model `source` into `target` following `config`.

    Static mode needs `calib`; nodes named in `config.exclude` stay in float. With `calibration_cache`, the
    tensor ranges are computed once, saved there, and reused by later calls (same model, same method).
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    config.check()
    # Read once: the sensitivity search calls this for every layer, and a transformer's graph is large.
    graph = _graph(source)
    _check_exclude(graph, config.exclude)
    source, target = source.resolve(), target.resolve()
    calibration_cache = calibration_cache.resolve() if calibration_cache else None
    try:
        with _quiet(), _scratch_cwd():
            if config.mode == "dynamic":
                quantize_dynamic(
                    str(source),
                    str(target),
                    per_channel=config.per_channel,
                    weight_type=QuantType.QInt8,
                    nodes_to_exclude=list(config.exclude),
                )
                return
            _quantize_static(graph, source, target, config, calib, calibration_cache)
    except UsageError:
        raise
    except Exception as exc:
        raise ModelError(f"onnxruntime could not quantize {source.name}: {describe_exception(exc)}") from exc
