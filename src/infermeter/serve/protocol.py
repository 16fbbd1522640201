"""The Open Inference Protocol (KServe v2 REST) with the binary tensor data extension, as pure functions.

Request: a JSON object `{"id", "parameters", "inputs": [{"name", "shape", "datatype", "data" | "parameters":
{"binary_data_size": N}}], "outputs": [{"name", "parameters": {"binary_data": bool}}]}`. With the binary
extension the JSON is followed, in the same body, by the raw tensors of the inputs that carry `binary_data_size`
(in input order, little-endian, row major), and the `Inference-Header-Content-Length` header gives the JSON's
length. Responses put binary outputs after the JSON the same way. References: kserve.github.io "Open Inference
Protocol" and "Binary Tensor Data Extension"; Triton's `extension_binary_data.md`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

HEADER_LENGTH = "inference-header-content-length"
# The environment variable that gives the server its API key, and `load` the key to send (a bearer token).
API_KEY_VARIABLE = "INFERMETER_API_KEY"

# Protocol datatype <-> numpy dtype. BYTES and BF16 have no numpy form here and are refused with a clear 400.
DATATYPES: dict[str, str] = {
    "BOOL": "bool",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
}
_BY_DTYPE = {dtype: name for name, dtype in DATATYPES.items()}


class ProtocolError(Exception):
    """A request the server refuses; `status` is the HTTP status, the message goes to the client as JSON."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def datatype_of(dtype: np.dtype | str) -> str:
    """The protocol datatype of a numpy dtype (e.g. float32 -> FP32); BYTES for anything without one."""
    return _BY_DTYPE.get(np.dtype(dtype).name, "BYTES")


@dataclass
class InferRequest:
    """A parsed inference request: input tensors by name, the outputs wanted and in which encoding."""

    inputs: dict[str, np.ndarray]
    request_id: str | None = None
    # Output name -> binary? ; empty means every output, encoded as `binary_default` says.
    outputs: dict[str, bool] = field(default_factory=dict)
    binary_default: bool = False


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(400, f"request body is not valid JSON ({exc})") from None
    except RecursionError:
        # Python's parser recurses once per array or object level; a tensor needs at most one level per dim.
        raise ProtocolError(
            400, "request body nests JSON arrays or objects too deeply to parse; send 'data' as a flat list"
        ) from None
    if not isinstance(parsed, dict):
        raise ProtocolError(400, "request body must be a JSON object with an 'inputs' list")
    return parsed


def _shape(entry: dict[str, Any], name: str) -> tuple[int, ...]:
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise ProtocolError(400, f"input {name!r}: 'shape' must be a list of integers, got {shape!r}")
    if any(d < 0 for d in shape):
        raise ProtocolError(400, f"input {name!r}: shape {shape} has a negative dimension")
    return tuple(shape)


def _dtype(entry: dict[str, Any], name: str) -> np.dtype:
    datatype = entry.get("datatype")
    if datatype not in DATATYPES:
        supported = ", ".join(DATATYPES)
        raise ProtocolError(400, f"input {name!r}: datatype {datatype!r} is not supported (use one of {supported})")
    return np.dtype(DATATYPES[datatype])


