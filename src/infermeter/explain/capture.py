"""What an engine says while it loads: its native library's lines on the process's stderr (file descriptor 2,
where ONNX Runtime's and OpenVINO's C++ loggers write) and Python warnings, kept as text for the findings."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator

from infermeter.backends.engine_log import capture_engine_log

# Lines worth quoting: the engine's own warnings (ONNX Runtime's `[W:onnxruntime:...]`, OpenVINO's `[ WARNING ]`).
_WARNING = re.compile(r"\[W:onnxruntime|\bwarning\b", re.IGNORECASE)
_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")
MAX_CHARS = 300


def warning_lines(text: str) -> list[str]:
    """The warning lines of captured output, colour codes and timestamps taken off, each cut to MAX_CHARS."""
    lines = []
    for raw in _ESCAPES.sub("", text).splitlines():
        if _WARNING.search(raw):
            line = re.sub(r"^\S+ \S+ \[W:onnxruntime:[^\]]*\]\s*", "", raw.strip())
            lines.append(line[:MAX_CHARS])
    return lines


@contextlib.contextmanager
def captured_warnings(into: list[str]) -> Iterator[None]:
    """Collect into `into` the warnings written to fd 2 and the Python warnings raised inside the block (the one
    capture of an engine's log, `backends.engine_log`); the other stderr lines are written back to stderr after."""
    with capture_engine_log() as capture:
        try:
            yield
        finally:
            into.extend(warning_lines("\n".join(capture.lines)))
    into.extend(str(w.message)[:MAX_CHARS] for w in capture.python)
    rest = "\n".join(line for line in capture.lines if not _WARNING.search(line))
    if rest.strip():
        print(rest, file=sys.stderr)
