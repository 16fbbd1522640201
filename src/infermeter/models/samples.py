"""Data samples (`--data`, `--calib`, evaluation data): a folder of images, an `.npz`/`.npy` file, a folder of
`.npy` files, or a `file.py:function` that yields feeds. Everything becomes a `SampleSet` (stacked arrays with a
leading sample axis, optional labels). Below every unit that reads data: bench's measured inputs, the INT8 study's
calibration and evaluation sets, parity and serving's warm-up.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.core.errors import InputSpecError, UsageError
from infermeter.models.inputs import Feeds, InputSpec, generate_feeds, resolve_shapes

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
# torchvision's ImageNet normalisation: what nearly every pretrained 3-channel image model expects.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class SampleSet:
    """Model inputs for `count` samples, stacked along axis 0 of every array, and optional integer labels.

    `constants` are inputs set with `--input NAME=VALUE`, the same for every sample, each given for one sample
    and whether it is batched: a batched one (`sr [batch]`) is repeated to each batch's rows, an unbatched one (a
    control vector `scales [3]`) is fed as it is."""

    arrays: dict[str, np.ndarray]
    labels: np.ndarray | None
    source: str
    constants: tuple[tuple[str, np.ndarray, bool], ...] = ()

    @property
    def count(self) -> int:
        """Number of samples."""
        return int(next(iter(self.arrays.values())).shape[0])

    def head(self, count: int) -> SampleSet:
        """The first `count` samples (all of them when there are fewer)."""
        labels = None if self.labels is None else self.labels[:count]
        return SampleSet({k: v[:count] for k, v in self.arrays.items()}, labels, self.source, self.constants)

    def split(self, count: int) -> tuple[SampleSet, SampleSet]:
        """The first `count` samples and the rest."""
        rest_labels = None if self.labels is None else self.labels[count:]
        rest = SampleSet({k: v[count:] for k, v in self.arrays.items()}, rest_labels, self.source, self.constants)
        return self.head(count), rest

    def batches(self, batch_size: int, pad: bool = False) -> Iterator[Feeds]:
        """Feeds of at most `batch_size` samples each, in order (`pad`: a short last batch repeats its last
        sample up to `batch_size`, for a model that fixes its batch), with the constants."""
        for start in range(0, self.count, batch_size):
            feeds = {k: v[start : start + batch_size] for k, v in self.arrays.items()}
            rows = next(iter(feeds.values())).shape[0]
            if pad and rows < batch_size:
                feeds = {k: np.concatenate([v, np.repeat(v[-1:], batch_size - rows, axis=0)]) for k, v in feeds.items()}
                rows = batch_size
            for name, array, batched in self.constants:
                feeds[name] = np.repeat(array, rows, axis=0) if batched else array
            yield feeds


def random_samples(
    inputs: Sequence[InputSpec],
    count: int,
    seed: int = 0,
    sequence_length: int = 16,
    overrides: Sequence[tuple[str, tuple[int, ...]]] = (),
) -> SampleSet:
    """`count` generated samples (what `bench` feeds); symbolic non-batch dims become `sequence_length`, unless
    `overrides` (`--input NAME:DIMS`, their batch taken as one sample) size them, for the inputs they name and for
    every input sharing a named dim with them (`--input input_ids:1x64` sizes attention_mask's `sequence` too)."""
    names = {i.name for i in inputs}  # an override of an input set to a constant is not for these
    shapes = resolve_shapes(sized_by_default(inputs, sequence_length), 1, [o for o in overrides if o[0] in names])
    feeds = generate_feeds(inputs, shapes, count, seed)
    arrays = {i.name: np.concatenate([f[i.name] for f in feeds]) for i in inputs}
    return SampleSet(arrays, None, f"random data (seed {seed})")


def sized_by_default(inputs: Sequence[InputSpec], size: int) -> list[InputSpec]:
    """`inputs` with every symbolic dim defaulting to `size` when no override sizes it (nor a shared one)."""
    return [
        replace(i, dim_defaults=tuple((d, size) for d in dict.fromkeys(i.shape) if isinstance(d, str))) for i in inputs
    ]


def _conform(spec: InputSpec, array: np.ndarray, where: str) -> np.ndarray:
    """`array` checked against the input's rank and fixed dims and cast to its dtype; a single sample gains
    the batch axis."""
    array = np.asarray(array)
    if array.ndim == len(spec.shape) - 1:
        array = array[None]
    if array.ndim != len(spec.shape):
        raise InputSpecError(
            f"{where}: array for input {spec.name!r} has shape {list(array.shape)}, but the model's input is "
            f"{spec.describe()} (samples go along the first axis)"
        )
    for axis, dim in enumerate(spec.shape):
        if axis != spec.batch_axis and isinstance(dim, int) and array.shape[axis] != dim:
            raise InputSpecError(
                f"{where}: array for input {spec.name!r} has shape {list(array.shape)}; dim {axis} must be {dim} "
                f"to fit {spec.describe()}"
            )
    target = np.dtype(object if spec.dtype == "str" else spec.dtype)  # texts: the object arrays ONNX Runtime takes
    if target.kind in "iu" and array.dtype.kind == "f":
        raise InputSpecError(f"{where}: input {spec.name!r} takes {spec.dtype} but the array holds floats")
    return np.ascontiguousarray(array.astype(target, copy=False))


def _from_mapping(inputs: Sequence[InputSpec], data: dict[str, np.ndarray], where: str) -> SampleSet:
    labels = data.get("labels")
    arrays: dict[str, np.ndarray] = {}
    others = [k for k in data if k != "labels"]
    for spec in inputs:
        if spec.name in data:
            arrays[spec.name] = _conform(spec, data[spec.name], where)
        elif len(inputs) == 1 and len(others) == 1:
            # One input, one array: its key needs not be the input's name (`x`, `images`, `arr_0`...).
            arrays[spec.name] = _conform(spec, data[others[0]], where)
        else:
            raise InputSpecError(
                f"{where} has arrays {', '.join(sorted(data)) or '(none)'} but no array named {spec.name!r}; "
                f"name each array after a model input ({', '.join(i.name for i in inputs)}) and labels 'labels'"
            )
    counts = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(counts.values())) != 1:
        raise InputSpecError(f"{where}: inputs hold different sample counts {counts}")
    count = next(iter(counts.values()))
    if count == 0:
        raise InputSpecError(f"{where} holds no samples")
    label_array = None
    if labels is not None:
        label_array = np.asarray(labels).reshape(-1)
        if label_array.shape[0] != count:
            raise InputSpecError(f"{where}: {label_array.shape[0]} labels for {count} samples")
        if label_array.dtype.kind == "f" and not np.all(label_array == np.round(label_array)):
            raise InputSpecError(f"{where}: labels must be integer class indices")
        label_array = label_array.astype(np.int64)
    return SampleSet(arrays, label_array, where)


