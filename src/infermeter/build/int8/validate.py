"""A quantized ONNX graph checked before any timing: `onnx.checker`, a session load, and parity against the FP32
graph at the case's own thread count. A failure raises `BuildInvalid` (the case's status `build_invalid`) naming
the check, the likely cause and the remedy that works: nodes left in float (`quantize --exclude`), or per-tensor
weight scales instead of per-channel. Seen: ONNX Runtime's quantizer writing an invalid Transpose, and a QDQ MLP
computed with a cosine of 0.44 against FP32."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.core.errors import BuildInvalid, cut_at_word, engine_message

# Below this cosine (flattened first output, INT8 against FP32 on the same inputs) a build is wrong, not merely
# less accurate: INT8 of a sound graph sits above 0.99 on random inputs; a broken one was seen at 0.44.
MIN_COSINE = 0.9
_NODE = re.compile(r"(?:node|Node)\s*(?:name)?[:\s]*'?\(?([\w./:-]+)\)?'?")


def _remedy(model_ref: str, per_channel: bool, node: str | None) -> str:
    fixes = []
    if node:
        fixes.append(f"leave {node} in float (infermeter quantize {model_ref} --exclude {node}, then bench that file)")
    if per_channel:
        fixes.append("quantize per-tensor instead of per-channel (-O quantize.per_channel=off)")
    fixes.append(f"find the nodes to keep in float with infermeter quantize {model_ref} --sensitivity")
    return "; or ".join(fixes)


def _fail(check: str, cause: str, model_ref: str, per_channel: bool, node: str | None = None) -> BuildInvalid:
    return BuildInvalid(f"the quantized graph failed {check}: {cause}; {_remedy(model_ref, per_channel, node)}")


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two arrays, flattened (1.0 for two zero arrays)."""
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return 1.0 if norm == 0 else float(x @ y) / norm


def check_quantized(fp32: Path, int8: Path, feeds: dict[str, np.ndarray], threads: int, model_ref: str,
                    per_channel: bool) -> None:  # fmt: skip
    """Raise `BuildInvalid` when the INT8 graph `int8` is not a valid graph, does not load, or computes something
    else than `fp32` on `feeds` (cosine below MIN_COSINE)."""
    import onnx

    try:
        onnx.checker.check_model(str(int8))
    except Exception as exc:
        text = engine_message(exc, 240)
        found = _NODE.search(str(exc))
        cause = f"the quantizer wrote an invalid graph ({text})"
        raise _fail("onnx.checker", cause, model_ref, per_channel, found.group(1) if found else None) from exc
    try:
        session = _session(int8, threads)
    except Exception as exc:
        found = _NODE.search(str(exc))
        cause = f"ONNX Runtime cannot load what the quantizer wrote ({engine_message(exc, 240)})"
        raise _fail("the session load", cause, model_ref, per_channel, found.group(1) if found else None) from exc
    got = session.run(None, feeds)[0]
    want = _session(fp32, threads).run(None, feeds)[0]
    similarity = cosine(np.asarray(got), np.asarray(want))
    if not similarity >= MIN_COSINE:  # NaN fails too
        cause = (f"its output has a cosine of {similarity:.2f} with FP32's at {threads} thread(s) (a sound INT8 "
                 f"build stays above {MIN_COSINE}): the quantizer or the engine computes it wrongly")  # fmt: skip
        raise _fail("parity against FP32", cut_at_word(cause, 300), model_ref, per_channel)
