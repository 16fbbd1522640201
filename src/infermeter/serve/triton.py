"""Triton's extensions of the KServe v2 protocol, as the messages of Triton's own protobufs (`tritonclient`'s
generated `model_config_pb2` and `service_pb2`): model configuration, repository index and the JSON that Triton's
HTTP endpoints give for those messages. The gRPC service sends the messages; HTTP sends `message_json(...)`.

References: Triton's `extension_model_configuration.md`, `extension_model_repository.md`, `model_config.proto`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.core.errors import UsageError

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from tritonclient.grpc import model_config_pb2, service_pb2

    from infermeter.serve.model import ServedModel

CONFIG = "config.pbtxt"


def message_json(message: Message) -> dict[str, Any]:
    """A message as Triton's HTTP endpoints write it: proto field names, every scalar field (defaults too), enums
    by name and 64-bit integers as JSON numbers (protobuf's own JSON mapping writes them as strings; Triton's
    `ModelConfigToJson` turns them back into numbers, and tritonclient's users read them as numbers)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            out[field.name] = {key: _json_value(entry.fields_by_name["value"], v) for key, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_json_value(field, v) for v in value]
        elif entry is not None:
            if message.HasField(field.name):
                out[field.name] = message_json(value)
        elif field.containing_oneof is None or message.HasField(field.name):
            out[field.name] = _json_value(field, value)
    return out


def _json_value(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return message_json(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name if value in field.enum_type.values_by_number else value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value


def read_config(path: Path) -> model_config_pb2.ModelConfig:
    """A repository's config.pbtxt as Triton's ModelConfig (the name filled in from its folder, as Triton does)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    try:
        config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    if not config.name:
        config.name = path.parent.name
    return config


def derived_config(model: ServedModel) -> model_config_pb2.ModelConfig:
    """The ModelConfig Triton would report for a model served without a repository: its inputs and outputs,
    max_batch_size (0 when an input has no batch axis), the dynamic batcher's delay and the worker count."""
    from tritonclient.grpc import model_config_pb2

    from infermeter.backends.registry import get_backend
    from infermeter.serve.protocol import datatype_of

    settings = model.config
    batched = all(spec.batch_axis == 0 for spec in model.spec.inputs)
    max_batch = settings.max_batch if batched else 0
    config = model_config_pb2.ModelConfig(
        name=model.name,
        platform=f"infermeter_{settings.backend}",
        backend=settings.backend,
        max_batch_size=max_batch,
    )
    for spec in model.spec.inputs:
        dims = [d if isinstance(d, int) else -1 for d in spec.shape][1 if batched else 0 :]
        data_type = model_config_pb2.DataType.Value(f"TYPE_{datatype_of(spec.dtype)}")
        config.input.add(name=spec.name, data_type=data_type, dims=dims)
    types = dict(model_config_pb2.DataType.items())
    for meta in model.metadata()["outputs"]:  # known after the warm-up; TYPE_INVALID before
        shape = list(meta["shape"])[1 if batched else 0 :]
        config.output.add(name=meta["name"], data_type=types.get(f"TYPE_{meta['datatype']}", 0), dims=shape)
    if max_batch > 1:
        config.dynamic_batching.max_queue_delay_microseconds = round(settings.max_delay_ms * 1000)
    on_gpu = get_backend(settings.backend).device == "cuda"
    kind = model_config_pb2.ModelInstanceGroup.KIND_GPU if on_gpu else model_config_pb2.ModelInstanceGroup.KIND_CPU
    config.instance_group.add(name=model.name, count=settings.workers, kind=kind)
    return config


def repository_index(
    name: str, state: str, reason: str, repository: str | None
) -> list[service_pb2.RepositoryIndexResponse.ModelIndex]:
    """The served model (with its state: READY, LOADING or UNAVAILABLE) and, when a whole repository was given,
    its other models as UNAVAILABLE: this server runs one model of it."""
    from tritonclient.grpc import service_pb2

    entry = service_pb2.RepositoryIndexResponse.ModelIndex
    models = [entry(name=name, version="1", state=state, reason=reason)]
    if repository is not None:
        for folder in sorted(p.parent for p in Path(repository).glob(f"*/{CONFIG}")):
            if folder.name != name:
                why = f"not served: infermeter serve runs one model (serve {repository} --name {folder.name})"
                models.append(entry(name=folder.name, state="UNAVAILABLE", reason=why))
    return sorted(models, key=lambda m: m.name)
