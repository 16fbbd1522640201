"""One-line errors for a model an engine could not read, ending with the remedy: OpenVINO's TFLite frontend names
the operators or features it lacks, and the `tflite` backend (LiteRT's own interpreter) is the way to run it."""

from __future__ import annotations

import re

from infermeter.core.errors import cut_at_word, engine_message
from infermeter.models.spec import ModelSpec

# What OpenVINO's frontends say when an operator or feature has no conversion: the names after the colon.
_LACKING = re.compile(
    r"(?:no conversion rule|does not support|not supported|unsupported|cannot be converted|not implemented)"
    r"[^:\n]{0,80}:\s*"
    r"([A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_][\w]*)*)",
    re.IGNORECASE,
)
_OPERATOR = re.compile(
    r"(?:No translator found for|\b(?:operation|operator|op)(?:\s+type)?)\s+'?([A-Z][A-Z0-9_]{2,})'?"
)
TFLITE_REMEDY = "run it with the tflite backend (-b tflite), LiteRT's own interpreter, which reads every TFLite feature"
REASON_CHARS = 300


def lacking(text: str) -> str | None:
    """The operators or features an engine's read error names as unsupported (`VAR_HANDLE, READ_VARIABLE`), or
    None when it names none."""
    found = _LACKING.search(text) or _OPERATOR.search(text)
    return found.group(1).strip() if found else None


def openvino_read_error(model: ModelSpec, error: BaseException) -> str:
    """`OpenVINO could not read MODEL: reason` on one line (the reason cut at a word); for a .tflite file the
    operators it lacks first and the tflite backend as the remedy last."""
    reason = engine_message(error, REASON_CHARS)
    if model.kind != "tflite":
        return f"OpenVINO could not read {model.ref}: {reason}"
    missing = lacking(str(error))
    head = f"OpenVINO's TFLite frontend could not read {model.ref}"
    head += f" (it lacks {cut_at_word(missing, 120)})" if missing else ""
    return f"{head}: {reason.rstrip('.')}; {TFLITE_REMEDY}"
