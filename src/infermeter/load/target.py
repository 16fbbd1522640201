"""A served model made ready to load: its metadata read from the server (KServe v2, over HTTP or gRPC), and a few
distinct request bodies pre-built from generated inputs or --data samples."""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from infermeter.core.errors import BackendError, UsageError
from infermeter.load.generator import run_async
from infermeter.load.http_client import ConnectionPool, RequestPool, build_request, fetch
from infermeter.models.dim_defaults import plan_shapes
from infermeter.models.inputs import InputSpec
from infermeter.serve.protocol import DATATYPES, encode_binary_request, encode_json_request

if TYPE_CHECKING:
    from infermeter.core.case import DataSource


@dataclass
class LoadTarget:
    """A served model ready to be loaded: where, what, and a few pre-built distinct request bodies."""

    base_url: str
    model_name: str
    _: KW_ONLY  # the rest by keyword
    metadata: dict[str, Any]
    requests: list[bytes]
    batch: int
    notes: tuple[str, ...] = ()  # the inputs sized by default, and how the request bodies were made from --data
    data: DataSource | None = None
    call_metadata: tuple[tuple[str, str], ...] = ()  # gRPC targets: the API key, sent with every call
    headers: tuple[tuple[str, str], ...] = ()  # HTTP targets: the API key, for the statistics endpoint

    def open_pool(self, max_connections: int) -> RequestPool:
        """Keep-alive HTTP connections, or one gRPC channel for a grpc:// target."""
        if self.base_url.startswith("grpc://"):
            from infermeter.load.grpc_client import GrpcPool

            return GrpcPool(self.base_url.removeprefix("grpc://"), self.call_metadata)
        return ConnectionPool(self.base_url, max_connections)

    @property
    def backend(self) -> str:
        """The serving backend (infermeter servers say; others: `remote`)."""
        return str((self.metadata.get("parameters") or {}).get("backend") or "remote")

    @property
    def precision_effective(self) -> str | None:
        """What the server says it computes in, when it says."""
        value = (self.metadata.get("parameters") or {}).get("precision_effective")
        return str(value) if value else None

    @property
    def precision(self) -> str:
        """The requested precision, when the server says; else fp32."""
        return str((self.metadata.get("parameters") or {}).get("precision") or "fp32")


