"""Checks of user-given values, shared by the CLI (flags) and the Python API (keywords).

Each check names the value the way its caller's user typed it (`--min-time` on the command line, `min_time_s`
in Python), so a message always points at something the user can find and change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError

# The CLI flag of each MeasureSettings field (the Python API accepts the flag's spelling as a keyword too).
SETTING_FLAGS = {
    "warmup_iterations": "--warmup",
    "min_iterations": "--iterations",
    "min_time_s": "--min-time",
    "max_time_s": "--max-time",
    "input_sets": "--input-sets",
    "case_timeout_s": "--case-timeout",
    "build_timeout_s": "--build-timeout",
    "seed": "--seed",
    "check_parity": "--check-parity",
    "target_ci": "--target-ci",
    "rounds": "--rounds",
    "interleave": "--no-interleave",
    "soak_requests": "--soak",
    "soak_minutes": "--soak-minutes",
    "soak_lengths": "--soak-lengths",
    "soak_sample_every": "--soak-sample-every",
    "soak_recycle_after": "--soak-recycle",
    "memory_limit_mb": "--memory-limit",
    "repeat": "--repeat",
}


def setting_flag(name: str) -> str:
    """The CLI flag of a MeasureSettings field (the field itself when it has none)."""
    return SETTING_FLAGS.get(name, name)


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


def check_price_per_hour(value: float | None, flag: str = "--price-per-hour") -> None:
    """UsageError unless the machine's price is a positive, finite amount per hour (None: not given)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} {value:g} must be a positive price per hour (e.g. {flag} 2.5)")


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


_MEMORY_UNITS = {"": 1.0, "mb": 1.0, "m": 1.0, "mib": 1.0, "gb": 1024.0, "g": 1024.0, "gib": 1024.0, "kb": 1 / 1024}


def parse_memory_mb(text: str, flag: str) -> float:
    """`512MB`, `1.5GB`, `512` (MB) as MB (binary units: a GB is 1024 MB, as memory.max and RLIMIT_AS count)."""
    stripped = text.strip().lower().replace(" ", "")
    number = stripped.rstrip("kmgib")
    unit = stripped[len(number) :]
    try:
        value = float(number) * _MEMORY_UNITS[unit]
    except (ValueError, KeyError):
        raise UsageError(f"{flag} {text!r} is not a memory size; write e.g. {flag} 512MB or {flag} 2GB") from None
    if value <= 0:
        raise UsageError(f"{flag} {text!r} must be positive")
    return value


def check_settings(settings: MeasureSettings, name: Callable[[str], str] = setting_flag) -> None:
    """UsageError for a loop setting that cannot work (counts and times must make sense before any case runs);
    `name` turns a field into what the user typed (by default its CLI flag)."""
    require_positive(settings.min_iterations, name("min_iterations"))
    require_positive(settings.min_time_s, name("min_time_s"), allow_zero=True)
    require_positive(settings.max_time_s, name("max_time_s"))
    require_positive(settings.case_timeout_s, name("case_timeout_s"))
    require_positive(settings.build_timeout_s, name("build_timeout_s"))
    require_positive(settings.warmup_iterations, name("warmup_iterations"), allow_zero=True)
    require_positive(settings.input_sets, name("input_sets"))
    require_positive(settings.rounds, name("rounds"))
    if not 0 <= settings.target_ci < 1:
        raise UsageError(f"{name('target_ci')} {settings.target_ci:g} must lie in [0, 1)")
    require_positive(settings.soak_requests, name("soak_requests"), allow_zero=True)
    require_positive(settings.soak_minutes, name("soak_minutes"), allow_zero=True)
    require_positive(settings.soak_sample_every, name("soak_sample_every"))
    require_positive(settings.soak_recycle_after, name("soak_recycle_after"), allow_zero=True)
    require_positive(settings.memory_limit_mb, name("memory_limit_mb"), allow_zero=True)
    require_positive(settings.repeat, name("repeat"))  # a soak's own refusal: measure.soak_request


def check_gate(threshold: str, alpha: float, name: Callable[[str], str] = lambda key: f"--{key}") -> float:
    """A regression gate's threshold (`5%`, `5` or `0.05`) as a fraction, its significance level `alpha` checked;
    UsageError naming either as `name` spells it (by default the CLI flag)."""
    try:
        limit = parse_threshold(threshold)
    except ValueError:
        flag = name("threshold")
        raise UsageError(f"{flag} {threshold!r} is not a percentage; write e.g. {flag} 5%") from None
    if not 0 < alpha < 1:
        raise UsageError(f"{name('alpha')} {alpha:g} must be between 0 and 1")
    return limit


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


def parse_options(values: Iterable[str] | None) -> tuple[tuple[str, str], ...]:
    """`--option key=value` pairs, sorted so the case identity does not depend on flag order."""
    pairs = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {item!r} is not KEY=VALUE; write e.g. --option onnxruntime.opt_level=basic")
        pairs[key.strip()] = value.strip()
    return tuple(sorted(pairs.items()))


def parse_threshold(text: str) -> float:
    """`5%`, `5` or `0.05` -> 0.05 (a bare number above 1 is read as percent). ValueError when not a number."""
    text = text.strip()
    value = float(text.removesuffix("%"))
    if text.endswith("%") or value > 1:
        value /= 100
    if value < 0:
        raise ValueError("threshold must not be negative")
    return value
