"""The one parser of `--input` (bench, inspect, parity, quantize, serve, load, optimize and the Python API).

An `--input` is a shape, `NAME:DIMS` (`input:1x3x224x224`), or a constant, `NAME=VALUE` (`sr=16000`) or a small
constant vector `NAME=V1,V2,V3` (`scales=0.667,1,0.8`). Names may hold colons (tf2onnx writes
`serving_default_input_2:0`), so a shape is split on its LAST colon and a value on its last `=`. Commas also
separate flags (`--input a=1,b:2x3`): a piece that holds neither `:` nor `=` continues the flag before it (a dim of
`x:1,3,224` or an element of a vector). A name the model does not have gets a did-you-mean (`unknown_input`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from infermeter.core.errors import InputSpecError, UsageError

Sizes = tuple[tuple[str, tuple[int, ...]], ...]
Values = tuple[tuple[str, str], ...]

_DIMS_RE = re.compile(r"^\s*(\d+(?:\s*[xX,]\s*\d+)*)\s*$")


def join_pieces(texts: Iterable[str]) -> list[str]:
    """`--input` texts split on commas into flags, a piece without `:` or `=` joined to the flag before it."""
    flags: list[str] = []
    for text in texts:
        for piece in text.split(","):
            piece = piece.strip()
            if not piece:
                continue
            if flags and ":" not in piece and "=" not in piece:
                flags[-1] += "," + piece
            else:
                flags.append(piece)
    return flags


def parse_input_override(text: str, flag: str = "--input") -> tuple[str, tuple[int, ...]]:
    """`NAME:1x3x224x224` into ("NAME", (1, 3, 224, 224)), split on the last colon (InputSpecError otherwise)."""
    name, colon, dims_text = text.rpartition(":")
    match = _DIMS_RE.match(dims_text)
    if not colon or not name.strip() or not match:
        raise InputSpecError(
            f"{flag} {text!r} is not NAME:DIMS; write it like {flag} input:1x3x224x224 (positive integers) "
            f"or {flag} serving_default_input_2:0:1x43844x1"
        )
    dims = tuple(int(d) for d in re.split(r"\s*[xX,]\s*", match.group(1)))
    if any(d <= 0 for d in dims):
        raise InputSpecError(f"{flag} {text!r}: every dimension must be a positive integer")
    return name.strip(), dims


def parse_number(text: str, where: str) -> int | float:
    """`text` as an int, else a float (`true`/`false` as 1/0); UsageError naming `where` otherwise."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return int(lowered == "true")
    try:
        return int(lowered)
    except ValueError:
        pass
    try:
        return float(lowered)
    except ValueError:
        raise UsageError(
            f"{where}: {text!r} is not a number (a constant input takes e.g. 16000, 0.5, true or 0.667,1,0.8)"
        ) from None


def value_numbers(text: str, where: str) -> list[int | float]:
    """The numbers of a constant: one (`16000`) or a vector (`0.667,1,0.8`)."""
    return [parse_number(part, where) for part in text.split(",")]


def _normalized(numbers: Sequence[int | float]) -> str:
    return ",".join(repr(n) if isinstance(n, float) else str(n) for n in numbers)


def parse_input_flags(texts: Iterable[str]) -> tuple[Sizes, Values]:
    """`--input` flags split into shapes (`NAME:DIMS`) and constants (`NAME=VALUE`, `NAME=V1,V2`): `=` marks a
    value. UsageError/InputSpecError with the flag as given when one is neither."""
    shapes: list[tuple[str, tuple[int, ...]]] = []
    values: dict[str, str] = {}
    for text in join_pieces(texts):
        if "=" not in text:
            shapes.append(parse_input_override(text))
            continue
        name, _, value = (part.strip() for part in text.rpartition("="))
        if not name or not value:
            raise UsageError(f"--input {text!r} is not NAME=VALUE; write it like --input sr=16000 or --input state=0")
        normalized = _normalized(value_numbers(value, f"--input {text!r}"))
        if name in values:
            raise UsageError(f"--input gives {name!r} two values ({values[name]} and {value})")
        values[name] = normalized
    named = [name for name, _ in shapes]
    twice = sorted({name for name in named if named.count(name) > 1})
    if twice:
        raise UsageError(f"--input gives {', '.join(twice)} two shapes; give each input once")
    return tuple(shapes), tuple(values.items())


def unknown_input(flag: str, name: str, known: Iterable[str]) -> InputSpecError:
    """The error for `flag` naming an input the model does not have: a did-you-mean over its input names."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return InputSpecError(f"{flag} names {name!r}, not an input of the model{hint} (its inputs: {', '.join(names)})")
