"""A Triton model repository from a measured case: `<repo>/<name>/config.pbtxt` and `<repo>/<name>/1/<file>`.

Each value of config.pbtxt is written under a comment that says which case and which figure it came from.
Platform and backend names, parameter keys and the ORT graph levels follow Triton's `model_configuration.md`
and the READMEs of `onnxruntime_backend`, `openvino_backend`, `pytorch_backend` and `tensorrt_backend`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from infermeter.backends.onnxruntime import OPT_LEVEL
from infermeter.backends.openvino_backend import HINT, STREAMS
from infermeter.deploy.source import DeploySource, Figure, TensorSpec
from infermeter.errors import UsageError
from infermeter.serve.protocol import datatype_of

VERSION = "1"


@dataclass(frozen=True)
class Platform:
    """How Triton runs one of our engines: `key` is `platform` or `backend`, `name` its value."""

    key: str
    name: str
    filename: str
    kind: str
    # Our engines whose model file can be written: the ONNX the case ran. TensorRT plans and TorchScript files
    # are not kept by bench, so their repository cannot be filled from a results file.
    writable: bool = True


# infermeter's ONNX Runtime level -> the onnxruntime_backend's `optimization.graph.level` (-1 basic, 1 extended,
# 2 disabled); `all` is that backend's default and has no level of its own.
ORT_LEVELS = {"basic": -1, "extended": 1, "disable": 2}
OV_PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
TRT_PRECISIONS = {"fp32": "FP32", "fp16": "FP16", "int8": "INT8"}


@dataclass(frozen=True)
class Parameter:
    """One `parameters { key value }` entry of the backend, with its origin."""

    key: str
    value: str
    origin: str


def platform_for(engine: str) -> Platform:
    """The Triton platform of one of our backends (`Backend.triton`); UsageError for engines Triton has no backend
    for."""
    from infermeter.backends.registry import backend_names, get_backend, inference_backends

    target = get_backend(engine).triton if engine in backend_names() else None
    if target is None:
        deployable = sorted(cls.name for cls in inference_backends() if cls.triton is not None)
        raise UsageError(f"backend {engine} has no Triton backend to deploy to (Triton runs: {', '.join(deployable)})")
    kind = "KIND_GPU" if get_backend(engine).device == "cuda" else "KIND_CPU"
    return Platform(target.key, target.name, target.filename, kind, target.writable)


def engine_parameters(source: DeploySource) -> list[Parameter]:
    """The engine settings the case was measured with, as the Triton backend's own parameter keys."""
    case = source.case
    threads = f"case {case.id}: measured with {case.threads} intra-op thread(s)"
    if case.backend.startswith("onnxruntime"):
        return [
            Parameter("intra_op_thread_count", str(case.threads), threads),
            Parameter("inter_op_thread_count", "1", "infermeter's ONNX Runtime sessions run inter_op_num_threads 1"),
        ]
    if case.backend == "openvino":
        # A quantized file fixes int8 itself; the hint then governs its float layers, as when measured.
        asked = case.precision if case.precision in OV_PRECISION_HINTS else "fp32"
        hint = case.options.get(HINT.key, HINT.default)
        params = [
            Parameter(
                "INFERENCE_PRECISION_HINT",
                OV_PRECISION_HINTS[asked],
                f"case {case.id}: precision {case.precision}, effective {case.precision_effective} (read back)",
            ),
            Parameter("PERFORMANCE_HINT", hint.upper(), f"case {case.id}: openvino.hint {hint}"),
            Parameter("INFERENCE_NUM_THREADS", str(case.threads), threads),
        ]
        if STREAMS.key in case.options:
            streams = case.options[STREAMS.key]
            params.append(Parameter("NUM_STREAMS", streams, f"case {case.id}: openvino.streams {streams}"))
        return params
    if case.backend == "torchscript":
        return [
            Parameter("INTRA_OP_THREAD_COUNT", str(case.threads), threads),
            Parameter("INTER_OP_THREAD_COUNT", "1", "infermeter's PyTorch runs use one inter-op thread"),
        ]
    return []


def _dims(spec: TensorSpec, batched: bool) -> str:
    dims = spec.dims[1:] if batched else spec.dims
    return "[ " + ", ".join(str(d) for d in dims) + " ]"


def _tensor_block(field: str, specs: tuple[TensorSpec, ...], batched: bool, model: str) -> list[str]:
    lines = [f"{field} ["]
    for index, spec in enumerate(specs):
        datatype = datatype_of(spec.dtype)
        shape = ", ".join(str(d) for d in spec.dims)
        lines += [
            "  {",
            f"    # {model}: {spec.name} {spec.dtype}[{shape}] (-1: dynamic)"
            + ("; the batch dim is implied by max_batch_size" if batched else ""),
            f'    name: "{spec.name}"',
            f"    data_type: TYPE_{'STRING' if datatype == 'BYTES' else datatype}",
            f"    dims: {_dims(spec, batched)}",
            "  }" + ("," if index < len(specs) - 1 else ""),
        ]
    return [*lines, "]"]


