"""Input specifications and the generation of feeds (always outside the timed region)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

import numpy as np

from infermeter.core.errors import InputSpecError
from infermeter.models.input_flags import unknown_input

Dim = int | str  # an int is a fixed size; a str names a symbolic dimension
Feeds = dict[str, np.ndarray]

# Names exporters give a dim they know nothing about: '?' and 'DynamicDimension.N' / 'p2o.DynamicDimension.N'
# (paddle2onnx), 'unk__N' (tf2onnx), an empty name. They share no size: each occurrence is a dim of its own.
_UNNAMED_DIM = re.compile(r"^\s*(?:\?|unk__\d+|(?:p2o\.)?DynamicDimension\.\d+)?\s*$")


def unnamed_dim(dim: Dim) -> bool:
    """True for a symbolic dim whose name is an exporter's placeholder (`?`, `unk__3`, `DynamicDimension.0`, empty):
    every occurrence may take its own size, unlike a real name (`batch`, `seq`) that inputs share."""
    return isinstance(dim, str) and _UNNAMED_DIM.match(dim) is not None


@dataclass(frozen=True)
class InputSpec:
    """One model input: name, numpy dtype name, shape (symbolic dims are strings), and the value range for
    integer inputs (low inclusive, high exclusive). The first dimension is the batch when `batch_axis` is 0.

    `dim_defaults` gives a size to symbolic dims that no `--input` override sets (e.g. (("seq", 128),)).
    `feeds_hook` ("package.module:function") names a generator of realistic feeds, e.g. tokenized sentences;
    it is called as `function(inputs, shapes, count, seed) -> list[Feeds]` by `generate_feeds`, and reads
    `feeds_source` when it needs more (the Hugging Face model folder whose tokenizer or image processor it uses)."""

    name: str
    dtype: str
    _: KW_ONLY  # the rest by keyword
    shape: tuple[Dim, ...]
    int_range: tuple[int, int] = (0, 100)
    batch_axis: int | None = 0
    dim_defaults: tuple[tuple[str, int], ...] = ()
    feeds_hook: str | None = None
    feeds_source: str | None = None

    def describe(self) -> str:
        """Human-readable `name dtype[d0, d1, ...]`."""
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.name} {self.dtype}[{dims}]"


def resolve_shapes(
    inputs: Sequence[InputSpec],
    batch: int,
    overrides: Sequence[tuple[str, tuple[int, ...]]] = (),
) -> dict[str, tuple[int, ...]]:
    """Concrete shapes for every input: the batch axis follows `batch`, symbolic dims come from `overrides`.

    A symbolic dim shared by several inputs (e.g. `seq` of input_ids and attention_mask) takes the size that an
    override of any of them gives (overrides that disagree are fed as given: `shared_dim_conflicts` words the
    warning); otherwise its `dim_defaults` size. An unnamed dim (`unnamed_dim`: `?`, `unk__N`...) is sized only by
    its own input's override. Raises InputSpecError naming the input and dimension when a shape cannot be
    resolved or does not fit.
    """
    known = [spec.name for spec in inputs]
    override_map = dict(overrides)
    unknown = [name for name in override_map if name not in known]
    if unknown:
        raise unknown_input("--input", unknown[0], known)
    batched = batched_inputs(inputs)
    symbols = symbol_sizes(inputs, override_map)
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in inputs:
        given = override_map.get(spec.name)
        if given is not None and len(given) != len(spec.shape):
            raise InputSpecError(
                f"--input {spec.name}: {len(given)} dims given, but the model's input is {spec.describe()}"
            )
        dims: list[int] = []
        for axis, dim in enumerate(spec.shape):
            if axis == spec.batch_axis and spec.name in batched and isinstance(dim, str):
                dims.append(batch)
            elif given is not None:
                if isinstance(dim, int) and given[axis] != dim:
                    wanted = "x".join(str(d) for d in given)
                    raise InputSpecError(
                        f"--input {spec.name}: dim {axis} is fixed at {dim} in the model, got {given[axis]}; "
                        f"--reshape rewrites the dims the file fixes: --reshape {spec.name}:{wanted}"
                    )
                dims.append(given[axis])
            elif isinstance(dim, int):
                dims.append(dim)
            elif dim in symbols:
                dims.append(symbols[dim])
            elif dim in dict(spec.dim_defaults):
                dims.append(dict(spec.dim_defaults)[dim])
            else:
                raise InputSpecError(
                    f"input {spec.name!r} has symbolic dim {axis} ({dim!r}); set it with "
                    f"--input {spec.name}:{'x'.join(str(d) if isinstance(d, int) else 'N' for d in spec.shape)}"
                )
        if spec.name in batched and spec.batch_axis is not None and spec.batch_axis < len(dims):
            fixed = spec.shape[spec.batch_axis]
            if isinstance(fixed, int) and fixed != batch and given is None:
                raise InputSpecError(
                    f"input {spec.name!r} has a fixed batch of {fixed} in the model; "
                    f"use --batch {fixed}, or export the model with a dynamic batch axis"
                )
        shapes[spec.name] = tuple(dims)
    return shapes


def _given_sizes(
    inputs: Sequence[InputSpec], override_map: dict[str, tuple[int, ...]]
) -> dict[str, dict[int, list[str]]]:
    # The sizes overrides give each named symbolic dim, with the inputs giving each (batch and unnamed dims apart).
    given: dict[str, dict[int, list[str]]] = {}
    for spec in inputs:
        sizes = override_map.get(spec.name)
        if sizes is None or len(sizes) != len(spec.shape):
            continue
        for axis, dim in enumerate(spec.shape):
            if isinstance(dim, str) and axis != spec.batch_axis and not unnamed_dim(dim):
                given.setdefault(dim, {}).setdefault(sizes[axis], []).append(spec.name)
    return given


def symbol_sizes(inputs: Sequence[InputSpec], override_map: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """The size of each named symbolic dim for the inputs no override shapes: the first an override gives."""
    return {dim: next(iter(sizes)) for dim, sizes in _given_sizes(inputs, override_map).items()}


def shared_dim_conflicts(inputs: Sequence[InputSpec], overrides: Sequence[tuple[str, tuple[int, ...]]]) -> list[str]:
    """A warning for each named dim that `--input` overrides give different sizes (`seq` 48 for one input, 64 for
    another). Not an error: the names are the exporter's, and the engine's own shape check decides."""
    warnings = []
    for dim, sizes in _given_sizes(inputs, dict(overrides)).items():
        if len(sizes) > 1:
            listed = [f"{size} ({', '.join(names)})" for size, names in sizes.items()]
            warnings.append(
                f"--input gives the shared dim {dim!r} {len(sizes)} sizes: {', '.join(listed[:-1])} and {listed[-1]}; "
                "each input is fed as given and the engine decides whether the model accepts that"
            )
    return warnings


def batched_inputs(inputs: Sequence[InputSpec]) -> set[str]:
    """The inputs that share the model's batch. When some input's batch axis is symbolic, those inputs: a fixed
    first dim beside them is no batch (a recurrent state `[2, batch, 128]`, a control vector `scales [3]` beside
    `input [batch, T]`). When every batch axis is fixed, the inputs whose first dim is the size of the first input
    of rank 2 or more (else of the first input): `scales [3]` beside `input [1, 50]` and `lengths [1]` is left
    alone."""
    axes = [(spec, spec.shape[spec.batch_axis]) for spec in inputs
            if spec.batch_axis is not None and spec.batch_axis < len(spec.shape)]  # fmt: skip
    if any(isinstance(size, str) for _, size in axes):
        return {spec.name for spec, size in axes if isinstance(size, str)}
    if not axes:
        return set()
    lead = next((size for spec, size in axes if len(spec.shape) >= 2), axes[0][1])
    return {spec.name for spec, size in axes if size == lead}


def fixed_batch(inputs: Sequence[InputSpec]) -> tuple[str, int] | None:
    """The first input whose batch axis holds a fixed size (a model exported with batch 1) and that size, or None
    when there is none, or when another input's batch axis is symbolic: then the model takes any batch and the
    fixed first dim is not a batch (see `batched_inputs`)."""
    batched = batched_inputs(inputs)
    for spec in inputs:
        if spec.name in batched and spec.batch_axis is not None:
            size = spec.shape[spec.batch_axis]
            return (spec.name, size) if isinstance(size, int) else None
    return None


def dims_by_name(inputs: Sequence[InputSpec], shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """The size of each symbolic dim name that has a single size wherever it occurs in `shapes`: what an engine
    may fix by name (ONNX Runtime's free-dimension overrides). A name with several sizes (an unnamed `?` used for
    height and width, overrides that disagree) is left out: fixing it by name would force one size on all."""
    sizes: dict[str, set[int]] = {}
    for spec in inputs:
        for axis, dim in enumerate(spec.shape):
            if isinstance(dim, str):
                sizes.setdefault(dim, set()).add(shapes[spec.name][axis])
    return {dim: next(iter(found)) for dim, found in sizes.items() if len(found) == 1}


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
    if spec.dtype == "str":
        raise InputSpecError(f"input {spec.name!r} is a string input: infermeter does not make up texts; give them "
                             "with --data texts.txt (one text per line)")  # fmt: skip
    raise InputSpecError(f"input {spec.name!r} has dtype {spec.dtype}, which infermeter cannot generate")


def generate_feeds(
    inputs: Sequence[InputSpec],
    shapes: dict[str, tuple[int, ...]],
    count: int,
    seed: int = 0,
) -> list[Feeds]:
    """`count` distinct feed sets (rotated by the measurement loop so no single input is cached hot).

    When the inputs name a `feeds_hook` (e.g. a text model's tokenizer over real sentences), that generator makes
    them; otherwise values are random (floats standard normal, integers in `int_range`, masks ones)."""
    hooks = sorted({spec.feeds_hook for spec in inputs if spec.feeds_hook})
    if hooks:
        return _hook_feeds(hooks[0], inputs, shapes, count, seed)
    rng = np.random.default_rng(seed)
    return [{spec.name: _values_for(spec, shapes[spec.name], rng) for spec in inputs} for _ in range(count)]


def _hook_feeds(
    hook: str, inputs: Sequence[InputSpec], shapes: dict[str, tuple[int, ...]], count: int, seed: int
) -> list[Feeds]:
    module_name, _, function_name = hook.partition(":")
    try:
        function: Callable[..., list[Feeds]] = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise InputSpecError(f"the feed generator {hook!r} of this model cannot be loaded: {exc}") from exc
    feed_sets = function(inputs, shapes, count, seed)
    for feeds in feed_sets:
        for spec in inputs:
            if spec.name not in feeds or tuple(feeds[spec.name].shape) != tuple(shapes[spec.name]):
                raise InputSpecError(f"the feed generator {hook!r} gave no {spec.name} of shape {shapes[spec.name]}")
    return feed_sets
