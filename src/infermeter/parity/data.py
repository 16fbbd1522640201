"""Inputs for parity checks: seeded random feeds, or the user's own arrays from an .npz file (validated)."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from infermeter.core.errors import InputSpecError
from infermeter.models.inputs import Feeds, InputSpec, resolve_shapes
from infermeter.models.spec import ModelSpec


def random_feeds(
    spec: ModelSpec,
    batch: int,
    overrides: Sequence[tuple[str, tuple[int, ...]]],
    samples: int,
    seed: int,
    values: tuple[tuple[str, str], ...] = (),
) -> list[Feeds]:
    """`samples` seeded random feed sets shaped for `batch` (and the `--input` overrides), the constant inputs
    (`--input NAME=VALUE`: a sample rate, a state) set to their values."""
    from infermeter.models.feeds_data import generated_feed_sets

    shapes = resolve_shapes(spec.inputs, batch, overrides)
    return generated_feed_sets(spec.inputs, values, shapes, samples, seed)


def _check_array(path: Path, spec: InputSpec, array: np.ndarray) -> np.ndarray:
    expected = np.dtype(spec.dtype)
    if array.dtype.kind != expected.kind and not (expected.kind in "iu" and array.dtype.kind in "iu"):
        raise InputSpecError(
            f"{path}: array {spec.name!r} has dtype {array.dtype}, but the model's input is {spec.describe()}"
        )
    if array.ndim != len(spec.shape):
        raise InputSpecError(
            f"{path}: array {spec.name!r} has shape {tuple(array.shape)} ({array.ndim} dims), but the model's "
            f"input is {spec.describe()}"
        )
    for axis, (got, want) in enumerate(zip(array.shape, spec.shape, strict=True)):
        if isinstance(want, int) and got != want:
            raise InputSpecError(
                f"{path}: array {spec.name!r} has shape {tuple(array.shape)}, but dim {axis} of the model's input "
                f"is fixed at {want} ({spec.describe()})"
            )
    if array.dtype.kind in "iu" and array.dtype != expected:
        # Integer width differences (int32 token ids for an int64 input) are safe when the values fit.
        info = np.iinfo(expected)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise InputSpecError(f"{path}: array {spec.name!r} holds values outside the range of {expected}")
    return np.ascontiguousarray(array.astype(expected, copy=False))


def load_npz_feeds(path: Path, spec: ModelSpec, batch: int | None = None) -> list[Feeds]:
    """The model's inputs from an .npz file whose arrays are named like the inputs.

    Names, ranks, fixed dimensions and dtype kinds are checked (float data for a float input, integers for an
    integer input; widths are converted). With `batch`, the arrays are split along their batch axis into feed
    sets of that size (the last one may be smaller); without it the whole file is one feed set.
    """
    if not path.is_file():
        raise InputSpecError(f"--data {str(path)!r} does not exist")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise InputSpecError(
            f"--data {path} is not a readable .npz file ({type(exc).__name__}: {exc}); write one with "
            "numpy.savez(path, input_name=array, ...)"
        ) from exc
    if not isinstance(arrays, dict) or not arrays:
        raise InputSpecError(f"--data {path} holds no arrays; write one with numpy.savez(path, input_name=array)")
    names = [i.name for i in spec.inputs]
    missing = [n for n in names if n not in arrays]
    extra = sorted(set(arrays) - set(names))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        raise InputSpecError(
            f"--data {path}: arrays must be named like the model's inputs ({', '.join(names)}); "
            f"{'; '.join(parts)} (the file holds {', '.join(sorted(arrays))})"
        )
    feeds = {i.name: _check_array(path, i, arrays[i.name]) for i in spec.inputs}
    batch_sizes = {i.name: feeds[i.name].shape[i.batch_axis] for i in spec.inputs if i.batch_axis is not None}
    if len(set(batch_sizes.values())) > 1:
        raise InputSpecError(f"--data {path}: the arrays disagree on the batch size: {batch_sizes}")
    if batch is None or not batch_sizes:
        return [feeds]
    total = next(iter(batch_sizes.values()))
    sets = []
    for start in range(0, total, batch):
        chunk = {}
        for i in spec.inputs:
            array = feeds[i.name]
            if i.batch_axis is None:
                chunk[i.name] = array
            else:
                index = [slice(None)] * array.ndim
                index[i.batch_axis] = slice(start, start + batch)
                chunk[i.name] = np.ascontiguousarray(array[tuple(index)])
        sets.append(chunk)
    return sets
