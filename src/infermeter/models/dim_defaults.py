"""Stated defaults for the symbolic dims nobody set, as optimum-benchmark gives them: a sequence length of 128, an
image side of 224, and 1 for the rest. A command that feeds a model sizes such a dim by its default and says so in
one line, with the `--input` flag that changes it, instead of refusing; a refusal comes only when the model (or its
server) fails on those inputs, and it names the flag (`sizing_hint`).

Which default a dim gets is read from its name when the exporter named it (`sequence`, `seq_len`, `height`), else
from where it sits: a token input's second axis (an integer input of rank 2) is a sequence; the two spatial axes of
an image tensor (rank 4, 1 to 4 channels first or last) are its sides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from infermeter.models.inputs import InputSpec, batched_inputs, resolve_shapes, symbol_sizes, unnamed_dim

SEQUENCE_LENGTH = 128
IMAGE_SIDE = 224
OTHER_DIM = 1

_SEQUENCE_NAME = re.compile(r"seq|sentence|length|len\b|_len|token|time|frames|steps", re.IGNORECASE)
_SIDE_NAME = re.compile(r"height|width|^h$|^w$|side|spatial", re.IGNORECASE)


def default_size(spec: InputSpec, axis: int) -> int:
    """The stated default of the symbolic dim at `axis` of `spec` (see the module docstring)."""
    dim = spec.shape[axis]
    name = "" if unnamed_dim(dim) or not isinstance(dim, str) else dim
    if _SIDE_NAME.search(name):
        return IMAGE_SIDE
    if _SEQUENCE_NAME.search(name):
        return SEQUENCE_LENGTH
    rank = len(spec.shape)
    if (rank == 4 and _channels(spec.shape[1]) and axis in (2, 3)) or (
        rank == 4 and _channels(spec.shape[3]) and axis in (1, 2)
    ):
        return IMAGE_SIDE
    if rank == 2 and axis == 1 and spec.dtype.startswith(("int", "uint")):
        return SEQUENCE_LENGTH
    return OTHER_DIM


def _channels(dim: object) -> bool:
    return isinstance(dim, int) and 1 <= dim <= 4


def with_stated_defaults(inputs: Sequence[InputSpec]) -> list[InputSpec]:
    """`inputs` with a `dim_defaults` size for every symbolic dim that has none (the model's own stay first)."""
    completed = []
    for spec in inputs:
        own = dict(spec.dim_defaults)
        extra = tuple(
            (dim, default_size(spec, axis))
            for axis, dim in enumerate(spec.shape)
            if isinstance(dim, str) and dim not in own
        )
        completed.append(replace(spec, dim_defaults=spec.dim_defaults + extra) if extra else spec)
    return completed


def plan_shapes(
    inputs: Sequence[InputSpec], batch: int, overrides: Sequence[tuple[str, tuple[int, ...]]] = ()
) -> tuple[dict[str, tuple[int, ...]], str | None]:
    """Concrete shapes for `inputs` (as `resolve_shapes`), every symbolic dim nobody set sized by its stated
    default, and the one line that says which inputs were sized so and the flag that changes them (None when
    none was)."""
    shapes = resolve_shapes(with_stated_defaults(inputs), batch, overrides)
    given = dict(overrides)
    symbols = symbol_sizes(inputs, given)  # the named dims an override sizes, shared by every input that has them
    batched = batched_inputs(inputs)

    def by_default(spec: InputSpec, axis: int) -> bool:
        dim = spec.shape[axis]
        if not isinstance(dim, str) or spec.name in given or (axis == spec.batch_axis and spec.name in batched):
            return False
        return (unnamed_dim(dim) or dim not in symbols) and dim not in dict(spec.dim_defaults)

    sized = [spec for spec in inputs if any(by_default(spec, axis) for axis in range(len(spec.shape)))]
    if not sized:
        return shapes, None
    listed = ", ".join(f"{spec.name} [{', '.join(map(str, shapes[spec.name]))}]" for spec in sized)
    first = sized[0]
    flag = f"--input {first.name}:{'x'.join(map(str, shapes[first.name]))}"
    line = (
        f"inputs sized by default (a sequence length of {SEQUENCE_LENGTH}, an image side of {IMAGE_SIDE}, "
        f"{OTHER_DIM} for other free dims): {listed}; change them with {flag}"
    )
    return shapes, line


def sizing_hint(line: str | None) -> str:
    """What to add to a refusal of inputs sized by default: the sizing line, so the flag that changes it is named."""
    return f" (the {line[0].lower()}{line[1:]})" if line else ""
