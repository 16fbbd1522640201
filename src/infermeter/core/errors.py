"""Typed errors. Library code raises these; only the CLI turns them into a message and an exit code."""

from __future__ import annotations

import re


class InfermeterError(Exception):
    """Base of every error infermeter raises on purpose. The message says what was wrong and what to do."""

    exit_code = 2


class UsageError(InfermeterError):
    """A flag, value or argument the user gave cannot be used as given."""


class ModelError(InfermeterError):
    """The model cannot be found, read or understood."""


class InputSpecError(InfermeterError):
    """An input name, shape or dtype does not fit the model."""


class BackendUnavailable(InfermeterError):
    """The backend cannot run here (framework or hardware missing); the message carries the install hint."""


class BuildInvalid(InfermeterError):
    """A built artifact (a quantized graph) that failed a check before any timing: the case's status is
    `build_invalid`, and the message names the check, the likely cause and the remedy."""

    status = "build_invalid"


def failure_status(exc: BaseException) -> str:
    """The status of a case stopped by `exc`: `build_invalid` for a wrong build, else `failed`."""
    return BuildInvalid.status if isinstance(exc, BuildInvalid) else "failed"


class BackendError(InfermeterError):
    """The backend failed while loading or running a model."""


class ResultsError(InfermeterError):
    """A results file cannot be read or written."""


class MissingExtra(InfermeterError):
    """An optional package this needs is not installed; the message names the `infermeter[...]` extra to install."""


# Lines of an engine's exception that say where, not why: a C++ source location ("Exception from
# src/inference/src/cpp/core.cpp:84:"), a Python traceback frame, a bare heading.
_LOCATION_LINE = re.compile(r"^(?:Exception from \S+:\d+:?|File \".*\", line \d+.*|Summary:)$")
# What follows these is context for a developer (PyTorch's user-code frames, a nested traceback), not the reason.
_TAIL_START = re.compile(
    r"^(?:from user code:|Traceback \(most recent call last\):|The above exception|Set TORCH_LOGS)"
)
# "Check 'cond' failed at src/...cpp:77:" (OpenVINO), kept only for what precedes it on its line.
_CHECK_FAILED = re.compile(r"\s*Check '.*' failed at \S+:\d+:?\s*$")
# "/onnxruntime_src/.../reshape_helper.h:91 onnxruntime::ReshapeHelper::ReshapeHelper(const ...&, bool) " (ORT).
_SOURCE_FRAME = re.compile(r"\S+\.(?:h|hpp|cc|cpp|cxx|c):\d+\s+(?:[\w:~<>]+\([^)]*\)\s*(?:const\s*)?)?")


def engine_message(error: BaseException | str, max_chars: int = 400) -> str:
    """The part of an engine's exception (or its text) that says why it failed, on one line. The first line alone
    is often only a location: OpenVINO puts the reason on the following lines. So C++ source locations
    ("Exception from src/...cpp:NN:", "Check '...' failed at ...", ORT's "file.h:91 Class::method(...)"),
    traceback frames and empty lines are dropped, anything after a developer's tail ("from user code:", a nested
    traceback) too, and the rest is joined, cut at `max_chars`. Empty when nothing is left."""
    kept: list[str] = []
    for raw in str(error).splitlines():
        line = _SOURCE_FRAME.sub("", _CHECK_FAILED.sub("", raw.strip())).strip()
        if _TAIL_START.match(line) and kept:
            break
        if line and not _LOCATION_LINE.match(line) and not _TAIL_START.match(line):
            kept.append(line)
    return cut_at_word(" ".join(kept), max_chars)


def cut_at_word(text: str, max_chars: int) -> str:
    """`text` at most `max_chars` long, cut at the last space before the limit (never mid-word) and marked `…`; a
    text with no space to cut at is cut at the limit."""
    if len(text) <= max_chars:
        return text
    head = text[: max_chars - 1]
    space = head.rfind(" ")
    return (head[:space].rstrip(" ,;:") if space > 0 else head) + "…"


def describe_exception(exc: BaseException, max_chars: int = 400) -> str:
    """`TypeName: reason` for a framework's exception (reason from `engine_message`); our own errors, whose
    message is already written for a person, as they are."""
    if isinstance(exc, InfermeterError):
        return str(exc)
    reason = engine_message(exc, max_chars)
    return f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
