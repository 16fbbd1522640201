"""What an engine says while it loads: its native library's lines on the process's stderr (file descriptor 2,
where ONNX Runtime's and OpenVINO's C++ loggers write) and Python warnings, kept as text for the findings."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

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
    """Collect into `into` the warnings written to fd 2 and the Python warnings raised inside the block; the
    other stderr lines are written back to stderr afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink, warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            into.extend(warning_lines(text))
            into.extend(str(w.message)[:MAX_CHARS] for w in raised)
            rest = "\n".join(line for line in text.splitlines() if not _WARNING.search(line))
            if rest.strip():
                print(rest, file=sys.stderr)
