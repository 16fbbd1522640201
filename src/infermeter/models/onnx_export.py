"""The one PyTorch -> ONNX exporter of infermeter, used by the conversion cache (`onnx_for`) and `infermeter export`.

The torch.export-based exporter (`dynamo=True`) is tried first; when it fails, the TorchScript-based one, and the
reason the first failed is kept. When both fail, the error names the operator that neither could translate, if
that is why. Dynamic axes are `{input name: {axis: label}}`; by default every symbolic dim of the model's inputs
(batch, and seq for transformers).
"""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.core.errors import ModelError, engine_message
from infermeter.models.inputs import Feeds, generate_feeds, resolve_shapes
from infermeter.models.spec import ModelSpec

__all__ = ["DEFAULT_OPSET", "ExportError", "ExportOutcome", "default_dynamic_axes", "export_to_onnx", "trace_feeds"]
# The ONNX opset every export and conversion targets unless asked otherwise.
DEFAULT_OPSET = 18
# Trace with a batch of 2: a batch of 1 lets exporters specialise the batch dimension away.
TRACE_BATCH = 2
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")

DynamicAxes = dict[str, dict[int, str]]


class ExportError(ModelError):
    """Both exporters failed. `unsupported_op` names the operator neither could translate, when that was the cause,
    and `op_modules` where the model calls it (`models.op_origin`); `attempts` holds (exporter, reason) for each
    try."""

    def __init__(
        self,
        message: str,
        unsupported_op: str | None,
        attempts: list[tuple[str, str]],
        op_modules: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.unsupported_op = unsupported_op
        self.attempts = attempts
        self.op_modules = op_modules


@dataclass(frozen=True)
class ExportOutcome:
    """Which exporter produced the file, and why the torch.export-based one did not when it did not."""

    exporter: str
    fallback_reason: str | None
    dynamic_axes: DynamicAxes

    @property
    def note(self) -> str:
        """One line for notes and logs."""
        reason = f" (torch.export-based failed: {self.fallback_reason})" if self.fallback_reason else ""
        return f"exported with the {self.exporter} ONNX exporter{reason}"


def default_dynamic_axes(spec: ModelSpec) -> DynamicAxes:
    """Every symbolic dim of every input, labelled with its symbol (`batch`, `seq`, ...)."""
    axes: DynamicAxes = {}
    for item in spec.inputs:
        named = {axis: dim for axis, dim in enumerate(item.shape) if isinstance(dim, str)}
        if named:
            axes[item.name] = named
    return axes


def trace_feeds(spec: ModelSpec, batch: int = TRACE_BATCH, count: int = 1, seed: int = 0) -> list[Feeds]:
    """Feeds at the tracing shapes: `batch`, every other symbolic dim at its default size (or 8 without one)."""
    overrides = []
    for item in spec.inputs:
        defaults = dict(item.dim_defaults)
        dims = tuple(d if isinstance(d, int) else defaults.get(d, 8) for d in item.shape)
        overrides.append((item.name, dims))
    return generate_feeds(spec.inputs, resolve_shapes(spec.inputs, batch, overrides), count, seed)


def _clean(text: str) -> str:
    return _ANSI_RE.sub("", text)


def summarize_exception(exc: BaseException) -> str:
    """The useful line(s) of an exporter error: the torch.export summary when there is one, else its reason
    (`errors.engine_message`)."""
    text = _clean(str(exc))
    if "## Exception summary" in text:
        lines = [ln.strip() for ln in text.split("## Exception summary", 1)[1].splitlines() if ln.strip()]
        lines = [ln for ln in lines if ln not in ("⬆️",) and not ln.startswith("(Refer to")]
        summary = re.sub(r"<class '(?:[\w]+\.)*(\w+)'>", r"\1", " ".join(lines[:2]))
    else:
        reason = engine_message(text)
        summary = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
    return summary if len(summary) <= 400 else summary[:397] + "..."


def unsupported_operator(exc: BaseException) -> str | None:
    """The operator an exporter error says it could not translate, as `namespace::name`, else None."""
    text = _clean(str(exc))
    patterns = (
        r"No ONNX function found for <OpOverload\(op='([\w.]+)'",
        r"unrecognized namespace ([\w.:]+?)\.?(?:\s|$)",
        r"Exporting the operator '?([\w.:]+)'? to ONNX opset version \d+ is not supported",
        r"Couldn't export Python operator (\w+)",
        r"call_function\[target=torch\.ops\.([\w.]+?)(?:\.default)?\]",
    )
    for pattern in patterns:
        found = re.search(pattern, text)
        if found:
            op = found.group(1).removesuffix(".default")
            return op.replace(".", "::", 1) if "::" not in op else op
    return None


def _output_axes(module: Any, args: tuple[Any, ...], spec: ModelSpec, axes: DynamicAxes) -> DynamicAxes:
    """Which output axes move with the dynamic input axes: the model is run at the trace shapes and again with every
    dynamic axis one larger; an output axis whose size changed is dynamic (labelled like the input axis it tracks)."""
    import torch

    def run(call_args: tuple[Any, ...]) -> list[Any]:
        with torch.no_grad():
            out = module(*call_args)
        return list(out) if isinstance(out, tuple | list) else [out]

    bumped = []
    for item, tensor in zip(spec.inputs, args, strict=True):
        grow = [0] * tensor.dim()
        for axis in axes.get(item.name, {}):
            grow[axis] = 1
        pad = [p for g in reversed(grow) for p in (0, g)]
        bumped.append(torch.nn.functional.pad(tensor, pad, value=0) if any(grow) else tensor)
    try:
        base, grown = run(args), run(tuple(bumped))
    except Exception:
        # The model cannot run at the grown shapes: declare only the batch of each output.
        return {name: {0: "batch"} for name in spec.output_names} if any(0 in a for a in axes.values()) else {}
    sizes = {
        int(tensor.shape[axis]): label
        for item, tensor in zip(spec.inputs, args, strict=True)
        for axis, label in axes.get(item.name, {}).items()
    }
    result: DynamicAxes = {}
    for name, before, after in zip(spec.output_names, base, grown, strict=False):
        moved = {
            axis: sizes.get(int(size), f"{name}_dim{axis}")
            for axis, size in enumerate(before.shape)
            if axis < after.dim() and after.shape[axis] != size
        }
        if moved:
            result[name] = moved
    return result


def _run_exporter(
    model: Any, args: tuple[Any, ...], target: Path, spec: ModelSpec, axes: DynamicAxes | None, opset: int, dynamo: bool
) -> None:
    """One call of torch's ONNX exporter (`dynamo`: the torch.export-based one), its warnings silenced."""
    import torch

    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")
        extra: dict[str, Any] = {"external_data": False, "optimize": True} if dynamo else {}
        torch.onnx.export(
            model,
            args,
            str(target),
            input_names=[item.name for item in spec.inputs],
            output_names=list(spec.output_names),
            dynamic_axes=axes,
            opset_version=opset,
            dynamo=dynamo,
            verbose=False,
            **extra,
        )


def _export_error(
    spec: ModelSpec,
    opset: int,
    module: Any,
    args: tuple[Any, ...],
    attempts: list[tuple[str, str]],
    unsupported: str | None,
) -> ExportError:
    """The error when every exporter failed: the unsupported operator and where the model calls it, when known."""
    tried = "; ".join(f"{name}: {reason}" for name, reason in attempts)
    origins: tuple[str, ...] = ()
    if unsupported:
        from infermeter.models.op_origin import operator_origins

        origins = tuple(operator_origins(module, args, unsupported))
        called = f", called in {'; '.join(origins)}" if origins else ""
        message = (
            f"could not export {spec.ref!r} to ONNX: operator {unsupported} is not supported by the ONNX exporters "
            f"(opset {opset}){called}; replace it with standard torch ops or register an ONNX translation for it "
            f"[{tried}]"
        )
    else:
        message = f"could not export {spec.ref!r} to ONNX: {tried}"
    return ExportError(message, unsupported, attempts, origins)


def export_to_onnx(
    spec: ModelSpec,
    target: Path,
    opset: int = DEFAULT_OPSET,
    dynamic_axes: DynamicAxes | None = None,
    module: Any = None,
    exporters: tuple[str, ...] = ("dynamo", "torchscript"),
) -> ExportOutcome:
    """Export the torch form of `spec` (or the given `module`, called with the spec's inputs positionally) to one
    self-contained ONNX file at `target`. Raises ExportError naming the failing operator when neither exporter can.

    `.pt2` programs are handed to the torch.export-based exporter as they are (their dynamic dims are their own).
    """
    import torch

    from infermeter.models.torch_form import load_torch_module

    axes = default_dynamic_axes(spec) if dynamic_axes is None else dynamic_axes
    program = None
    if module is None:
        if spec.kind == "pt2":
            from infermeter.models.sources import load_exported_program

            program = load_exported_program(spec)
        module = load_torch_module(spec)
    feeds = trace_feeds(spec)[0]
    args = tuple(torch.from_numpy(feeds[item.name]) for item in spec.inputs)
    output_axes = _output_axes(module, args, spec, axes)
    # The exporters log a warning per op they cannot register and print progress; neither is for our users.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    attempts: list[tuple[str, str]] = []
    unsupported: str | None = None
    for exporter in exporters:
        dynamo = exporter == "dynamo"
        label = "torch.export-based" if dynamo else "TorchScript-based"
        if program is not None and not dynamo:
            attempts.append((label, "a .pt2 program has no TorchScript form"))
            continue
        try:
            dynamic = None if program is not None else {**axes, **output_axes}
            _run_exporter(program if program is not None else module, args, target, spec, dynamic, opset, dynamo)
            return ExportOutcome(label, attempts[0][1] if attempts else None, axes)
        except Exception as exc:
            attempts.append((label, summarize_exception(exc)))
            unsupported = unsupported or unsupported_operator(exc)
    raise _export_error(spec, opset, module, args, attempts, unsupported)
