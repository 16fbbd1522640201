"""A Triton model repository from a measured case: `<repo>/<name>/config.pbtxt` and `<repo>/<name>/1/<file>`.

Each value of config.pbtxt is written under a comment that says which case and which figure it came from.
Platform and backend names, parameter keys and the ORT graph levels follow Triton's `model_configuration.md`
and the READMEs of `onnxruntime_backend`, `openvino_backend`, `pytorch_backend` and `tensorrt_backend`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from infermeter.backends.triton import PRECISION, THREADS, TritonTarget
from infermeter.core.errors import UsageError
from infermeter.deploy.source import DeploySource, Figure, TensorSpec
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


# The TensorRT accelerator's precision_mode for a case's precision.
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


def _target(engine: str) -> TritonTarget:
    from infermeter.backends.registry import get_backend

    target = get_backend(engine).triton
    if target is None:  # platform_for refused it before anything was written
        raise UsageError(f"backend {engine} has no Triton backend to deploy to")
    return target


def engine_parameters(source: DeploySource) -> list[Parameter]:
    """The engine settings the case was measured with, as the Triton backend's own parameter keys
    (`TritonTarget.parameters` of the case's backend)."""
    case = source.case
    params: list[Parameter] = []
    for parameter in _target(case.backend).parameters:
        if parameter.fixed is not None:
            params.append(Parameter(parameter.key, parameter.fixed, parameter.why))
        elif parameter.setting == THREADS:
            origin = f"case {case.id}: measured with {case.threads} intra-op thread(s)"
            params.append(Parameter(parameter.key, str(case.threads), origin))
        elif parameter.setting == PRECISION:
            origin = f"case {case.id}: precision {case.precision}, effective {case.precision_effective} (read back)"
            params.append(Parameter(parameter.key, parameter.triton_value(case.precision), origin))
        elif parameter.setting in case.options or not parameter.only_when_set:
            value = case.options.get(parameter.setting, parameter.default)
            origin = f"case {case.id}: {parameter.setting} {value}"
            params.append(Parameter(parameter.key, parameter.triton_value(value), origin))
    return params


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
    target = _target(case.backend)
    lines: list[str] = []
    if target.graph_level is not None:
        level = case.options.get(target.graph_level.option, target.graph_level.default)
        levels = dict(target.graph_level.levels)
        if level in levels:
            origin = f"case {case.id}: {target.graph_level.option} {level}"
            lines += [f"# {origin}", f"optimization {{ graph {{ level: {levels[level]} }} }}"]
        else:
            lines.append(f"# case {case.id}: ORT graph level {level}, the onnxruntime backend's default (no field)")
    if target.accelerator is not None:
        mode = TRT_PRECISIONS.get(case.precision, "FP32")
        lines += [
            f"# case {case.id}: precision {case.precision} on the TensorRT execution provider",
            "optimization { execution_accelerators { gpu_execution_accelerator: [ {",
            f'  name: "{target.accelerator}" parameters {{ key: "precision_mode" value: "{mode}" }}',
            "} ] } }",
        ]
    if target.precision_in_file:
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
