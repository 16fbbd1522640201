"""Typed backend options (`-O KEY=VALUE`): each backend declares the options it reads, with their type or choices,
default and help, and a plan is checked against those declarations before any worker starts.

A key is namespaced by the backend family that reads it (`onnxruntime.opt_level`, `null.latency_ms`); a few keys are
shared by several backends (`cache`, `quantize.*`). `check_options` turns an unknown key or a bad value into a
UsageError (exit 2) with a did-you-mean; `options_for` gives the options one backend's case carries, which are its
identity: only the options that backend declares, normalized (`cache=OFF` -> `off`, `0016` -> `16`), and only
where they differ from the default, since an option of another backend or a default changes nothing measured.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from infermeter.core.errors import InfermeterError, UsageError

Pairs = tuple[tuple[str, str], ...]
_TRUE = ("on", "true", "1", "yes")
_FALSE = ("off", "false", "0", "no")


class HasOptions(Protocol):
    """A case of any task: inference `Case` and `GenerateCase` both answer `option(key, default)`."""

    def option(self, key: str, default: str | None = None) -> str | None:
        """The value given for `key`, or `default`."""


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


@dataclass(frozen=True, kw_only=True)
class Option:
    """One declared option: its full key (`backend.name`, or a shared key such as `cache`) and what it does."""

    key: str
    help: str
    # True for an option that changes only how an INT8 graph is made: a case at another precision drops it
    # (`for_precision`), so the fp32 case of `-b openvino:int8_source=qdq` is the plain fp32 case.
    int8_only: bool = False
    kind: ClassVar[str] = "text"

    def parse(self, raw: str) -> str:
        """`raw` in its canonical spelling; UsageError (with a did-you-mean where one fits) when it is invalid."""
        return raw

    def default_text(self) -> str | None:
        """The default in canonical spelling (None: unset)."""
        return None

    def accepts(self) -> str:
        """The values accepted, in words (for `infermeter backends --options`)."""
        return "text"

    def text(self, case: HasOptions) -> str | None:
        """The case's value for this option, checked and canonical, or the default."""
        raw = case.option(self.key)
        return self.default_text() if raw is None else self.parse(raw)

    def error(self, raw: str, expected: str, hint: str = "") -> UsageError:
        """The UsageError for a bad value: names the key, the value and what is expected."""
        return UsageError(f"{self.key}={raw!r}: {expected}{hint}")


@dataclass(frozen=True, kw_only=True)
class Choice(Option):
    """One of a fixed set of words (matched case-insensitively)."""

    choices: tuple[str, ...]
    default: str
    kind: ClassVar[str] = "choice"

    def parse(self, raw: str) -> str:
        for choice in self.choices:
            if raw.strip().lower() == choice.lower():
                return choice
        raise self.error(raw, f"use one of {', '.join(self.choices)}", _did_you_mean(raw.strip(), self.choices))

    def default_text(self) -> str:
        return self.default

    def accepts(self) -> str:
        return " | ".join(self.choices)

    def value(self, case: HasOptions) -> str:
        """The chosen word."""
        return self.parse(case.option(self.key) or self.default)


@dataclass(frozen=True, kw_only=True)
class Switch(Option):
    """On or off (`on/off`, `true/false`, `1/0`, `yes/no`)."""

    default: bool
    kind: ClassVar[str] = "switch"

    def parse(self, raw: str) -> str:
        word = raw.strip().lower()
        if word in _TRUE:
            return "on"
        if word in _FALSE:
            return "off"
        raise self.error(raw, "use on or off")

    def default_text(self) -> str:
        return "on" if self.default else "off"

    def accepts(self) -> str:
        return "on | off"

    def value(self, case: HasOptions) -> bool:
        """Whether the switch is on."""
        return self.text(case) == "on"


def _number_text(number: float) -> str:
    text = repr(number)
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True, kw_only=True)
class Number(Option):
    """A real number in [`minimum`, `maximum`] (`minimum` excluded when `above` is set)."""

    default: float
    minimum: float = 0.0
    maximum: float | None = None
    above: bool = False
    kind: ClassVar[str] = "number"
    noun: ClassVar[str] = "a number"

    def convert(self, text: str) -> float:
        """`text` as this option's kind of number (ValueError when it is none)."""
        return float(text)

    def parse(self, raw: str) -> str:
        try:
            number = self.convert(raw.strip())
        except ValueError:
            raise self.error(raw, f"use {self.accepts()}") from None
        low_ok = number > self.minimum if self.above else number >= self.minimum
        if not low_ok or (self.maximum is not None and number > self.maximum) or number != number:
            raise self.error(raw, f"use {self.accepts()}")
        return _number_text(number)

    def default_text(self) -> str:
        return _number_text(self.default)

    def accepts(self) -> str:
        low = f"{'>' if self.above else '>='} {_number_text(self.minimum)}"
        return f"{self.noun} {low}" + (f" and <= {_number_text(self.maximum)}" if self.maximum is not None else "")

    def value(self, case: HasOptions) -> float:
        """The number."""
        return self.convert(self.text(case) or self.default_text())


