"""Reading a Triton model repository for `infermeter serve REPO`: the subset it can run (ONNX Runtime and
OpenVINO models, dynamic batching, instance count, the thread, precision and graph-level settings), checked
against the model file, every mistake one error naming the file and the field."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from infermeter.backends.triton import PRECISION, THREADS, TritonTarget, servable_engines
from infermeter.core.errors import UsageError
from infermeter.deploy.pbtxt import Message, PbtxtError, parse
from infermeter.deploy.source import TensorSpec, onnx_tensors

CONFIG = "config.pbtxt"
# ModelConfig's fields (Triton's model_config.proto): anything else is a misspelling Triton would refuse too.
MODEL_CONFIG_FIELDS = frozenset(
    [
        "name",
        "platform",
        "backend",
        "runtime",
        "version_policy",
        "max_batch_size",
        "input",
        "output",
        "batch_input",
        "batch_output",
        "optimization",
        "dynamic_batching",
        "sequence_batching",
        "ensemble_scheduling",
        "instance_group",
        "default_model_filename",
        "cc_model_filenames",
        "metric_tags",
        "parameters",
        "model_warmup",
        "model_operations",
        "model_transaction_policy",
        "model_repository_agents",
        "response_cache",
    ]
)
# Platform and backend names Triton knows but this server cannot run (Triton's words, not our backends').
KNOWN_ELSEWHERE = frozenset(
    [
        "tensorrt_plan",
        "tensorrt",
        "pytorch_libtorch",
        "pytorch",
        "tensorflow_graphdef",
        "tensorflow_savedmodel",
        "tensorflow",
        "python",
        "ensemble",
        "fil",
        "dali",
        "vllm",
        "tensorrtllm",
    ]
)


@dataclass(frozen=True)
class RepositoryModel:
    """A model of the repository as `infermeter serve` runs it."""

    name: str
    config: Path
    _: KW_ONLY  # the rest by keyword
    model_file: Path
    backend: str
    precision: str
    threads: int
    options: tuple[tuple[str, str], ...]
    max_batch: int
    max_delay_ms: float
    workers: int


class _Fail:
    """Raises UsageError as `FILE: FIELD: message`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, field: str, message: str) -> UsageError:
        return UsageError(f"{self.path}: {field}: {message}")


def is_repository(path: Path) -> bool:
    """True for a model folder (holding config.pbtxt) or a repository of such folders."""
    return path.is_dir() and ((path / CONFIG).is_file() or any(path.glob(f"*/{CONFIG}")))


def _model_dir(path: Path, name: str | None) -> Path:
    if (path / CONFIG).is_file():
        return path
    folders = sorted(p.parent for p in path.glob(f"*/{CONFIG}"))
    if name is not None:
        match = [f for f in folders if f.name == name]
        if match:
            return match[0]
        raise UsageError(f"{path}: no model folder {name!r} (models: {', '.join(f.name for f in folders)})")
    if len(folders) > 1:
        raise UsageError(f"{path} holds {len(folders)} models ({', '.join(f.name for f in folders)}); pick one: --name")
    return folders[0]


def _int(message: Message, field: str, fail: _Fail, default: int = 0, label: str | None = None) -> int:
    value = message.first(field, default)
    if not isinstance(value, int):
        raise fail(label or field, f"must be an integer, got {value!r}")
    return value


