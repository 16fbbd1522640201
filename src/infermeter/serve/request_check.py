"""A request's tensors checked against the model's inputs, each misfit one ProtocolError(400) that says what does not
fit, and the signature that says which requests may share a batch."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np

from infermeter.models.inputs import InputSpec
from infermeter.serve.protocol import ProtocolError, datatype_of


def check_names(expected: list[str], inputs: Iterable[str]) -> None:
    """The request carries the model's inputs, no fewer and no others."""
    given = set(inputs)
    missing = sorted(set(expected) - given)
    unknown = sorted(given - set(expected))
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"unknown input(s) {', '.join(unknown)}")
        if missing:
            parts.append(f"missing input(s) {', '.join(missing)}")
        raise ProtocolError(400, f"{'; '.join(parts)}; the model's inputs are {', '.join(expected)}")


def check_tensor(spec: InputSpec, array: np.ndarray, batched: bool) -> None:
    """One tensor against its input: the dtype, the rank and every fixed dim (the batch axis of a `batched` input
    may differ)."""
    name = spec.name
    if array.dtype != np.dtype(spec.dtype):
        raise ProtocolError(
            400,
            f"input {name!r} has datatype {datatype_of(array.dtype)}, the model expects {datatype_of(spec.dtype)}",
        )
    if array.ndim != len(spec.shape):
        raise ProtocolError(400, f"input {name!r} has shape {list(array.shape)}, the model expects {spec.describe()}")
    for axis, dim in enumerate(spec.shape):
        if isinstance(dim, int) and array.shape[axis] != dim and (axis != spec.batch_axis or not batched):
            raise ProtocolError(
                400,
                f"input {name!r} has shape {list(array.shape)}, dim {axis} must be {dim} "
                f"(the model expects {spec.describe()})",
            )


def request_signature(feeds: dict[str, np.ndarray], batched: set[str]) -> Hashable:
    """What a request shares with those it may be batched with: each batched input's dtype and shape past the
    batch axis, and each unbatched input's dtype, shape and value."""
    return tuple(
        (n, a.dtype.str, a.shape[1:]) if n in batched else (n, a.dtype.str, a.shape, _value_key(a))
        for n, a in feeds.items()
    )


def _value_key(array: np.ndarray) -> object:
    """What batches a request with others by an unbatched input's value: its bytes when small, else the array
    itself (by identity: a large unbatched input never shares a batch)."""
    return array.tobytes() if array.size <= 256 else id(array)
