"""Every built artifact checked before any timing, in one place: read back as its engine reads it, loaded, run once,
and compared with FP32 at the case's own thread count. A failure raises `BuildInvalid` (the case's status
`build_invalid`) naming the check that failed, the likely cause and the remedy that works; nothing is timed and no
speedup is computed, and a sweep goes on with its other cases.

- a quantized ONNX graph (ONNX Runtime's quantizer): `onnx.checker`, a session load, parity (`check_quantized`);
  seen: the quantizer writing an invalid Transpose, a QDQ MLP computed with a cosine of 0.44 against FP32;
- an OpenVINO IR (NNCF's): `core.read_model`, the compile, parity (`check_openvino_ir`); a truncated .bin or
  .xml is refused here rather than at load;
- a backend's own compiled artifact (ONNX Runtime's optimized graph, OpenVINO's exported blob, an engine, a
  compiled library): the case's session loaded from it, parity (`check_compiled`).

The remedy for a quantizer's graph: nodes left in float (`quantize --exclude`), per-tensor weight scales instead of
per-channel, or the other engine's INT8 graph."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.core.errors import BuildInvalid, InfermeterError, cut_at_word, engine_message

if TYPE_CHECKING:
    from infermeter.backends.base import Backend
    from infermeter.core.case import Case
    from infermeter.models.spec import ModelSpec

# Below this cosine (flattened first output, the build against FP32 on the same inputs) a build is wrong, not merely
# less accurate: INT8 of a sound graph sits above 0.99 on random inputs; a broken one was seen at 0.44.
MIN_COSINE = 0.9
_NODE = re.compile(r"(?:node|Node)\s*(?:name)?[:\s]*'?\(?([\w./:-]+)\)?'?")


@dataclass(frozen=True)
class BuildCheck:
    """One check of a built artifact: its name as the message gives it, what it does (given the previous check's
    result; the last returns the artifact's first output), and what its failure most likely means."""

    name: str
    run: Callable[[Any], Any]
    cause: str


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two arrays, flattened (1.0 for two zero arrays)."""
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return 1.0 if norm == 0 else float(x @ y) / norm


def check_build(what: str, checks: Sequence[BuildCheck], reference: Callable[[], Any], threads: int,
                remedy: Callable[[str | None], str], suspects: str) -> None:  # fmt: skip
    """Run `checks` in order, then compare the last one's output with FP32's (`reference()`; None: no FP32
    reference here, parity is not checked). Raises `BuildInvalid`: "`what` failed CHECK: CAUSE; REMEDY", the remedy
    given the node the engine's message names, if any; `suspects` says who computes a wrong output."""
    value: Any = None
    for check in checks:
        try:
            value = check.run(value)
        except (BuildInvalid, _NoVerdict):
            raise
        except Exception as exc:
            found = _NODE.search(str(exc))
            cause = f"{check.cause} ({engine_message(exc, 240)})"
            raise BuildInvalid(
                f"{what} failed {check.name}: {cause}; {remedy(found.group(1) if found else None)}"
            ) from exc
    want = reference()
    if want is None:
        return
    if np.shape(value) != np.shape(want):
        cause = f"its output has the shape {np.shape(value)}, FP32's {np.shape(want)} on the same inputs: {suspects}"
        raise BuildInvalid(f"{what} failed parity against FP32: {cut_at_word(cause, 300)}; {remedy(None)}")
    similarity = cosine(np.asarray(value), np.asarray(want))
    if not similarity >= MIN_COSINE:  # NaN fails too
        cause = (f"its output has a cosine of {similarity:.2f} with FP32's at {threads} thread(s) (a sound build "
                 f"stays above {MIN_COSINE}): {suspects}")  # fmt: skip
        raise BuildInvalid(f"{what} failed parity against FP32: {cut_at_word(cause, 300)}; {remedy(None)}")


def _quantizer_remedy(model_ref: str, per_channel: bool, flag: str, other: str) -> Callable[[str | None], str]:
    """What to do about a quantizer's wrong graph: the named node left in float (`infermeter quantize` with `flag`
    naming its engine), per-tensor scales (ONNX Runtime's per-channel option), the other engine's INT8 graph
    (`other`), or the sensitivity ranking."""

    def remedy(node: str | None) -> str:
        fixes = []
        if node:
            fixes.append(f"leave {node} in float (infermeter quantize {model_ref}{flag} --exclude {node}, then bench "
                         "that file)")  # fmt: skip
        if per_channel:
            fixes.append("quantize per-tensor instead of per-channel (-O quantize.per_channel=off)")
        if other:
            fixes.append(other)
        fixes.append(f"find the nodes to keep in float with infermeter quantize {model_ref}{flag} --sensitivity")
        return "; or ".join(fixes)

    return remedy


def _ort_session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_fp32_output(path: Path, feeds: dict[str, np.ndarray], threads: int) -> np.ndarray:
    """The first output of the FP32 ONNX graph `path` on `feeds`, by ONNX Runtime's CPU provider at `threads`."""
    return np.asarray(_ort_session(path, threads).run(None, feeds)[0])


def check_quantized(fp32: Path, int8: Path, feeds: dict[str, np.ndarray], threads: int, model_ref: str,
                    per_channel: bool) -> None:  # fmt: skip
    """Raise `BuildInvalid` when the INT8 graph `int8` (ONNX Runtime's quantizer) is not a valid graph, does not
    load or run, or computes something else than `fp32` on `feeds` (cosine below MIN_COSINE)."""
    import onnx

    checks = [
        BuildCheck(
            "onnx.checker", lambda _: onnx.checker.check_model(str(int8)), "the quantizer wrote an invalid graph"
        ),
        BuildCheck(
            "the session load",
            lambda _: _ort_session(int8, threads),
            "ONNX Runtime cannot load what the quantizer wrote",
        ),
        BuildCheck("a run", lambda session: session.run(None, feeds)[0], "ONNX Runtime cannot run what it loaded"),
    ]
    remedy = _quantizer_remedy(model_ref, per_channel, "", "")
    check_build("the quantized graph", checks, lambda: ort_fp32_output(fp32, feeds, threads), threads, remedy,
                "the quantizer or the engine computes it wrongly")  # fmt: skip


def openvino_checks(ir: Path, feeds: dict[str, np.ndarray], config: dict[str, Any]) -> list[BuildCheck]:
    """The checks of an OpenVINO IR as the CPU plugin runs it with `config`: `core.read_model`, the compile, a run
    on `feeds` (its first output)."""
    import openvino as ov

    core = ov.Core()
    return [
        BuildCheck(
            "core.read_model",
            lambda _: core.read_model(str(ir)),
            "OpenVINO cannot read the IR back (a truncated or corrupt .xml or .bin)",
        ),
        BuildCheck("the compile", lambda model: core.compile_model(model, "CPU", config), "OpenVINO cannot compile it"),
        BuildCheck("a run", lambda compiled: np.asarray(compiled(feeds)[0]), "OpenVINO cannot run it"),
    ]


def check_openvino_ir(source: Path, ir: Path, feeds: dict[str, np.ndarray], threads: int, model_ref: str) -> None:
    """Raise `BuildInvalid` when the IR `ir` (NNCF's, from the float model `source`: ONNX or an IR) cannot be read
    back with `core.read_model`, compiled, run, or computes something else than FP32 at `threads` thread(s)
    (ONNX Runtime on an ONNX source, OpenVINO's f32 on an IR source)."""
    import openvino as ov

    config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}

    def reference() -> np.ndarray:
        if source.suffix.lower() == ".xml":
            return np.asarray(ov.Core().compile_model(str(source), "CPU", config)(feeds)[0])
        return ort_fp32_output(source, feeds, threads)

    checks = openvino_checks(ir, feeds, config)

    other = "run ONNX Runtime's QDQ graph on OpenVINO instead (-O openvino.int8_source=qdq)"
    remedy = _quantizer_remedy(model_ref, False, " --engine openvino", other)
    check_build("the NNCF-quantized IR", checks, reference, threads, remedy, "NNCF or OpenVINO computes it wrongly")