def _load_images(inputs: Sequence[InputSpec], folder: Path, limit: int | None) -> SampleSet:
    if len(inputs) != 1 or len(inputs[0].shape) != 4 or np.dtype(inputs[0].dtype).kind != "f":
        raise InputSpecError(
            f"an image folder fits a model with one float NCHW input; this model's inputs are "
            f"{'; '.join(i.describe() for i in inputs)}: pass an .npz instead"
        )
    spec = inputs[0]
    channels, height, width = spec.shape[1:]
    if not all(isinstance(d, int) for d in (channels, height, width)):
        raise InputSpecError(f"input {spec.describe()} has symbolic image dims; export it with a fixed size")
    assert isinstance(channels, int) and isinstance(height, int) and isinstance(width, int)
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not files:
        raise InputSpecError(f"{folder} holds no image files ({', '.join(IMAGE_SUFFIXES)})")
    if limit is not None:
        files = files[:limit]
    try:
        from PIL import Image
    except ImportError as exc:
        from infermeter.core.extras import install_line

        raise UsageError(f"reading an image folder needs pillow: {install_line('quantize')}") from exc
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise InputSpecError(f"input {spec.describe()} has {channels} channels; images give 1 (L) or 3 (RGB)")
    mean = np.array(IMAGENET_MEAN if channels == 3 else (0.5,), dtype=np.float32)[:, None, None]
    std = np.array(IMAGENET_STD if channels == 3 else (0.5,), dtype=np.float32)[:, None, None]
    images = []
    for path in files:
        try:
            with Image.open(path) as image:
                pixels = np.asarray(image.convert(mode).resize((width, height), Image.Resampling.BILINEAR))
        except OSError as exc:
            raise InputSpecError(f"cannot read image {path}: {exc}") from exc
        chw = (pixels.astype(np.float32) / 255.0).reshape(height, width, channels).transpose(2, 0, 1)
        images.append((chw - mean) / std)
    # ImageNet-style layout (folder/class/image): the sorted class folder names give the labels.
    classes = sorted({p.parent.relative_to(folder).parts[0] for p in files if p.parent != folder})
    labels = None
    if classes and all(p.parent != folder for p in files):
        index = {name: i for i, name in enumerate(classes)}
        labels = np.array([index[p.parent.relative_to(folder).parts[0]] for p in files], dtype=np.int64)
    return SampleSet({spec.name: np.stack(images).astype(spec.dtype)}, labels, f"{folder} ({len(files)} images)")


def _read_npy(path: Path) -> np.ndarray:
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise InputSpecError(f"{path} is not a readable .npy file: {exc}") from exc


