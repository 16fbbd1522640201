"""TensorRT's engine, apart from running it: the optimization profile (min/opt/max shapes per input, trtexec's
syntax), the options that shape the build, per-layer FP32 constraints, the engine's cache key and the builder
call. All but `build_engine` is pure and tested without a GPU; `tensorrt_backend` runs what this builds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infermeter.backends._common import case_shapes
from infermeter.backends.options import Integer, Text
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, InputSpecError
from infermeter.models.spec import ModelSpec

ProfileShapes = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


def parse_shape_list(text: str, option: str) -> dict[str, tuple[int, ...]]:
    """`input:1x3x224x224,mask:1x128` (trtexec's --minShapes syntax) -> {name: dims}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, dims = item.rpartition(":")
        try:
            parsed = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            parsed = ()
        if not sep or not name or not parsed or any(d <= 0 for d in parsed):
            raise InputSpecError(f"{option}: {item!r} is not NAME:DxDxD (e.g. input:1x3x224x224)")
        shapes[name] = parsed
    return shapes


def _shape_option(which: str) -> Text:
    key = f"tensorrt.{which}_shapes"
    return Text(key=key, help=f"{which} shapes of the optimization profile, any input (trtexec --{which}Shapes)",
                describe="NAME:DxDxD,...", check=lambda text: parse_shape_list(text, key))  # fmt: skip


PROFILE_WHICH = ("min", "opt", "max")
SHAPE_OPTIONS = {which: _shape_option(which) for which in PROFILE_WHICH}
WORKSPACE_MB = Integer(key="tensorrt.workspace_mb", default=2048, minimum=1, help="builder workspace pool, MiB")
FP32_LAYERS = Text(key="tensorrt.fp32_layers", describe="path",
                   help="at fp16: a JSON file whose `fp32_layers` list names layers kept in fp32 (per-layer precision "
                        "constraints; `infermeter quantize --to fp16` writes it)")  # fmt: skip


def fp32_layers_of(path: str | None) -> list[str]:
    """The `fp32_layers` list of a study's TensorRT constraints file (none without a file)."""
    if not path:
        return []
    import json

    try:
        return [str(name) for name in json.loads(Path(path).read_text())["fp32_layers"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackendError(f"tensorrt.fp32_layers={path}: not a file with an fp32_layers list ({exc})") from exc


def constrain_layers(trt: Any, network: Any, config: Any, names: list[str]) -> list[str]:
    """Per-layer precision constraints: the layers named `names` (TensorRT's ONNX parser names a layer after its
    node) compute and write their outputs in FP32, and the builder must obey (OBEY_PRECISION_CONSTRAINTS).
    Returns the names that match no layer of `network`."""
    wanted = set(names)
    found: set[str] = set()
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        if layer.name not in wanted:
            continue
        found.add(layer.name)
        layer.precision = trt.float32
        for output in range(layer.num_outputs):
            layer.set_output_type(output, trt.float32)
    if found:
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    return sorted(wanted - found)


def profile_shapes(model: ModelSpec, case: Case) -> ProfileShapes:
    """min/opt/max shapes of the optimization profile for every input.

    Static mode: all three are the case's shapes. Dynamic mode: the batch axis ranges 1..case.batch with
    opt = case.batch, other symbolic dims stay at the case's size; options `tensorrt.min_shapes`,
    `tensorrt.opt_shapes`, `tensorrt.max_shapes` (trtexec syntax) override any input."""
    shapes = case_shapes(model, case)
    profile: ProfileShapes = {}
    for spec in model.inputs:
        opt = shapes[spec.name]
        smallest = list(opt)
        if (
            case.shape_mode == "dynamic"
            and spec.batch_axis is not None
            and isinstance(spec.shape[spec.batch_axis], str)
        ):
            smallest[spec.batch_axis] = 1
        profile[spec.name] = (tuple(smallest), opt, opt)
    overrides = {
        which: parse_shape_list(option.value(case) or "", option.key) for which, option in SHAPE_OPTIONS.items()
    }
    for index, which in enumerate(PROFILE_WHICH):
        for name, dims in overrides[which].items():
            if name not in profile:
                raise InputSpecError(f"tensorrt.{which}_shapes names {name!r}; the model's inputs are {list(profile)}")
            if len(dims) != len(profile[name][0]):
                raise InputSpecError(f"tensorrt.{which}_shapes: {name} needs {len(profile[name][0])} dims")
            triple: list[tuple[int, ...]] = list(profile[name])
            triple[index] = dims
            profile[name] = (triple[0], triple[1], triple[2])
    for name, (low, opt, high) in profile.items():
        if not all(a <= b <= c for a, b, c in zip(low, opt, high, strict=True)):
            raise InputSpecError(f"TensorRT profile for {name}: need min <= opt <= max, got {low}, {opt}, {high}")
    return profile


def engine_cache_key(
    model: ModelSpec, precision: str, profile: ProfileShapes, trt_version: str, gpu: str
) -> dict[str, object]:
    """What an engine depends on: model content, TensorRT version, precision, profile shapes and the GPU."""
    return {
        "model": model.content_hash,
        "tensorrt": trt_version,
        "precision": precision,
        "profile": {name: [list(s) for s in shapes] for name, shapes in sorted(profile.items())},
        "gpu": gpu,
    }


def build_engine(
    trt: Any, onnx_path: str, precision: str, profile: ProfileShapes, workspace_mb: int, fp32_layers: Sequence[str] = ()
) -> bytes:
    """Build and serialize an engine (raises BackendError with the parser's or builder's errors); at fp16, the
    layers `fp32_layers` are constrained to FP32 (`constrain_layers`)."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    major = int(trt.__version__.split(".")[0])
    # TensorRT 10 networks are always explicit-batch; 11 only builds strongly typed ones (flag ignored there).
    flags = 0
    if major >= 11 or precision == "int8":
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(onnx_path):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BackendError(f"TensorRT could not parse the ONNX model: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mb << 20)
    if precision == "fp16" and major < 11:
        config.set_flag(trt.BuilderFlag.FP16)
        missing = constrain_layers(trt, network, config, list(fp32_layers))
        if missing:
            raise BackendError(f"tensorrt.fp32_layers names no layer of this network: {', '.join(missing[:5])}")
    optimization_profile = builder.create_optimization_profile()
    for name, (low, opt, high) in profile.items():
        optimization_profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(optimization_profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BackendError("TensorRT could not build an engine for this model (see the TensorRT log above)")
    return bytes(serialized)
