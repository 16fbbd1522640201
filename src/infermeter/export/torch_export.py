"""`infermeter export`: PyTorch -> ONNX, then proof that the file computes what the PyTorch model computes.

The export itself is `models.onnx_export.export_to_onnx` (torch.export-based first, TorchScript-based as the
fallback with its reason). Then, in order: the ONNX checker (full check), strict shape inference, optional
simplification with onnxslim, and verification with ONNX Runtime (`export_verify.verify_onnx`):

- numerics: outputs match PyTorch on several input sets, every element within `atol + rtol * |reference|`
  (fp32 defaults 1e-5 and 1e-4: the seeds' 1e-5 bar), and the largest errors found are reported;
- dynamic axes: every declared axis is symbolic in the graph (an axis frozen at export names its fixed size), and
  the model runs and matches PyTorch at two more sizes of it (an axis that is symbolic on the outside but
  frozen inside the graph, e.g. by a Reshape to a constant, fails here).

Each step is a `Check`; the report is also written next to the model as `<model>.verify.json`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Any

from infermeter.core.errors import UsageError, describe_exception
from infermeter.core.files import write_text_atomically
from infermeter.export.verify import verify_onnx
from infermeter.models.onnx_export import (
    DEFAULT_OPSET,
    DynamicAxes,
    ExportError,
    default_dynamic_axes,
    export_to_onnx,
)
from infermeter.models.spec import ModelSpec

REPORT_VERSION = 1
EXPORTERS = {"auto": ("dynamo", "torchscript"), "dynamo": ("dynamo",), "torchscript": ("torchscript",)}
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-4


@dataclass(frozen=True)
class Check:
    """One verification step: `status` is `pass`, `fail` or `skip`; `detail` says what was found."""

    name: str
    status: str
    detail: str


@dataclass
class ExportReport:
    """Everything `infermeter export` found; `ok` is True when no check failed."""

    source: str
    output: str
    _: KW_ONLY  # the rest by keyword
    opset: int
    dynamic_axes: DynamicAxes
    atol: float
    rtol: float
    exporter: str | None = None
    fallback_reason: str | None = None
    unsupported_op: str | None = None
    unsupported_op_modules: list[str] = field(default_factory=list)
    simplified: bool = False
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    checks: list[Check] = field(default_factory=list)
    report_version: int = REPORT_VERSION

    @property
    def ok(self) -> bool:
        """True when every check passed or was skipped."""
        return all(check.status != "fail" for check in self.checks)

    def add(self, name: str, passed: bool | None, detail: str) -> bool:
        """Record a check (None = skipped) and return whether it did not fail."""
        self.checks.append(Check(name, "skip" if passed is None else "pass" if passed else "fail", detail))
        return passed is not False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the `.verify.json` file)."""
        data = asdict(self)
        data["ok"] = self.ok
        data["dynamic_axes"] = {name: {str(k): v for k, v in axes.items()} for name, axes in self.dynamic_axes.items()}
        return data


def parse_dynamic(texts: Sequence[str], spec: ModelSpec) -> DynamicAxes:
    """`NAME:AXIS=label` flags -> {input name: {axis: label}}, checked against the model's inputs."""
    axes: DynamicAxes = {}
    names = {item.name: item for item in spec.inputs}
    for text in texts:
        name, sep, rest = text.rpartition(":")
        axis_text, eq, label = rest.partition("=")
        if not sep or not eq or not axis_text.strip().isdigit() or not label.strip():
            raise UsageError(f"--dynamic {text!r} is not NAME:AXIS=label; write it like --dynamic input_ids:1=seq")
        if name not in names:
            raise UsageError(f"--dynamic {text!r}: the model's inputs are {', '.join(names)}")
        axis = int(axis_text)
        rank = len(names[name].shape)
        if axis >= rank:
            raise UsageError(f"--dynamic {text!r}: input {name} has {rank} axes (0..{rank - 1})")
        axes.setdefault(name, {})[axis] = label.strip()
    return axes