def _engine(config: Message, fail: _Fail) -> str:
    for field in ("platform", "backend"):
        value = config.first(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise fail(field, f"must be a string, got {value!r}")
        servable = servable_engines()
        if value in servable:
            return servable[value]
        if value in KNOWN_ELSEWHERE:
            raise fail(field, f"{value!r} runs in Triton only; infermeter serve runs onnxruntime_onnx and openvino")
        raise fail(field, f"unknown {field} {value!r} (infermeter serves onnxruntime_onnx and openvino)")
    raise fail("platform", "neither platform nor backend is set (use platform: \"onnxruntime_onnx\" or backend: "
               "\"openvino\")")  # fmt: skip


def _version_file(folder: Path, config: Message, fail: _Fail) -> Path:
    versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    filename = config.first("default_model_filename", "model.onnx")
    if not versions:
        raise fail("version folder", f"{folder} has no numbered version folder (expected {folder}/1/{filename})")
    path = versions[-1] / str(filename)  # Triton's default version policy serves the latest version
    if not path.is_file():
        raise fail("default_model_filename", f"{path} does not exist")
    if path.suffix != ".onnx":
        raise fail("default_model_filename", f"{path.name}: infermeter serve reads ONNX model files only")
    return path


def _check_tensors(
    config: Message, field: str, model: tuple[TensorSpec, ...], batch: int, fail: _Fail, model_file: Path
) -> None:
    by_name = {spec.name: spec for spec in model}
    entries = config.messages(field)
    if field == "input" and not entries:
        raise fail("input", f"no inputs given (the model's: {', '.join(by_name)})")
    for index, entry in enumerate(entries):
        name = entry.first("name")
        where = f"{field}[{index}]"
        if name not in by_name:
            raise fail(f"{where}.name", f"{name!r} is not a {field} of {model_file.name} ({', '.join(by_name)})")
        spec = by_name[str(name)]
        dims = entry.all("dims")
        if not all(isinstance(d, int) for d in dims):
            raise fail(f"{where}.dims", f"must be integers, got {dims}")
        full = [-1, *dims] if batch > 0 else list(dims)
        shown = f"{list(dims)}" + (" after the batch dim" if batch > 0 else "")
        if len(full) != len(spec.dims) or any(
            c != m and c != -1 and m != -1 for c, m in zip(full, spec.dims, strict=False)
        ):
            raise fail(f"{where}.dims", f"{shown} disagree with {model_file.name}: {name} is {list(spec.dims)}")
        if batch > 0 and spec.dims[0] != -1:
            raise fail("max_batch_size", f"{batch} but {model_file.name} fixes {name}'s first dim to {spec.dims[0]}")
        datatype = entry.first("data_type")
        from infermeter.serve.protocol import datatype_of

        expected = f"TYPE_{datatype_of(spec.dtype)}"
        if datatype != expected:
            raise fail(f"{where}.data_type", f"{datatype} but {model_file.name} has {expected} ({spec.dtype})")


def _parameters(config: Message, fail: _Fail) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in config.messages("parameters"):
        key, value = entry.first("key"), entry.first("value")
        text = value.first("string_value") if isinstance(value, Message) else None
        if not isinstance(key, str) or not isinstance(text, str):
            raise fail("parameters", f"each entry needs key and value {{ string_value }}, got key {key!r}")
        out[key] = text
    return out


def _engine_settings(engine: str, config: Message, fail: _Fail) -> tuple[str, int, dict[str, str]]:
    """Precision, threads per instance and backend options from the parameters and optimization fields, read by
    the engine's own mapping (`Backend.triton`, the one `deploy` writes with)."""
    from infermeter.backends.registry import get_backend

    target = get_backend(engine).triton
    assert target is not None, engine  # servable_engines() holds only backends with a Triton target
    params = _parameters(config, fail)
    threads_parameter = target.parameter(THREADS)
    key = threads_parameter.key if threads_parameter else "threads"
    threads_text = params.get(key, "0")
    if not threads_text.isdigit():
        raise fail(f"parameters[{key}]", f"must be a whole number, got {threads_text!r}")
    precision, options = _precision(target, params, fail), _options(target, params)
    graphs = [g for o in config.messages("optimization") for g in o.messages("graph")]
    if target.graph_level is not None and graphs:
        level = _int(graphs[-1], "level", fail, label="optimization.graph.level")
        ours = {triton: name for name, triton in target.graph_level.levels}
        if level not in ours:
            raise fail("optimization.graph.level", f"{level} is not one of {', '.join(str(n) for n in ours)}")
        options[target.graph_level.option] = ours[level]
    return precision, int(threads_text), options


def _precision(target: TritonTarget, params: dict[str, str], fail: _Fail) -> str:
    parameter = target.parameter(PRECISION)
    if parameter is None:
        return "fp32"
    text = params.get(parameter.key, parameter.triton_value("fp32"))
    precision = parameter.our_value(text)
    if precision is None:
        known = ", ".join(triton for _, triton in parameter.values)
        raise fail(f"parameters[{parameter.key}]", f"{text!r} is not one of {known}")
    return precision


def _options(target: TritonTarget, params: dict[str, str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for parameter in target.parameters:
        if parameter.fixed is not None or parameter.setting in (THREADS, PRECISION):
            continue
        if parameter.key in params or not parameter.only_when_set:
            text = params.get(parameter.key, parameter.triton_value(parameter.default))
            options[parameter.setting] = parameter.our_value(text) or text
    return options


def _batching(config: Message, fail: _Fail) -> tuple[int, float, int]:
    batch = _int(config, "max_batch_size", fail)
    if batch < 0:
        raise fail("max_batch_size", f"must be 0 or more, got {batch}")
    delay_us = 0
    for dynamic in config.messages("dynamic_batching"):
        delay_us = _int(
            dynamic, "max_queue_delay_microseconds", fail, label="dynamic_batching.max_queue_delay_microseconds"
        )
    workers = 0
    for index, group in enumerate(config.messages("instance_group") or [Message()]):
        kind = group.first("kind", "KIND_CPU")
        if kind not in ("KIND_CPU", "KIND_AUTO"):
            raise fail(f"instance_group[{index}].kind", f"{kind}: infermeter serve runs on the CPU")
        workers += _int(group, "count", fail, default=1, label=f"instance_group[{index}].count")
    return batch, delay_us / 1000.0, max(1, workers)


def read_repository(path: Path, name: str | None = None) -> RepositoryModel:
    """One model of a Triton repository (or a model folder) as serve settings; UsageError names the file and
    the field of the first problem."""
    folder = _model_dir(path, name)
    config_path = folder / CONFIG
    fail = _Fail(config_path)
    try:
        config = parse(config_path.read_text())
    except PbtxtError as exc:
        raise UsageError(f"{config_path}: {exc}") from exc
    unknown = sorted(set(config.fields) - MODEL_CONFIG_FIELDS)
    if unknown:
        raise fail(unknown[0], f"not a field of Triton's ModelConfig (line {config.lines[unknown[0]]})")
    declared = config.first("name")
    if declared is not None and declared != folder.name:
        raise fail(
            "name", f"{declared!r} differs from the model folder's name {folder.name!r} (Triton requires both equal)"
        )
    engine = _engine(config, fail)
    model_file = _version_file(folder, config, fail)
    batch, delay_ms, workers = _batching(config, fail)
    inputs, outputs = onnx_tensors(model_file)
    _check_tensors(config, "input", inputs, batch, fail, model_file)
    _check_tensors(config, "output", outputs, batch, fail, model_file)
    precision, threads, options = _engine_settings(engine, config, fail)
    return RepositoryModel(
        name=folder.name,
        config=config_path,
        model_file=model_file,
        backend=engine,
        precision=precision,
        threads=threads * workers,
        options=tuple(sorted(options.items())),
        max_batch=max(1, batch),
        max_delay_ms=delay_ms,
        workers=workers,
    )
