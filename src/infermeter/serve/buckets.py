"""Shape buckets for serving (`serve --buckets`): a request's dynamic length padded up to the smallest of a few
fixed sizes, so that the engine sees a handful of shapes instead of every length (fewer compiled kernels and
cached shapes, steadier memory)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.core.errors import UsageError
from infermeter.models.inputs import InputSpec
from infermeter.serve.protocol import ProtocolError


@dataclass(frozen=True)
class BucketSpec:
    """Pad input `input_name` along `axis` up to the smallest of `sizes` that fits."""

    input_name: str
    axis: int
    sizes: tuple[int, ...]


def parse_buckets(texts: tuple[str, ...], inputs: tuple[InputSpec, ...]) -> tuple[BucketSpec, ...]:
    """`16,32,64` (every input's first dynamic non-batch axis) or `NAME:AXIS=16,32,64`, into BucketSpecs."""
    specs: list[BucketSpec] = []
    by_name = {spec.name: spec for spec in inputs}
    for text in texts:
        target, sep, sizes_text = text.rpartition("=")
        try:
            sizes = tuple(sorted({int(s) for s in sizes_text.split(",") if s.strip()}))
        except ValueError:
            raise UsageError(f"--buckets {text!r}: sizes must be integers, e.g. --buckets 16,32,64") from None
        if not sizes or sizes[0] <= 0:
            raise UsageError(f"--buckets {text!r}: give positive sizes, e.g. --buckets 16,32,64")
        if sep:
            name, _, axis_text = target.partition(":")
            if name not in by_name or not axis_text.isdigit():
                raise UsageError(
                    f"--buckets {text!r}: write NAME:AXIS=SIZES with NAME one of {', '.join(by_name)}, "
                    "e.g. --buckets input_ids:1=16,32,64"
                )
            specs.append(BucketSpec(name, int(axis_text), sizes))
            continue
        for spec in inputs:
            axes = [a for a, d in enumerate(spec.shape) if isinstance(d, str) and a != spec.batch_axis]
            if axes:
                specs.append(BucketSpec(spec.name, axes[0], sizes))
        if not any(b.sizes == sizes for b in specs):
            raise UsageError(
                f"--buckets {text!r}: the model has no input with a dynamic non-batch dimension to bucket "
                f"(inputs: {'; '.join(s.describe() for s in inputs)})"
            )
    return tuple(specs)


def pad_to_bucket(array: np.ndarray, bucket: BucketSpec) -> tuple[np.ndarray, tuple[int, int, int]]:
    """`array` zero-padded along the bucket's axis to the smallest size that fits, and (axis, length, padded
    length) to slice the outputs back; a 400 when it is longer than the largest bucket."""
    length = array.shape[bucket.axis]
    target = next((size for size in bucket.sizes if size >= length), None)
    if target is None:
        raise ProtocolError(
            400,
            f"input {bucket.input_name!r} has length {length} along axis {bucket.axis}, longer than the largest "
            f"bucket ({bucket.sizes[-1]})",
        )
    if target == length:
        return array, (bucket.axis, length, target)
    widths = [(0, 0)] * array.ndim
    widths[bucket.axis] = (0, target - length)
    # Zero padding: masks read 0 (ignored) and token ids 0 ([PAD] in BERT-style vocabularies).
    return np.pad(array, widths), (bucket.axis, length, target)