@dataclass(frozen=True, kw_only=True)
class Integer(Number):
    """A whole number of at least `minimum`."""

    default: int
    minimum: int = 0
    kind: ClassVar[str] = "int"
    noun: ClassVar[str] = "an integer"

    def convert(self, text: str) -> int:
        return int(text)

    def value(self, case: HasOptions) -> int:
        """The number."""
        return self.convert(self.text(case) or self.default_text())


@dataclass(frozen=True, kw_only=True)
class Text(Option):
    """Free text (a path, a shape list…), checked by `check` when given (it raises an InfermeterError)."""

    default: str | None = None
    check: Callable[[str], object] | None = None
    describe: str = "text"

    def parse(self, raw: str) -> str:
        value = raw.strip()
        if not value:
            raise self.error(raw, f"give a value ({self.describe})")
        if self.check is not None:
            try:
                self.check(value)
            except InfermeterError as exc:  # a shape or path error is still a usage error of this option
                raise UsageError(str(exc)) from exc
        return value

    def default_text(self) -> str | None:
        return self.default

    def accepts(self) -> str:
        return self.describe

    def value(self, case: HasOptions) -> str | None:
        """The text, or the default."""
        return self.text(case)


# Shared by every backend with a compiled-artifact cache.
CACHE = Switch(key="cache", default=True, help="read and write the compiled-artifact cache (off: build every time)")


# ONNX Runtime's static calibration methods (`quantizers.ort_quant` quantizes with them).
CALIBRATION_METHODS = ("minmax", "entropy", "percentile")
# Read by the build stage (`quantizers.onthefly`) for backends that quantize a float model on the fly.
QUANTIZE_CALIB = Text(key="quantize.calib", help="calibration data for int8 on the fly (default: random inputs, "
                      "with a warning)", describe="data path (.npz, folder, file.py:fn)", int8_only=True)  # fmt: skip
QUANTIZE_METHOD = Choice(key="quantize.method", choices=CALIBRATION_METHODS, default="minmax",
                         help="int8 calibration method", int8_only=True)  # fmt: skip
QUANTIZE_PER_CHANNEL = Switch(key="quantize.per_channel", default=False, help="per-channel weight scales for int8",
                              int8_only=True)  # fmt: skip
QUANTIZE_OPTIONS: tuple[Option, ...] = (QUANTIZE_CALIB, QUANTIZE_METHOD, QUANTIZE_PER_CHANNEL)


def option_catalog() -> dict[str, Option]:
    """Every option any registered backend (of any task) declares, by key."""
    from infermeter.backends.registry import registry_generation

    return _catalog(registry_generation())


@functools.cache
def _catalog(generation: int) -> dict[str, Option]:
    """The catalog at one generation of the registry (`generation` is only the cache key)."""
    from infermeter.backends.registry import backend_class, registered

    catalog: dict[str, Option] = {}
    for entry in registered():
        for option in backend_class(entry.name).options:
            catalog.setdefault(option.key, option)
    return catalog


def check_options(options: Iterable[tuple[str, str]]) -> None:
    """UsageError (exit 2) for an option no backend declares or a value its declaration refuses, before any case
    runs. The message names the option and suggests the closest known key or value."""
    catalog = option_catalog()
    for key, value in options:
        option = catalog.get(key)
        if option is None:
            hint = _did_you_mean(key, catalog) or f"; known options: {', '.join(sorted(catalog))}"
            raise UsageError(f"-O {key}={value}: unknown option{hint} (see `infermeter backends --options`)")
        option.parse(value)


def options_for(backend: str, options: Iterable[tuple[str, str]]) -> Pairs:
    """The options a case of `backend` carries (and is identified by): every option it declares, checked and
    canonical, except those equal to their default. Every key given must be known to some backend
    (`check_options`): an option is never dropped unchecked."""
    from infermeter.backends.registry import backend_class

    given = tuple(options)
    check_options(given)
    declared = {option.key: option for option in backend_class(backend).options}
    kept = []
    for key, raw in given:
        option = declared.get(key)
        if option is None:
            continue
        value = option.parse(raw)
        if value != option.default_text():
            kept.append((key, value))
    return tuple(sorted(kept))


def for_precision(options: Pairs, precision: str) -> Pairs:
    """`options` as a case at `precision` carries them: at any precision but int8, without the options that change
    only how an INT8 graph is made (`Option.int8_only`), since they change nothing measured there."""
    if precision == "int8":
        return options
    catalog = option_catalog()
    return tuple((key, value) for key, value in options if not (key in catalog and catalog[key].int8_only))