def batchable(source: DeploySource) -> bool:
    """True when every input and output leads with a dynamic batch dim, as Triton's batching requires."""
    return all(spec.dims and spec.dims[0] == -1 for spec in (*source.inputs, *source.outputs))


def _commented(figure: Figure, line: str, indent: str = "") -> list[str]:
    return [f"{indent}# {figure.origin}", f"{indent}{line}"]


def _batching_lines(source: DeploySource, batched: bool) -> list[str]:
    if not batched:
        return [
            "# max_batch_size 0: the model file has a fixed first dim, so Triton cannot batch it",
            "max_batch_size: 0",
        ]
    batch, delay = int(source.max_batch.value), source.max_delay_ms
    lines = _commented(source.max_batch, f"max_batch_size: {batch}")
    if batch <= 1:
        return [*lines, "# no dynamic_batching: the measured configuration ran one request per batch"]
    if delay is None:
        return [*lines, "# no dynamic_batching: no batching policy was measured (give --load with tune-batching -o)"]
    return [
        *lines,
        "dynamic_batching {",
        *_commented(source.max_batch, f"preferred_batch_size: [ {batch} ]", "  "),
        *_commented(delay, f"max_queue_delay_microseconds: {round(float(delay.value) * 1000)}", "  "),
        "}",
    ]


def _optimization_lines(source: DeploySource) -> list[str]:
    case = source.case
    lines: list[str] = []
    level = case.options.get(OPT_LEVEL.key, OPT_LEVEL.default)
    if case.backend == "onnxruntime":
        if level in ORT_LEVELS:
            origin = f"case {case.id}: onnxruntime.opt_level {level}"
            lines += [f"# {origin}", f"optimization {{ graph {{ level: {ORT_LEVELS[level]} }} }}"]
        else:
            lines.append(f"# case {case.id}: ORT graph level {level}, the onnxruntime backend's default (no field)")
    if case.backend == "onnxruntime-tensorrt":
        mode = TRT_PRECISIONS.get(case.precision, "FP32")
        lines += [
            f"# case {case.id}: precision {case.precision} on the TensorRT execution provider",
            "optimization { execution_accelerators { gpu_execution_accelerator: [ {",
            f'  name: "tensorrt" parameters {{ key: "precision_mode" value: "{mode}" }}',
            "} ] } }",
        ]
    if case.backend == "tensorrt":
        lines.append(f"# case {case.id}: precision {case.precision} is built into the plan itself")
    return lines


def render_config(source: DeploySource) -> str:
    """config.pbtxt for `source`, every value under a comment naming its origin."""
    case = source.case
    platform = platform_for(case.backend)
    batched = batchable(source)
    model = f"{platform.filename} (from {source.model_file.name})"
    lines = [
        f"# Triton model configuration written by `infermeter deploy` from {source.results_path.name}, case {case.id}.",
        "# Each value carries its origin: the case and the figure it was measured as.",
        f'name: "{source.name}"',
        f"# case {case.id}: measured on {case.backend} {case.backend_version or ''}".rstrip()
        + f"; Triton's {platform.key} for it (model_configuration.md)",
        f'{platform.key}: "{platform.name}"',
        f'default_model_filename: "{platform.filename}"',
        *_batching_lines(source, batched),
        *_tensor_block("input", source.inputs, batched, model),
        *_tensor_block("output", source.outputs, batched, model),
        "instance_group [",
        "  {",
        *_commented(source.instances, f"count: {int(source.instances.value)}", "    "),
        f"    kind: {platform.kind}",
        "  }",
        "]",
        *_optimization_lines(source),
    ]
    for parameter in engine_parameters(source):
        lines += [
            f"# {parameter.origin}",
            f'parameters {{ key: "{parameter.key}" value {{ string_value: "{parameter.value}" }} }}',
        ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Repository:
    """The files of a written model repository."""

    root: Path
    config: Path
    model: Path


def write_repository(source: DeploySource, root: Path) -> Repository:
    """Write `<root>/<name>/config.pbtxt` and the model file under version 1."""
    platform = platform_for(source.case.backend)
    if not platform.writable:
        raise UsageError(
            f"case {source.case.id} ran on {source.case.backend}, whose {platform.filename} bench does not keep; "
            "deploy an ONNX Runtime or OpenVINO case (they load the ONNX file that was measured)"
        )
    folder = root / source.name
    version = folder / VERSION
    version.mkdir(parents=True, exist_ok=True)
    model = version / platform.filename
    shutil.copyfile(source.model_file, model)
    config = folder / "config.pbtxt"
    config.write_text(render_config(source))
    return Repository(root, config, model)
