"""Engines' own warnings as findings: what ONNX Runtime's C++ logger writes to stderr and what OpenVINO and torch
raise as Python warnings while a case loads and runs its first inferences is captured in the worker, deduplicated
(names and numbers stood for by `…`), counted, and kept on the case (`EngineLog`); a warning that says the engine
could not optimize part of the model also becomes the case's `engine_warning`."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from infermeter.results.records.engine_log import EngineLog, EngineWarning
from infermeter.results.schema import CaseResult, CaseWarning

MAX_TEXTS = 200  # distinct full texts kept per warning (a cap against a log of thousands)
MAX_OTHER_LINES = 50  # log lines of no known format kept per case
CRASH_LINES = 5  # log lines appended to the error of a case whose load failed
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# ONNX Runtime: `2026-12-07 21:36:26.588 [W:onnxruntime:, inference_session.cc:3368 operator()] text`.
ORT_LINE = re.compile(r"\[([WE]):onnxruntime:[^\]]*?\s[\w.]+:\d+\s[^\]]*\]\s*(.*)")
NAMES = re.compile(r"'[^']*'|\"[^\"]*\"|\b\d+(?:\.\d+)?\b")
# Warnings that say part of the model was not optimized (the likely reason for a slow figure).
UNOPTIMIZED = re.compile(
    r"(could not|cannot|can't|unable to|failed to)( be)? (optimi[sz]e|fuse|fold)|not (be )?optimi[sz]ed|"
    r"fall(s|ing)? ?back|not assigned to the preferred execution provider|not supported by",
    re.IGNORECASE,
)
# Messages of our own making, not findings: the build stage asks ORT to save an ISA-specific graph on purpose.
OWN_DOING = ("Serializing optimized model with Graph Optimization level greater than ORT_ENABLE_EXTENDED",)
REMEDIES = (
    ("Removing initializer", "the file carries weights no node uses: strip them (onnx-simplifier) to shrink it"),
    ("not assigned to the preferred execution provider", "those nodes run on the CPU: see the provider's operator "
     "support, or export the model with operators it has"),
    ("TracerWarning", "the traced graph may not generalise to other inputs: export with dynamic shapes"),
)  # fmt: skip


@dataclass
class Capture:
    """What was captured: stderr lines (C++ loggers write to file descriptor 2) and Python warnings."""

    lines: list[str] = field(default_factory=list)
    python: list[warnings.WarningMessage] = field(default_factory=list)


def _owns_stderr() -> bool:
    """True where redirecting file descriptor 2 hides nothing of ours: a worker process, or a main process whose
    stderr is no terminal (an in-process run on a terminal draws its live progress there)."""
    import multiprocessing

    return multiprocessing.parent_process() is not None or not sys.stderr.isatty()


@contextlib.contextmanager
def capture_engine_log() -> Iterator[Capture]:
    """Capture stderr at the file-descriptor level (where `_owns_stderr`) and every Python warning for the
    block; restored after."""
    capture = Capture()
    with contextlib.ExitStack() as stack:
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        if _owns_stderr():
            stack.enter_context(_fd_capture(capture))
        try:
            yield capture
        finally:
            capture.python = list(caught or [])


@contextlib.contextmanager
def _fd_capture(capture: Capture) -> Iterator[None]:
    """File descriptor 2 into a temporary file for the block (C++ loggers write there, below Python)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            capture.lines = [ANSI.sub("", line).rstrip() for line in sink.read().decode(errors="replace").splitlines()]


def _engine_of(module: str) -> str:
    for name in ("onnxruntime", "openvino", "torch", "tensorflow", "tvm"):
        if name in module:
            return name
    return "python"


def _parsed(capture: Capture) -> tuple[list[tuple[str, str]], list[str]]:
    """(engine, text) of each warning, and the lines of no known format."""
    found: list[tuple[str, str]] = []
    other: list[str] = []
    for line in capture.lines:
        match = ORT_LINE.search(line)
        if match:
            found.append(("onnxruntime", match.group(2).strip()))
        elif line.strip():
            other.append(line)
    for caught in capture.python:
        where = f"{caught.filename} {getattr(caught.category, '__module__', '')}"
        found.append((_engine_of(where), f"{caught.category.__name__}: {caught.message}"))
    return found, other


def engine_log(capture: Capture) -> EngineLog:
    """The capture deduplicated: one `EngineWarning` per engine and message shape, counted."""
    found, other = _parsed(capture)
    groups: dict[tuple[str, str], list[str]] = {}
    for engine, text in found:
        if any(mark in text for mark in OWN_DOING):
            continue
        shape = NAMES.sub(lambda m: m.group(0)[0] + "…" + m.group(0)[0] if m.group(0)[0] in "'\"" else "…", text)
        groups.setdefault((engine, shape), []).append(text)
    out = []
    for (engine, message), texts in groups.items():
        distinct = list(dict.fromkeys(texts))[:MAX_TEXTS]
        remedy = next((fix for mark, fix in REMEDIES if mark in message), "")
        out.append(EngineWarning(engine, message, len(texts), distinct, remedy, bool(UNOPTIMIZED.search(message))))
    return EngineLog(out, other[-MAX_OTHER_LINES:])


def attach_engine_log(result: CaseResult, capture: Capture, built: dict[str, Any] | None = None) -> None:
    """Keep the capture on the case, with what the engines said while its artifact was built (`built`, an
    `EngineLog` on-disk form): the `EngineLog` record, an `engine_warning` per warning that says the engine could
    not optimize part of the model, and, for a case that failed, the last log lines with its error."""
    from infermeter.results.records import write_record
    from infermeter.results.records.engine_log import merge_warnings

    log = engine_log(capture)
    if built:
        earlier = EngineLog.from_dict(built)
        log = EngineLog(merge_warnings([earlier, log]), [*earlier.other_lines, *log.other_lines][-MAX_OTHER_LINES:])
    if log.warnings or log.other_lines:
        write_record(result, log)
    for warning in log.warnings:
        if warning.unoptimized:
            detail = f"{warning.engine} ×{warning.count}"
            result.warnings.append(CaseWarning("engine_warning", f"{warning.engine}: {warning.texts[0]}", detail))
    if result.status != "ok" and result.error is not None:
        tail = _crash_tail(capture.lines, result.error)
        if tail:
            result.error += f" (engine log, last lines: {' | '.join(tail)})"


def _crash_tail(lines: list[str], error: str) -> list[str]:
    """The last log lines of a failed case, source locations dropped (`errors.engine_message`), those the error
    already says left out."""
    from infermeter.core.errors import engine_message

    tail: list[str] = []
    for line in lines[-CRASH_LINES:]:
        match = ORT_LINE.search(line)
        text = engine_message(match.group(2) if match else line, 200)
        if text and text[:60] not in error:
            tail.append(text)
    return tail