def check_compiled(backend: Backend, spec: ModelSpec, model: ModelSpec, case: Case, target: Path) -> None:
    """Raise `BuildInvalid` when `backend`'s own artifact at `target` (built from `model`, the case's model or its
    INT8 graph) does not load as `case` loads it, does not run, or computes something else than `spec` in FP32 on
    ONNX Runtime at the case's threads (no parity where the model has no ONNX form ONNX Runtime runs)."""
    from infermeter.backends._common import dummy_feeds
    from infermeter.results.artifact import Artifact, CacheState

    try:
        feeds = dummy_feeds(model, case)
    except InfermeterError:  # no inputs to run it on (a free dim nobody set): no run, no verdict on one
        feeds = None
    artifact = Artifact(str(target), "", cache=CacheState.BUILT)
    references: list[np.ndarray | None] = []

    def reference() -> np.ndarray | None:
        if not references:
            references.append(_fp32_reference(spec, feeds, case.threads) if feeds is not None else None)
        return references[0]

    def run(session: Any) -> np.ndarray:
        try:
            if feeds is None:
                raise _NoVerdict
            outputs = session.run(session.prepare(feeds))
            session.sync()
            return np.array(session.outputs_to_numpy(outputs)[0], copy=True)
        except Exception:
            # Generated inputs are not every model's inputs (indices, a branch's control value): a run that fails
            # on them says something of the build only when FP32 runs on the same inputs.
            if reference() is None:
                raise _NoVerdict from None
            raise
        finally:
            session.close()  # before the reference loads: one model in memory at a time

    checks = [
        BuildCheck(
            "the session load",
            lambda _: backend.load(model, case, artifact),
            f"{backend.name} cannot load the artifact it built (truncated, corrupt or stale)",
        ),
        BuildCheck("a run", run, f"{backend.name} cannot run the artifact it built"),
    ]
    suspects = f"{backend.name}'s build computes it wrongly" + (
        f", or {case.precision} arithmetic overflows (infermeter quantize {spec.ref} --to {case.precision} finds "
        "the layers to keep in FP32)" if case.precision in ("fp16", "bf16") else "")  # fmt: skip
    remedy = (f"find the first node where it diverges with infermeter parity {spec.ref} -b {backend.name} "
              f"--precision {case.precision} --localize, or bench it on another engine")  # fmt: skip
    with contextlib.suppress(_NoVerdict):  # the case's own run then says what its engine says
        check_build(f"{backend.name}'s built artifact", checks, reference, case.threads, lambda _node: remedy,
                    suspects)  # fmt: skip


class _NoVerdict(Exception):
    """The built artifact could not be judged: it failed on generated inputs on which FP32 fails too."""


def _fp32_reference(spec: ModelSpec, feeds: dict[str, np.ndarray], threads: int) -> np.ndarray | None:
    """FP32's first output of `spec` on ONNX Runtime, or None where it has no ONNX form ONNX Runtime can run (an IR,
    a .tflite file, custom operators): the load and run checks stand alone there."""
    if spec.kind in ("openvino_ir", "tflite"):
        return None
    try:
        from infermeter.models.convert import onnx_for

        return ort_fp32_output(onnx_for(spec).path, feeds, threads)
    except Exception:  # no reference is no verdict, not a wrong build
        return None
