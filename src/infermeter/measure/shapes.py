"""Dynamic-shape plans: which shapes a dynamic run feeds, and padding into buckets.

`--dynamic seq=16..128` (a range: `points` evenly spaced sizes, both ends included) or `--dynamic batch=1,4,16`
(a list) names a symbolic dimension of the model and the sizes it takes. Several dims combine as a cartesian
product, sampled down to at most MAX_POINTS combinations. `--buckets seq=32,64,128` pads every fed size up to the
nearest bucket (zeros, which attention masks treat as padding), so that an engine sees only a few shapes: the
cost of the padding can then be weighed against the gain of fewer distinct shapes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from infermeter.core.errors import InputSpecError, UsageError
from infermeter.models.inputs import Feeds, InputSpec, resolve_shapes, unnamed_dim

MAX_POINTS = 16
# `points` that keeps every integer of a range (a soak draws its sizes from the whole range).
EVERY_SIZE = 1 << 30
_RANGE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*$")


@dataclass(frozen=True)
class ShapePoint:
    """One shape of a dynamic run: the symbolic dim sizes asked for, the input shapes they give, and the
    bucket sizes they were padded to (empty when no bucketing applies)."""

    dims: tuple[tuple[str, int], ...]
    shapes: dict[str, tuple[int, ...]]
    padded_dims: tuple[tuple[str, int], ...] = ()

    @property
    def label(self) -> str:
        """`seq=64` or `batch=4,seq=64` (with `→80` when padded to a bucket)."""
        padded = dict(self.padded_dims)
        return ",".join(f"{d}={s}" + (f"→{padded[d]}" if d in padded and padded[d] != s else "") for d, s in self.dims)


def parse_sizes(text: str, flag: str, points: int = 8) -> tuple[str, list[int]]:
    """`seq=16..128` -> ("seq", [16, 32, ...]) with `points` sizes; `batch=1,4,16` -> ("batch", [1, 4, 16])."""
    name, sep, spec = text.partition("=")
    if not sep or not name.strip() or not spec.strip():
        raise UsageError(f"{flag} {text!r} is not DIM=SIZES; write e.g. {flag} seq=16..128 or {flag} batch=1,4,16")
    match = _RANGE.match(spec)
    try:
        if match:
            low, high = int(match.group(1)), int(match.group(2))
            if low > high:
                raise UsageError(f"{flag} {text!r}: the range runs backwards ({low} > {high})")
            sizes = sorted({round(float(v)) for v in np.linspace(low, high, min(points, high - low + 1))})
        else:
            sizes = sorted({int(v) for v in spec.split(",") if v.strip()})
    except ValueError:
        raise UsageError(f"{flag} {text!r}: sizes must be integers, as in {flag} seq=16..128") from None
    if not sizes or sizes[0] <= 0:
        raise UsageError(f"{flag} {text!r}: sizes must be positive")
    return name.strip(), sizes


def symbolic_dims(inputs: Sequence[InputSpec]) -> set[str]:
    """Every symbolic dim name of the model's inputs (`batch` included) that names one dim: an exporter's
    placeholder (`?`, `unk__N`: `unnamed_dim`) stands for unrelated dims, which one `--dynamic` size cannot set."""
    return {d for spec in inputs for d in spec.shape if isinstance(d, str) and not unnamed_dim(d)}


def _apply_dims(
    inputs: Sequence[InputSpec], base: dict[str, tuple[int, ...]], dims: dict[str, int]
) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for spec in inputs:
        shape = list(base[spec.name])
        for axis, dim in enumerate(spec.shape):
            if isinstance(dim, str) and dim in dims:
                shape[axis] = dims[dim]
        shapes[spec.name] = tuple(shape)
    return shapes


def plan_shapes(
    inputs: Sequence[InputSpec],
    batch: int,
    overrides: Sequence[tuple[str, tuple[int, ...]]],
    dynamic: Sequence[tuple[str, tuple[int, ...]]],
    buckets: Sequence[tuple[str, tuple[int, ...]]] = (),
    seed: int = 0,
) -> list[ShapePoint]:
    """The shapes a dynamic run feeds, in a seeded shuffled order (so that sizes interleave as real traffic does)."""
    known = symbolic_dims(inputs)
    for name, _ in [*dynamic, *buckets]:
        if unnamed_dim(name):
            raise InputSpecError(
                f"--dynamic/--buckets name dim {name!r}, an exporter's placeholder for dims that need not agree; "
                f"vary a named dim ({', '.join(sorted(known)) or 'the model has none'}), or give sizes with --input"
            )
        if name not in known:
            raise InputSpecError(
                f"--dynamic/--buckets name dim {name!r}, but the model's symbolic dims are "
                f"{', '.join(sorted(known)) or 'none (the model has only fixed shapes)'}"
            )
    # Dims that --dynamic sets need no other size: give them their first size so the base shapes resolve.
    first = {name: sizes[0] for name, sizes in dynamic}
    fixed = [
        replace(spec, shape=tuple(first.get(d, d) if isinstance(d, str) and axis != spec.batch_axis else d
                                  for axis, d in enumerate(spec.shape)))
        for spec in inputs
    ]  # fmt: skip
    base = resolve_shapes(fixed, batch, overrides)
    names = [name for name, _ in dynamic]
    combos = list(itertools.product(*(sizes for _, sizes in dynamic)))
    rng = np.random.default_rng(seed)
    if len(combos) > MAX_POINTS:
        combos = [combos[i] for i in sorted(rng.choice(len(combos), MAX_POINTS, replace=False))]
    bucket_map = {name: sorted(sizes) for name, sizes in buckets}
    points = []
    for combo in combos:
        asked = dict(zip(names, combo, strict=True))
        padded = {}
        for name, size in asked.items():
            if name in bucket_map:
                fitting = [b for b in bucket_map[name] if b >= size]
                if not fitting:
                    raise UsageError(f"--buckets {name}: size {size} exceeds the largest bucket {bucket_map[name][-1]}")
                padded[name] = fitting[0]
        fed = {**asked, **padded}
        points.append(ShapePoint(tuple(asked.items()), _apply_dims(inputs, base, fed), tuple(padded.items())))
    order = rng.permutation(len(points))
    return [points[i] for i in order]


def pad_feeds(inputs: Sequence[InputSpec], feeds: Feeds, point: ShapePoint) -> Feeds:
    """Zero-pad feeds generated at the asked sizes up to `point.shapes` (the bucket sizes)."""
    if not point.padded_dims:
        return feeds
    out = {}
    for spec in inputs:
        array = feeds[spec.name]
        target = point.shapes[spec.name]
        pad = [(0, t - s) for s, t in zip(array.shape, target, strict=True)]
        out[spec.name] = np.pad(array, pad) if any(after for _, after in pad) else array
    return out


def asked_shapes(inputs: Sequence[InputSpec], point: ShapePoint) -> dict[str, tuple[int, ...]]:
    """Input shapes at the asked (unpadded) sizes of `point`."""
    padded = dict(point.padded_dims)
    if not padded:
        return point.shapes
    asked = dict(point.dims)
    shapes = {}
    for spec in inputs:
        shape = list(point.shapes[spec.name])
        for axis, dim in enumerate(spec.shape):
            if isinstance(dim, str) and dim in padded:
                shape[axis] = asked[dim]
        shapes[spec.name] = tuple(shape)
    return shapes