def _check_and_infer(report: ExportReport, path: Path) -> bool:
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
        report.add("onnx checker", True, "full check passed")
    except Exception as exc:
        report.add("onnx checker", False, describe_exception(exc, 300))
        return False
    try:
        model = onnx.load(str(path))
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        outputs = [
            f"{o.name}[{', '.join(d.dim_param or str(d.dim_value) for d in o.type.tensor_type.shape.dim)}]"
            for o in inferred.graph.output
        ]
        report.add("shape inference", True, f"strict mode; outputs {'; '.join(outputs)}")
    except Exception as exc:
        report.add("shape inference", False, describe_exception(exc, 300))
        return False
    return True


def _simplify(report: ExportReport, path: Path) -> None:
    try:
        import onnx
        import onnxslim
    except ImportError:
        from infermeter.core.extras import install_line

        report.add("simplify", None, f"onnxslim is not installed ({install_line('torch')}); kept the exporter's graph")
        return
    before = onnx.load(str(path))
    nodes_before = len(before.graph.node)
    try:
        slimmed = onnxslim.slim(before)
        onnx.checker.check_model(slimmed, full_check=True)
    except Exception as exc:
        report.add(
            "simplify", None, f"onnxslim failed ({type(exc).__name__}: {str(exc)[:200]}); kept the exporter's graph"
        )
        return
    tmp = path.with_suffix(path.suffix + ".slim.tmp")
    onnx.save(slimmed, str(tmp))
    os.replace(tmp, path)
    report.simplified = True
    report.add("simplify", True, f"onnxslim: {nodes_before} -> {len(slimmed.graph.node)} nodes")


def export_model(
    spec: ModelSpec,
    output: Path,
    opset: int = DEFAULT_OPSET,
    dynamic: DynamicAxes | None = None,
    simplify: bool = True,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    samples: int = 3,
    module: Any = None,
    exporter: str = "auto",
) -> ExportReport:
    """Export `spec` to `output`, check, optionally simplify and verify it; write `<output>.verify.json`.

    `dynamic` adds axes to the model's default dynamic axes (its symbolic dims: batch, and seq for transformers).
    `exporter`: `auto` (torch.export-based, then TorchScript-based), `dynamo` or `torchscript` (that one only).
    Raises InfermeterError for bad input (no torch form, unreadable model); every other problem is a failed check.
    """
    import importlib.util

    from infermeter.core.errors import ModelError
    from infermeter.core.extras import install_line
    from infermeter.models.torch_form import load_torch_module

    for package, extra in (("torch", "torch"), ("onnx", "torch"), ("onnxruntime", "onnxruntime")):
        if importlib.util.find_spec(package) is None:
            raise ModelError(f"export needs {package}, which is not installed: {install_line(extra)}")
    if not spec.has_torch_form:
        raise ModelError(
            f"{spec.ref} is already an ONNX file; export takes a zoo model, a .py factory or a .pt2 program"
        )
    axes = {name: dict(named) for name, named in default_dynamic_axes(spec).items()}
    for name, named in (dynamic or {}).items():
        axes.setdefault(name, {}).update(named)
    report = ExportReport(spec.ref, str(output), opset=opset, dynamic_axes=axes, atol=atol, rtol=rtol)
    module = load_torch_module(spec) if module is None else module
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        outcome = export_to_onnx(
            spec, output, opset, axes, module=None if spec.kind == "pt2" else module, exporters=EXPORTERS[exporter]
        )
        report.exporter, report.fallback_reason = outcome.exporter, outcome.fallback_reason
        detail = f"{outcome.exporter} exporter, opset {opset}"
        if outcome.fallback_reason:
            detail += f"; torch.export-based failed: {outcome.fallback_reason}"
        report.add("export", True, detail)
    except ExportError as exc:
        report.unsupported_op = exc.unsupported_op
        report.unsupported_op_modules = list(exc.op_modules)
        report.add("export", False, str(exc))
    if report.ok and _check_and_infer(report, output):
        if simplify:
            _simplify(report, output)
        else:
            report.add("simplify", None, "--no-simplify")
        verify_onnx(report, spec, module, output, axes, samples)
    write_report(report, output)
    return report


def report_path(output: Path) -> Path:
    """Where the verification report of `output` is written: `<output>.verify.json`."""
    return output.with_name(output.name + ".verify.json")


def write_report(report: ExportReport, output: Path) -> Path:
    """Write the report as JSON next to the model (atomically) and return its path."""
    path = report_path(output)
    write_text_atomically(path, json.dumps(report.to_dict(), indent=2, default=str))
    return path