def _from_json_data(data: Any, dtype: np.dtype, shape: tuple[int, ...], name: str) -> np.ndarray:
    try:
        array = np.asarray(data, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ProtocolError(400, f"input {name!r}: 'data' cannot be read as {datatype_of(dtype)} ({exc})") from None
    if array.size != math.prod(shape):
        raise ProtocolError(
            400, f"input {name!r}: 'data' holds {array.size} values but shape {list(shape)} needs {math.prod(shape)}"
        )
    return array.reshape(shape)


def _split_body(body: bytes, header_length: str | None) -> tuple[dict[str, Any], memoryview]:
    """The JSON document and the binary tensor data after it (none without `header_length`)."""
    if header_length is None:
        return _json_object(body), memoryview(b"")
    try:
        json_length = int(header_length)
    except ValueError:
        raise ProtocolError(400, f"Inference-Header-Content-Length {header_length!r} is not an integer") from None
    if not 0 < json_length <= len(body):
        raise ProtocolError(
            400, f"Inference-Header-Content-Length {json_length} does not fit a body of {len(body)} bytes"
        )
    return _json_object(body[:json_length]), memoryview(body)[json_length:]


def _binary_tensor(
    name: str, shape: tuple[int, ...], dtype: np.dtype, size: Any, binary: memoryview, offset: int
) -> np.ndarray:
    """Input `name` read from `size` bytes of `binary` at `offset` (little-endian), the size checked against its
    shape and datatype."""
    if not isinstance(size, int) or size < 0:
        raise ProtocolError(400, f"input {name!r}: binary_data_size must be a non-negative integer")
    expected = math.prod(shape) * dtype.itemsize
    if size != expected:
        raise ProtocolError(
            400,
            f"input {name!r}: binary_data_size {size} but shape {list(shape)} of "
            f"{datatype_of(dtype)} needs {expected} bytes",
        )
    if offset + size > len(binary):
        raise ProtocolError(400, f"input {name!r}: binary data ends after {len(binary) - offset} of {size} bytes")
    chunk = binary[offset : offset + size]
    return np.frombuffer(chunk, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(shape)


def _parse_inputs(document: dict[str, Any], binary: memoryview) -> dict[str, np.ndarray]:
    """Every entry of the document's 'inputs', from its JSON 'data' or its slice of `binary`, which they must
    claim to the last byte."""
    entries = document.get("inputs")
    if not isinstance(entries, list) or not entries:
        raise ProtocolError(400, "request has no 'inputs' list (each input: name, shape, datatype, data)")
    inputs: dict[str, np.ndarray] = {}
    offset = 0
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ProtocolError(400, "every entry of 'inputs' must be an object with a 'name' string")
        name = entry["name"]
        if name in inputs:
            raise ProtocolError(400, f"input {name!r} is given twice")
        shape, dtype = _shape(entry, name), _dtype(entry, name)
        parameters = entry.get("parameters") or {}
        size = parameters.get("binary_data_size") if isinstance(parameters, dict) else None
        if size is not None:
            inputs[name] = _binary_tensor(name, shape, dtype, size, binary, offset)
            offset += size
        elif "data" in entry:
            inputs[name] = _from_json_data(entry["data"], dtype, shape, name)
        else:
            raise ProtocolError(400, f"input {name!r} has neither 'data' nor a binary_data_size parameter")
    if offset != len(binary):
        raise ProtocolError(400, f"{len(binary) - offset} bytes of binary data are not claimed by any input")
    return inputs


def _requested_outputs(document: dict[str, Any], binary_default: bool) -> dict[str, bool]:
    """Output name -> binary?, for the outputs the request names (empty when it names none)."""
    outputs = document.get("outputs")
    if outputs is None:
        return {}
    if not isinstance(outputs, list):
        raise ProtocolError(400, "'outputs' must be a list of {name, parameters} objects")
    requested: dict[str, bool] = {}
    for entry in outputs:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ProtocolError(400, "every entry of 'outputs' must be an object with a 'name' string")
        out_parameters = entry.get("parameters") or {}
        binary_flag = out_parameters.get("binary_data") if isinstance(out_parameters, dict) else None
        requested[entry["name"]] = binary_default if binary_flag is None else bool(binary_flag)
    return requested


def parse_infer_request(body: bytes, header_length: str | None) -> InferRequest:
    """Parse a request body (JSON, or JSON + binary tensors when `header_length` is given); ProtocolError(400)
    says what is malformed."""
    document, binary = _split_body(body, header_length)
    inputs = _parse_inputs(document, binary)
    parameters = document.get("parameters") or {}
    binary_default = bool(isinstance(parameters, dict) and parameters.get("binary_data_output"))
    return InferRequest(
        inputs=inputs,
        request_id=_optional_str(document.get("id")),
        outputs=_requested_outputs(document, binary_default),
        binary_default=binary_default,
    )


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def encode_infer_response(
    model_name: str,
    outputs: dict[str, np.ndarray],
    binary: dict[str, bool],
    request_id: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """Response body and extra headers: outputs marked binary go after the JSON (binary extension)."""
    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for name, array in outputs.items():
        entry: dict[str, Any] = {"name": name, "datatype": datatype_of(array.dtype), "shape": list(array.shape)}
        if binary.get(name, False):
            raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = array.ravel().tolist()
        entries.append(entry)
    document: dict[str, Any] = {"model_name": model_name, "outputs": entries}
    if request_id is not None:
        document["id"] = request_id
    header = json.dumps(document, separators=(",", ":")).encode()
    if not chunks:
        return header, {"content-type": "application/json"}
    return header + b"".join(chunks), {
        "content-type": "application/octet-stream",
        "inference-header-content-length": str(len(header)),
    }


def encode_binary_request(
    inputs: dict[str, np.ndarray], binary_outputs: bool = True, request_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """A request body using the binary extension for every input (what a fast client sends), and its headers."""
    entries = []
    chunks = []
    for name, array in inputs.items():
        raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        entries.append(
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": datatype_of(array.dtype),
                "parameters": {"binary_data_size": len(raw)},
            }
        )
        chunks.append(raw)
    document: dict[str, Any] = {"inputs": entries}
    if binary_outputs:
        document["parameters"] = {"binary_data_output": True}
    if request_id is not None:
        document["id"] = request_id
    header = json.dumps(document, separators=(",", ":")).encode()
    return header + b"".join(chunks), {
        "content-type": "application/octet-stream",
        "inference-header-content-length": str(len(header)),
    }


def encode_json_request(inputs: dict[str, np.ndarray]) -> bytes:
    """A request body with every input as JSON data (what simple clients such as curl send)."""
    entries = [
        {"name": name, "shape": list(a.shape), "datatype": datatype_of(a.dtype), "data": a.ravel().tolist()}
        for name, a in inputs.items()
    ]
    return json.dumps({"inputs": entries}, separators=(",", ":")).encode()


def decode_infer_response(body: bytes, header_length: str | None) -> dict[str, np.ndarray]:
    """Output tensors of a response body (JSON or binary extension); used by tests and clients."""
    json_length = int(header_length) if header_length is not None else len(body)
    document = json.loads(body[:json_length])
    binary = memoryview(body)[json_length:]
    offset = 0
    outputs: dict[str, np.ndarray] = {}
    for entry in document["outputs"]:
        dtype = np.dtype(DATATYPES[entry["datatype"]])
        size = (entry.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            outputs[entry["name"]] = np.frombuffer(binary[offset : offset + size], dtype=dtype).reshape(entry["shape"])
            offset += size
        else:
            outputs[entry["name"]] = np.asarray(entry["data"], dtype=dtype).reshape(entry["shape"])
    return outputs
