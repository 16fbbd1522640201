"""Input specifications and the generation of feeds (always outside the timed region)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infermeter.errors import InputSpecError

Dim = int | str  # an int is a fixed size; a str names a symbolic dimension
Feeds = dict[str, np.ndarray]

_SHAPE_RE = re.compile(r"^\s*([^:]+):\s*(\d+(?:\s*[xX,]\s*\d+)*)\s*$")


@dataclass(frozen=True)
class InputSpec:
    """One model input: name, numpy dtype name, shape (symbolic dims are strings), and the value range for
    integer inputs (low inclusive, high exclusive). The first dimension is the batch when `batch_axis` is 0."""

    name: str
    dtype: str
    shape: tuple[Dim, ...]
    int_range: tuple[int, int] = (0, 100)
    batch_axis: int | None = 0

    def describe(self) -> str:
        """Human-readable `name dtype[d0, d1, ...]`."""
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.name} {self.dtype}[{dims}]"


def parse_input_override(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse `NAME:1x3x224x224` into ("NAME", (1, 3, 224, 224))."""
    match = _SHAPE_RE.match(text)
    if not match:
        raise InputSpecError(
            f"--input {text!r} is not NAME:DIMS; write it like --input input:1x3x224x224 (positive integers)"
        )
    dims = tuple(int(d) for d in re.split(r"\s*[xX,]\s*", match.group(2)))
    if any(d <= 0 for d in dims):
        raise InputSpecError(f"--input {text!r}: every dimension must be a positive integer")
    return match.group(1).strip(), dims


def resolve_shapes(
    inputs: Sequence[InputSpec],
    batch: int,
    overrides: Sequence[tuple[str, tuple[int, ...]]] = (),
) -> dict[str, tuple[int, ...]]:
    """Concrete shapes for every input: the batch axis follows `batch`, symbolic dims come from `overrides`.

    Raises InputSpecError naming the input and dimension when a shape cannot be resolved or does not fit.
    """
    known = {spec.name for spec in inputs}
    override_map = dict(overrides)
    unknown = sorted(set(override_map) - known)
    if unknown:
        raise InputSpecError(
            f"--input names {', '.join(unknown)} but the model's inputs are {', '.join(sorted(known))}"
        )
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in inputs:
        given = override_map.get(spec.name)
        if given is not None and len(given) != len(spec.shape):
            raise InputSpecError(
                f"--input {spec.name}: {len(given)} dims given, but the model's input is {spec.describe()}"
            )
        dims: list[int] = []
        for axis, dim in enumerate(spec.shape):
            if axis == spec.batch_axis and isinstance(dim, str):
                dims.append(batch)
            elif given is not None:
                if isinstance(dim, int) and given[axis] != dim:
                    raise InputSpecError(
                        f"--input {spec.name}: dim {axis} is fixed at {dim} in the model, got {given[axis]}"
                    )
                dims.append(given[axis])
            elif isinstance(dim, int):
                dims.append(dim)
            else:
                raise InputSpecError(
                    f"input {spec.name!r} has symbolic dim {axis} ({dim!r}); set it with "
                    f"--input {spec.name}:{'x'.join(str(d) if isinstance(d, int) else 'N' for d in spec.shape)}"
                )
        if spec.batch_axis is not None and spec.batch_axis < len(dims):
            fixed = spec.shape[spec.batch_axis]
            if isinstance(fixed, int) and fixed != batch and given is None:
                raise InputSpecError(
                    f"input {spec.name!r} has a fixed batch of {fixed} in the model; "
                    f"use --batch {fixed}, or export the model with a dynamic batch axis"
                )
        shapes[spec.name] = tuple(dims)
    return shapes


def _values_for(spec: InputSpec, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(spec.dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if dtype.kind in "iu":
        # Masks are all ones and segment ids zero: any other value changes what an encoder computes.
        lowered = spec.name.lower()
        if "mask" in lowered:
            return np.ones(shape, dtype=dtype)
        if "token_type" in lowered or "segment" in lowered:
            return np.zeros(shape, dtype=dtype)
        low, high = spec.int_range
        return rng.integers(low, high, size=shape).astype(dtype)
    raise InputSpecError(f"input {spec.name!r} has dtype {spec.dtype}, which infermeter cannot generate")


def generate_feeds(
    inputs: Sequence[InputSpec],
    shapes: dict[str, tuple[int, ...]],
    count: int,
    seed: int = 0,
) -> list[Feeds]:
    """`count` distinct feed sets (rotated by the measurement loop so no single input is cached hot)."""
    rng = np.random.default_rng(seed)
    return [{spec.name: _values_for(spec, shapes[spec.name], rng) for spec in inputs} for _ in range(count)]