def split_target_url(url: str, model_name: str | None) -> tuple[str, str | None]:
    """(base URL, model name) from `http://host:port[/v2/models/NAME[/...]]` and an optional --model-name."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise UsageError(
            f"TARGET {url!r} is not an http:// or grpc:// URL (https is not supported by the load generator)"
        )
    base = f"http://{parts.hostname}:{parts.port or 80}"
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) >= 3 and segments[:2] == ["v2", "models"]:
        model_name = model_name or segments[2]
    return base, model_name


def _auth(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _metadata_inputs(metadata: dict[str, Any]) -> list[InputSpec]:
    """The model's inputs as the server's metadata declares them, each free dim named for its own input."""
    inputs = []
    for entry in metadata.get("inputs", []):
        if entry.get("datatype") not in DATATYPES:
            raise UsageError(f"input {entry.get('name')!r} has datatype {entry.get('datatype')}, unsupported here")
        # KServe metadata gives -1 for a free dim, without its name. Inputs of one rank and kind share theirs by
        # axis, as input_ids, attention_mask and token_type_ids do: --input input_ids:1x64 sizes the mask too.
        kind = "int" if DATATYPES[entry["datatype"]].startswith(("int", "uint")) else "other"
        rank = len(entry["shape"])
        dims = tuple(
            d if d >= 0 else ("batch" if axis == 0 else f"free{axis}/rank{rank}/{kind}")
            for axis, d in enumerate(entry["shape"])
        )
        inputs.append(InputSpec(entry["name"], DATATYPES[entry["datatype"]], shape=dims))
    return inputs


def _http_requests(
    base: str, name: str, feed_sets: list[dict[str, Any]], use_json: bool, headers: dict[str, str]
) -> list[bytes]:
    """A whole HTTP request (binary-tensor or JSON body) to the model's infer endpoint for each set of feeds."""
    path = f"/v2/models/{name}/infer"
    parts = urlsplit(base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    requests = []
    for feeds in feed_sets:
        if use_json:
            body, extra = encode_json_request(feeds), {"Content-Type": "application/json"}
        else:
            body, extra = encode_binary_request(feeds)
        requests.append(build_request(host, port, "POST", path, body, {**extra, **headers}))
    return requests


def prepare_target(
    url: str,
    model_name: str | None = None,
    batch: int = 1,
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = (),
    use_json: bool = False,
    api_key: str | None = None,
    seed: int = 0,
    distinct: int = 8,
    input_values: tuple[tuple[str, str], ...] = (),
    data: str | None = None,
) -> LoadTarget:
    """Read the model's metadata from the server and pre-build `distinct` request bodies of `batch` rows:
    generated, or `batch` samples of `data` each (as many bodies as the samples fill, up to MAX_DATA_REQUESTS);
    `input_values` set constant inputs, and the constants the server fills in itself are left out."""
    headers = _auth(api_key)
    grpc = url.startswith("grpc://")
    if grpc:
        from infermeter.load.grpc_client import call_metadata, grpc_model_metadata, split_grpc_url

        if use_json:
            raise UsageError("--json is for HTTP targets: gRPC carries tensors as raw bytes")
        address, name = split_grpc_url(url, model_name)
        base = f"grpc://{address}"
        name, metadata = grpc_model_metadata(address, name, api_key)
    else:
        base, name, metadata = _http_metadata(url, model_name, headers)
    inputs = _metadata_inputs(metadata)
    feed_sets, notes, source = _request_feeds(metadata, inputs, batch, input_shapes, input_values, data, seed, distinct)
    if grpc:
        from infermeter.serve.grpc_protocol import encode_grpc_request

        requests = [encode_grpc_request(name, feeds).SerializeToString() for feeds in feed_sets]
        return LoadTarget(
            base,
            name,
            metadata=metadata,
            requests=requests,
            batch=batch,
            notes=notes,
            data=source,
            call_metadata=call_metadata(api_key),
        )
    requests = _http_requests(base, name, feed_sets, use_json, headers)
    return LoadTarget(
        base,
        name,
        metadata=metadata,
        requests=requests,
        batch=batch,
        notes=notes,
        data=source,
        headers=tuple(headers.items()),
    )


def _http_metadata(url: str, model_name: str | None, headers: dict[str, str]) -> tuple[str, str, dict[str, Any]]:
    """(base URL, model name, model metadata) of an HTTP target."""
    base, name = split_target_url(url, model_name)

    async def get(path: str) -> tuple[int, bytes]:
        return await fetch(base + path, headers=headers)

    try:
        if name is None:
            status, body = run_async(lambda: get("/v2"))
            models = json.loads(body).get("models") if status == 200 else None
            if not models:
                raise UsageError(f"{base} does not list its models; give the model with --model-name NAME")
            name = str(models[0])
        status, body = run_async(lambda: get(f"/v2/models/{name}"))
    except OSError as exc:
        raise BackendError(f"cannot reach {base}: {exc.strerror or exc}") from exc
    if status != 200:
        raise BackendError(f"{base}/v2/models/{name} answered HTTP {status}: {body[:200].decode(errors='replace')}")
    return base, name, json.loads(body)


# Request bodies made from --data at most: enough to rotate a few hundred samples without holding a data set twice.
MAX_DATA_REQUESTS = 64


def _request_feeds(
    metadata: dict[str, Any],
    inputs: list[InputSpec],
    batch: int,
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...],
    values: tuple[tuple[str, str], ...],
    data: str | None,
    seed: int,
    distinct: int,
) -> tuple[list[dict[str, Any]], tuple[str, ...], DataSource | None]:
    """The feeds of the request bodies, the note on how --data was used, and its DataSource."""
    from infermeter.models.feeds_data import (
        batched_sets,
        check_input_values,
        data_inputs,
        data_note,
        generated_feed_sets,
        open_data,
        with_constants,
    )

    server_fills = (metadata.get("parameters") or {}).get("constant_inputs") or {}
    given = dict(values)
    sent = [spec for spec in inputs if spec.name not in server_fills or spec.name in given]
    check_input_values(sent, values)
    if data is None:
        shapes, sizing = plan_shapes(sent, batch, input_shapes)
        return generated_feed_sets(sent, values, shapes, distinct, seed), (sizing,) if sizing else (), None
    source, samples = open_data(sent, values, data)
    count = min(max(distinct, -(-samples.count // batch)), MAX_DATA_REQUESTS)
    constant = [spec for spec in sent if spec not in data_inputs(sent, values)]
    shapes, sizing = plan_shapes(constant, batch, input_shapes) if constant else ({}, None)
    feed_sets = with_constants(sent, values, shapes, batched_sets(sent, samples, batch, count))
    note = data_note(source, batch, count, f"at most {MAX_DATA_REQUESTS} distinct requests are prepared")
    return feed_sets, tuple(n for n in (sizing, note) if n), source
