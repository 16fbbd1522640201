"""Real and constant inputs for `bench`, `serve` and `load`: `--data` and `--input NAME=VALUE`.

`--data` goes through the one loader of the project, `models.samples.load_samples` (an .npz, a folder of .npy
files, an image folder, or `file.py:function`): its samples are stacked along the batch axis, `batch` at a time,
into the feed sets the loop rotates, and reused (with a note) when there are fewer than the sets need.
`--input NAME=VALUE` sets an input to a constant (a sample rate, a threshold, a state that starts at zero), the
same in every feed set; the other inputs are generated as before, or come from the data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from infermeter.core.errors import InputSpecError, UsageError
from infermeter.models.input_flags import Sizes, Values, unknown_input, value_numbers
from infermeter.models.inputs import Feeds, InputSpec, generate_feeds

if TYPE_CHECKING:
    from infermeter.core.case import Case, DataSource
    from infermeter.models.samples import SampleSet
    from infermeter.results.schema import CaseResult


def constant_array(spec: InputSpec, text: str, shape: tuple[int, ...]) -> np.ndarray:
    """The constant `text` as input `spec` of `shape` (a scalar input has shape ()), in the input's dtype: one
    value fills the shape, a vector (`0.667,1,0.8`) must have as many values as the shape has elements."""
    dtype = np.dtype(spec.dtype)
    numbers = value_numbers(text, f"--input {spec.name}={text}")
    for value in numbers:
        _check_value(spec, text, value, dtype)
    if len(numbers) == 1:
        return np.full(shape, numbers[0], dtype=dtype)
    if int(np.prod(shape)) != len(numbers):
        raise InputSpecError(
            f"--input {spec.name}={text}: {len(numbers)} values for input {spec.describe()} of shape "
            f"{list(shape)}; give one value, or one per element"
        )
    return np.array(numbers, dtype=dtype).reshape(shape)


def _check_value(spec: InputSpec, text: str, value: int | float, dtype: np.dtype) -> None:
    if dtype.kind in "iub" and not float(value).is_integer():
        raise InputSpecError(f"--input {spec.name}={text}: input {spec.describe()} takes whole numbers")
    if dtype.kind == "b" and value not in (0, 1):
        raise InputSpecError(f"--input {spec.name}={text}: input {spec.describe()} takes true/false (1/0)")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise InputSpecError(f"--input {spec.name}={text}: out of the range of {dtype} ({info.min}..{info.max})")


def check_input_values(inputs: Sequence[InputSpec], values: Values) -> None:
    """Each constant names an input of the model and fits its dtype (InputSpecError otherwise)."""
    by_name = {spec.name: spec for spec in inputs}
    for name, text in values:
        if name not in by_name:
            raise unknown_input(f"--input {name}={text}", name, by_name)
        spec = by_name[name]
        numbers = value_numbers(text, f"--input {name}={text}")
        for value in numbers:
            _check_value(spec, text, value, np.dtype(spec.dtype))
        if len(numbers) > 1 and all(isinstance(d, int) for d in spec.shape):
            constant_array(spec, text, tuple(int(d) for d in spec.shape))  # a vector must fill a fixed shape


def data_inputs(inputs: Sequence[InputSpec], values: Values) -> tuple[InputSpec, ...]:
    """The inputs that take data (generated or loaded): every input not set to a constant."""
    constant = {name for name, _ in values}
    return tuple(spec for spec in inputs if spec.name not in constant)


def with_constants(
    inputs: Sequence[InputSpec], values: Values, shapes: dict[str, tuple[int, ...]], feed_sets: list[Feeds]
) -> list[Feeds]:
    """`feed_sets` with the constant inputs added, every set's inputs in the model's order."""
    by_name = {spec.name: spec for spec in inputs}
    constants = {name: constant_array(by_name[name], text, shapes[name]) for name, text in values}
    return [{spec.name: {**feeds, **constants}[spec.name] for spec in inputs} for feeds in feed_sets]


def generated_feed_sets(
    inputs: Sequence[InputSpec], values: Values, shapes: dict[str, tuple[int, ...]], count: int, seed: int
) -> list[Feeds]:
    """`count` generated feed sets (as `generate_feeds`), the constant inputs set to their values."""
    generated = data_inputs(inputs, values)
    sets = generate_feeds(generated, shapes, count, seed) if generated else [{} for _ in range(count)]
    return with_constants(inputs, values, shapes, sets)


def _data_path(ref: str) -> tuple[Path, str]:
    """(the file or folder, the function name or "") of a DATA reference."""
    path = Path(ref)
    if not path.exists() and ".py:" in ref:
        file_part, _, function = ref.rpartition(":")
        return Path(file_part), function
    return path, ""


def data_content_hash(ref: str) -> str:
    """A short SHA-256 of what DATA holds: the file's bytes, every file of a folder (names and bytes), or the
    Python file's bytes and the function's name."""
    from infermeter.models.spec import file_sha256

    path, function = _data_path(ref)
    if not path.exists():
        raise UsageError(f"--data {ref!r} does not exist")
    digest = hashlib.sha256(function.encode())
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        digest.update(file_sha256(file).encode())
    return digest.hexdigest()[:12]


def absolute_data_ref(ref: str) -> str:
    """DATA with its path made absolute (a server or worker may not start in this folder)."""
    path, function = _data_path(ref)
    absolute = str(path.resolve())
    return f"{absolute}:{function}" if function else absolute


def load_data(inputs: Sequence[InputSpec], values: Values, ref: str) -> SampleSet:
    """The samples of DATA for the model's data inputs (the constant ones left out), through the loader
    `quantize` and `optimize` use."""
    from infermeter.models.samples import load_samples

    wanted = data_inputs(inputs, values)
    scalars = [spec.name for spec in wanted if not spec.shape]
    if scalars:
        raise InputSpecError(
            f"input {', '.join(scalars)} is a scalar, not data: give it with --input {scalars[0]}=VALUE"
        )
    if not wanted:
        raise UsageError("--data has nothing to feed: every input of the model is set with --input NAME=VALUE")
    return load_samples(wanted, ref)


def open_data(inputs: Sequence[InputSpec], values: Values, ref: str) -> tuple[DataSource, SampleSet]:
    """DATA checked against the model (UsageError / InputSpecError), as a DataSource for cases and its samples."""
    from infermeter.core.case import DataSource

    absolute = absolute_data_ref(ref)
    content_hash = data_content_hash(absolute)
    samples = load_data(inputs, values, absolute)
    return DataSource(absolute, content_hash, samples.count), samples


def data_shapes(inputs: Sequence[InputSpec], samples: SampleSet, given: Sizes) -> Sizes:
    """`--input` shapes the data sets: one per data input with a symbolic non-batch dim that no `--input` sizes
    (its batch position is left to `--batch`)."""
    named = {name for name, _ in given}
    out = []
    for spec in inputs:
        array = samples.arrays.get(spec.name)
        symbolic = any(isinstance(d, str) for axis, d in enumerate(spec.shape) if axis != spec.batch_axis)
        if array is None or spec.name in named or not symbolic:
            continue
        dims = list(array.shape)
        if spec.batch_axis is not None:
            fixed = spec.shape[spec.batch_axis]
            dims[spec.batch_axis] = fixed if isinstance(fixed, int) else 1
        out.append((spec.name, tuple(int(d) for d in dims)))
    return tuple(out)


def batched_sets(inputs: Sequence[InputSpec], samples: SampleSet, batch: int, count: int) -> list[Feeds]:
    """`count` feed sets of `batch` samples each, stacked along the batch axis, taken in order and wrapping
    around (so samples repeat when there are fewer than batch × count)."""
    total = samples.count
    sets = []
    for index in range(count):
        rows = [(index * batch + row) % total for row in range(batch)]
        feeds = {}
        for spec in inputs:
            array = samples.arrays.get(spec.name)
            if array is None:
                continue
            # The loader stacks samples along axis 0, the batch axis; an input without one takes a whole sample.
            feeds[spec.name] = np.ascontiguousarray(array[rows] if spec.batch_axis is not None else array[rows[0]])
        sets.append(feeds)
    return sets


def data_note(source: DataSource, batch: int, count: int, more: str = "--input-sets rotates more") -> str | None:
    """What the feed sets make of the data: samples reused (fewer than batch × sets) or left unused (more, and
    `more` says how to use them)."""
    needed = batch * count
    if source.samples < needed:
        return (
            f"--data {source.ref}: {source.samples} samples for {count} input sets of batch {batch} "
            f"({needed} rows): samples are reused"
        )
    if source.samples > needed:
        return (
            f"--data {source.ref}: {needed} of its {source.samples} samples are rotated ({count} input sets of "
            f"batch {batch}); {more}"
        )
    return None


def data_feed_sets(
    inputs: Sequence[InputSpec],
    values: Values,
    source: DataSource,
    shapes: dict[str, tuple[int, ...]],
    batch: int,
    count: int,
) -> list[Feeds]:
    """The feed sets of `count` batches of real samples, with the constant inputs (of their `shapes`)."""
    samples = load_data(inputs, values, source.ref)
    return with_constants(inputs, values, shapes, batched_sets(inputs, samples, batch, count))


def fill_constants(inputs: Sequence[InputSpec], values: Values, given: Feeds) -> Feeds:
    """A request's tensors with the constant inputs it leaves out filled in (a served model's `--input
    NAME=VALUE`), batched like the request's other inputs."""
    rows = next((given[s.name].shape[s.batch_axis] for s in inputs if s.name in given and s.batch_axis is not None), 1)
    filled = dict(given)
    for spec in inputs:
        text = dict(values).get(spec.name)
        if text is None or spec.name in given:
            continue
        shape = [rows if axis == spec.batch_axis and isinstance(d, str) else d for axis, d in enumerate(spec.shape)]
        if not all(isinstance(d, int) for d in shape):
            raise InputSpecError(f"constant input {spec.describe()} has a dim only a request can size: send it")
        filled[spec.name] = constant_array(spec, text, tuple(int(d) for d in shape))
    return filled


def case_feed_sets(inputs: Sequence[InputSpec], case: Case, count: int, seed: int) -> list[Feeds]:
    """`count` static feed sets of `case`: its data batched (`--data`), else generated from `seed`; its constant
    inputs set. What the timed loop rotates, and what `--check-parity` compares on."""
    from infermeter.models.inputs import resolve_shapes

    shapes = resolve_shapes(inputs, case.batch, case.input_shapes)
    if case.data is not None:
        return data_feed_sets(inputs, case.input_values, case.data, shapes, case.batch, count)
    return generated_feed_sets(inputs, case.input_values, shapes, count, seed)


def record_inputs(case: Case, result: CaseResult) -> None:
    """Where a measured case's inputs came from, when not generated, in its result: the data (`data`: ref,
    content hash, samples) with the note on how it was used, and the constants (`input_values`)."""
    if case.data is not None:
        result.data = case.data
        note = data_note(case.data, case.batch, case.settings.input_sets)
        if note:
            result.notes.append(note)
    if case.input_values:
        result.input_values = dict(case.input_values)