def _load_npy_folder(inputs: Sequence[InputSpec], folder: Path, files: list[Path]) -> SampleSet:
    """One file per input named after it (an .npz unpacked: `input_ids.npy`, `labels.npy`...), or, for a
    single-input model, files of one sample (or a few) each, stacked in name order."""
    where = f"{folder} ({len(files)} .npy files)"
    names = {spec.name for spec in inputs}
    stems = {path.stem for path in files}
    if stems & (names | {"labels"}):
        return _from_mapping(inputs, {path.stem: _read_npy(path) for path in files}, where)
    if len(inputs) != 1:
        raise InputSpecError(
            f"{where}: name the files after the model's inputs ({', '.join(sorted(names))}), one array per input "
            "with the samples along the first axis"
        )
    arrays = [_conform(inputs[0], _read_npy(path), str(path)) for path in files]
    try:
        stacked = np.concatenate(arrays)
    except ValueError as exc:
        raise InputSpecError(f"{where}: the arrays do not stack ({exc}); give them equal shapes") from exc
    return SampleSet({inputs[0].name: stacked}, None, where)


def _load_function(inputs: Sequence[InputSpec], ref: str) -> SampleSet:
    file_part, _, function = ref.rpartition(":")
    path = Path(file_part)
    if not path.is_file():
        raise UsageError(f"{ref!r}: {file_part!r} is not a file; write DATA as path/to/file.py:function")
    module_spec = importlib.util.spec_from_file_location(f"_infermeter_data_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"cannot import {file_part!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"importing {file_part!r} failed: {type(exc).__name__}: {exc}") from exc
    factory = getattr(module, function, None)
    if not callable(factory):
        raise UsageError(f"{file_part!r} has no function {function!r}")
    items: list[Any] = []
    try:
        items = list(factory())
    except Exception as exc:
        raise UsageError(f"{ref} raised {type(exc).__name__}: {exc}") from exc
    if not items:
        raise InputSpecError(f"{ref} yielded no feeds")
    parts: dict[str, list[np.ndarray]] = {}
    labels: list[np.ndarray] = []
    for item in items:
        feeds, label = item if isinstance(item, tuple) and len(item) == 2 else (item, None)
        if not isinstance(feeds, dict):
            raise InputSpecError(f"{ref} must yield dicts of input name -> array (or (dict, labels) pairs)")
        converted = {i.name: _conform(i, feeds[i.name], ref) for i in inputs if i.name in feeds}
        for name, value in converted.items():
            parts.setdefault(name, []).append(value)
        if label is not None:
            labels.append(np.asarray(label).reshape(-1))
    try:
        merged: dict[str, np.ndarray] = {name: np.concatenate(values) for name, values in parts.items()}
    except ValueError as exc:
        raise InputSpecError(f"{ref}: the yielded feeds do not stack ({exc}); give them equal shapes") from exc
    if labels:
        merged["labels"] = np.concatenate(labels)
    return _from_mapping(inputs, merged, ref)


def _load_texts(inputs: Sequence[InputSpec], path: Path) -> SampleSet:
    """A .txt file, one text per line (empty lines skipped), for a model whose one string input takes texts."""
    strings = [spec for spec in inputs if spec.dtype == "str"]
    if len(strings) != 1 or len(inputs) != 1:
        raise InputSpecError(f"{path}: a .txt file of texts feeds a model with one string input; this one has "
                             f"{', '.join(f'{i.name} ({i.dtype})' for i in inputs)}")  # fmt: skip
    if not path.is_file():
        raise UsageError(f"data file {str(path)!r} does not exist")
    texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    array = np.asarray(texts, dtype=object).reshape((-1,) + (1,) * (len(strings[0].shape) - 1))
    return _from_mapping(inputs, {strings[0].name: array}, str(path))


def load_samples(inputs: Sequence[InputSpec], ref: str, limit: int | None = None) -> SampleSet:
    """Load DATA for a model with `inputs`: an image folder, `.npz` (arrays named after inputs, optional
    `labels`), `.npy` (single-input models), a folder of `.npy` files (see `_load_npy_folder`) or
    `file.py:function` (yields feed dicts or (feeds, labels)), or a `.txt` file of texts (one per line) for a model
    whose one input is a string."""
    path = Path(ref)
    arrays = sorted(p for p in path.glob("*.npy") if p.is_file()) if path.is_dir() else []
    if arrays:
        samples = _load_npy_folder(inputs, path, arrays)
    elif path.is_dir():
        samples = _load_images(inputs, path, limit)
    elif path.suffix.lower() in (".npz", ".npy"):
        if not path.is_file():
            raise UsageError(f"data file {ref!r} does not exist")
        try:
            loaded = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputSpecError(f"{ref} is not a readable numpy file: {exc}") from exc
        if isinstance(loaded, np.ndarray):
            if len(inputs) != 1:
                raise InputSpecError(f"{ref}: an .npy holds one array but the model has {len(inputs)} inputs; use .npz")
            samples = _from_mapping(inputs, {inputs[0].name: loaded}, ref)
        else:
            with loaded:
                samples = _from_mapping(inputs, {k: loaded[k] for k in loaded.files}, ref)
    elif path.suffix.lower() == ".txt":
        samples = _load_texts(inputs, path)
    elif ".py:" in ref:
        samples = _load_function(inputs, ref)
    else:
        raise UsageError(
            f"data {ref!r} is neither a folder of images, an .npz/.npy file, nor file.py:function; give one of those"
        )
    return samples if limit is None else samples.head(limit)
