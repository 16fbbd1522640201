"""Helpers shared by the commands: consoles, matrix-flag parsing, value checks."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from rich.console import Console

from infermeter.errors import UsageError

# Piped output (a file, CI logs) gets a wide console so that tables are never cut to 80 columns.
stdout = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)
stderr = Console(stderr=True, highlight=False)


def split_values(values: Iterable[str] | None) -> list[str]:
    """Matrix flags take repeats and comma-separated lists: ['a,b', 'c'] -> ['a', 'b', 'c'] (order kept,
    duplicates dropped)."""
    out: list[str] = []
    for value in values or ():
        for item in value.split(","):
            item = item.strip()
            if item and item not in out:
                out.append(item)
    return out


def parse_positive_ints(values: Iterable[str] | None, flag: str) -> list[int]:
    """Positive integers from a matrix flag, or UsageError naming the flag and the bad value."""
    out = []
    for item in split_values(values):
        try:
            number = int(item)
        except ValueError:
            raise UsageError(f"{flag} {item!r} is not an integer; write e.g. {flag} 1,16") from None
        if number <= 0:
            raise UsageError(f"{flag} {number} must be positive")
        out.append(number)
    return out


def choose(values: Iterable[str] | None, allowed: Iterable[str], flag: str) -> list[str]:
    """Values of a matrix flag checked against `allowed`."""
    allowed = tuple(allowed)
    chosen = split_values(values)
    for item in chosen:
        if item not in allowed:
            raise UsageError(f"{flag} {item!r} is not one of {', '.join(allowed)}")
    return chosen


def require_positive(value: float, flag: str, allow_zero: bool = False) -> None:
    """UsageError unless value > 0 (or >= 0 with allow_zero)."""
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{flag} {value:g} must be {'zero or more' if allow_zero else 'positive'}")


def require_measure_flags(warmup: int, iterations: int, min_time: float, max_time: float, case_timeout: float) -> None:
    """The loop flags `bench` and `optimize` share: counts and times must make sense before any case runs."""
    require_positive(iterations, "--iterations")
    require_positive(min_time, "--min-time", allow_zero=True)
    require_positive(max_time, "--max-time")
    require_positive(case_timeout, "--case-timeout")
    require_positive(warmup, "--warmup", allow_zero=True)


def parse_fraction(text: str, flag: str) -> float:
    """`1%` or `0.01` as a fraction; a usage error for anything else or a negative value."""
    stripped = text.strip()
    try:
        value = float(stripped.removesuffix("%")) / (100 if stripped.endswith("%") else 1)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a fraction; write e.g. {flag} 1% or {flag} 0.01") from None
    if value < 0 or value >= 1:
        raise UsageError(f"{flag} {text!r} must lie in [0, 100%)")
    return value


def parse_options(values: Iterable[str] | None) -> tuple[tuple[str, str], ...]:
    """`--option key=value` pairs, sorted so the case identity does not depend on flag order."""
    pairs = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {item!r} is not KEY=VALUE; write e.g. --option onnxruntime.opt_level=basic")
        pairs[key.strip()] = value.strip()
    return tuple(sorted(pairs.items()))
