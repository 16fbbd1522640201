"""The KServe v2 gRPC messages (`inference.ModelInferRequest` / `ModelInferResponse`, as generated in
`tritonclient.grpc.service_pb2`) to and from numpy, as pure functions; and HTTP statuses as gRPC status codes.

A request carries each input's tensor either in `raw_input_contents` (one bytes entry per input, in input order,
little-endian, row major) or in the input's typed `contents` (`fp32_contents`, `int64_contents` ...). Outputs go
back in `raw_output_contents`, as Triton sends them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.serve.protocol import DATATYPES, InferRequest, ProtocolError, datatype_of

if TYPE_CHECKING:
    import grpc
    from tritonclient.grpc import service_pb2

# Protocol datatype -> the InferTensorContents field that carries it (FP16 has none: raw contents only).
TYPED_CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
}


def status_code(http_status: int) -> grpc.StatusCode:
    """The gRPC status of a refusal the HTTP endpoints answer with `http_status`."""
    import grpc

    codes = {
        400: grpc.StatusCode.INVALID_ARGUMENT,
        401: grpc.StatusCode.UNAUTHENTICATED,
        404: grpc.StatusCode.NOT_FOUND,
        413: grpc.StatusCode.RESOURCE_EXHAUSTED,
        503: grpc.StatusCode.UNAVAILABLE,
    }
    return codes.get(http_status, grpc.StatusCode.INTERNAL)


def _input_array(tensor: Any, raw: bytes | None) -> np.ndarray:
    name = tensor.name
    if tensor.datatype not in DATATYPES:
        supported = ", ".join(DATATYPES)
        raise ProtocolError(
            400, f"input {name!r}: datatype {tensor.datatype!r} is not supported (use one of {supported})"
        )
    dtype = np.dtype(DATATYPES[tensor.datatype])
    shape = tuple(int(d) for d in tensor.shape)
    if any(d < 0 for d in shape):
        raise ProtocolError(400, f"input {name!r}: shape {list(shape)} has a negative dimension")
    count = math.prod(shape)
    if raw is not None:
        if len(raw) != count * dtype.itemsize:
            raise ProtocolError(
                400,
                f"input {name!r}: raw_input_contents holds {len(raw)} bytes but shape {list(shape)} of "
                f"{tensor.datatype} needs {count * dtype.itemsize}",
            )
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(shape)
    field = TYPED_CONTENTS.get(tensor.datatype)
    if field is None:
        raise ProtocolError(400, f"input {name!r}: {tensor.datatype} travels in raw_input_contents only")
    values = getattr(tensor.contents, field)
    if len(values) != count:
        raise ProtocolError(
            400, f"input {name!r}: contents.{field} holds {len(values)} values but shape {list(shape)} needs {count}"
        )
    try:
        return np.asarray(values, dtype=dtype).reshape(shape)
    except OverflowError as exc:
        raise ProtocolError(400, f"input {name!r}: contents.{field} do not fit {tensor.datatype} ({exc})") from None


def parse_grpc_request(request: service_pb2.ModelInferRequest) -> InferRequest:
    """The inputs and requested outputs of a ModelInferRequest; ProtocolError(400) says what is malformed."""
    if not request.inputs:
        raise ProtocolError(400, "request has no inputs (each input: name, datatype, shape, contents)")
    raws = list(request.raw_input_contents)
    if raws and len(raws) != len(request.inputs):
        raise ProtocolError(
            400, f"{len(raws)} raw_input_contents for {len(request.inputs)} inputs: give one per input, in order"
        )
    inputs: dict[str, np.ndarray] = {}
    for index, tensor in enumerate(request.inputs):
        if tensor.name in inputs:
            raise ProtocolError(400, f"input {tensor.name!r} is given twice")
        inputs[tensor.name] = _input_array(tensor, raws[index] if raws else None)
    outputs = {output.name: True for output in request.outputs}
    return InferRequest(inputs=inputs, request_id=request.id or None, outputs=outputs, binary_default=True)


def encode_grpc_response(
    model_name: str, outputs: dict[str, np.ndarray], request_id: str | None
) -> service_pb2.ModelInferResponse:
    """A ModelInferResponse with every output in raw_output_contents."""
    from tritonclient.grpc import service_pb2

    response = service_pb2.ModelInferResponse(model_name=model_name, model_version="1", id=request_id or "")
    for name, array in outputs.items():
        response.outputs.add(name=name, datatype=datatype_of(array.dtype), shape=list(array.shape))
        response.raw_output_contents.append(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes())
    return response


def encode_grpc_request(
    model_name: str, inputs: dict[str, np.ndarray], request_id: str = ""
) -> service_pb2.ModelInferRequest:
    """A ModelInferRequest carrying every input in raw_input_contents (what tritonclient.grpc sends)."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model_name, id=request_id)
    for name, array in inputs.items():
        request.inputs.add(name=name, datatype=datatype_of(array.dtype), shape=list(array.shape))
        request.raw_input_contents.append(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes())
    return request
