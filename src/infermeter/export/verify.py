"""The verification half of `infermeter export`: an exported ONNX file against the PyTorch module it came from.

- numerics: outputs match PyTorch on several input sets, every element within `atol + rtol * |reference|`, and the
  largest errors found are reported;
- dynamic axes: every declared axis is symbolic in the graph (an axis frozen at export names its fixed size), and
  the model runs and matches PyTorch at two more sizes of it (an axis that is symbolic on the outside but frozen
  inside the graph, e.g. by a Reshape to a constant, fails here).

Each step is a `Check` added to the export's `ExportReport`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.core.errors import describe_exception, engine_message
from infermeter.models.inputs import Feeds, generate_feeds
from infermeter.models.onnx_export import DynamicAxes, trace_feeds
from infermeter.models.spec import ModelSpec

if TYPE_CHECKING:
    from infermeter.export.torch_export import ExportReport


def _probe_sizes(label: str, base: int) -> list[int]:
    # Two sizes besides the traced one: below and above it (batch 1 is the case exporters most often freeze).
    if label == "batch" or base <= 2:
        return [1, base + 1]
    return [max(1, base // 2), base + base // 2]


def _compare(
    reference: list[np.ndarray], actual: list[np.ndarray], atol: float, rtol: float
) -> tuple[bool, float, float, str]:
    """(within tolerance, max abs error, max rel error, detail) over every output."""
    if len(reference) != len(actual):
        return (
            False,
            float("inf"),
            float("inf"),
            f"{len(actual)} outputs from ONNX Runtime, {len(reference)} from PyTorch",
        )
    worst_abs = worst_rel = 0.0
    ok = True
    for index, (ref, got) in enumerate(zip(reference, actual, strict=True)):
        if ref.shape != got.shape:
            return False, float("inf"), float("inf"), f"output {index} has shape {got.shape}, PyTorch gives {ref.shape}"
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        diff = np.abs(ref64 - got64)
        if diff.size:
            worst_abs = max(worst_abs, float(diff.max()))
            worst_rel = max(worst_rel, float((diff / np.maximum(np.abs(ref64), 1e-12)).max()))
            ok = ok and bool(np.all(diff <= atol + rtol * np.abs(ref64)))
    return ok, worst_abs, worst_rel, f"max abs error {worst_abs:.3g}, max rel error {worst_rel:.3g}"


class _Runner:
    """Runs the same feeds through PyTorch and ONNX Runtime."""

    def __init__(self, spec: ModelSpec, module: Any, onnx_path: Path) -> None:
        import onnxruntime as ort
        import torch

        self._torch = torch
        self.spec = spec
        self.module = module
        options = ort.SessionOptions()
        options.log_severity_level = 3  # shape-mismatch warnings are what the checks report, not log noise
        self.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def reference(self, feeds: Feeds) -> list[np.ndarray]:
        args = tuple(self._torch.from_numpy(np.ascontiguousarray(feeds[i.name])) for i in self.spec.inputs)
        with self._torch.no_grad():
            out = self.module(*args)
        items = out if isinstance(out, tuple | list) else [out]
        return [t.detach().numpy() for t in items]

    def onnx(self, feeds: Feeds) -> list[np.ndarray]:
        return [np.asarray(o) for o in self.session.run(None, {n: feeds[n] for n in self.input_names})]


def _frozen_axes(onnx_path: Path, axes: DynamicAxes) -> list[str]:
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    dims = {value.name: list(value.type.tensor_type.shape.dim) for value in graph.input}
    problems = []
    for name, named in axes.items():
        for axis, label in sorted(named.items()):
            found = dims.get(name)
            if found is None:
                problems.append(f"input {name} is not an input of the ONNX graph")
            elif axis < len(found) and found[axis].HasField("dim_value"):
                problems.append(f"input {name} axis {axis} ({label}) is fixed to {found[axis].dim_value}")
    return problems


def verify_onnx(
    report: ExportReport,
    spec: ModelSpec,
    module: Any,
    onnx_path: Path,
    axes: DynamicAxes,
    samples: int = 3,
    seed: int = 0,
) -> None:
    """Add the numerics and dynamic-axis checks of `onnx_path` against the PyTorch `module` to `report`."""
    frozen = _frozen_axes(onnx_path, axes)
    declared = ", ".join(f"{n}:{a}={label}" for n, named in axes.items() for a, label in sorted(named.items()))
    report.add(
        "dynamic axes declared",
        not frozen,
        "; ".join(frozen) if frozen else (f"symbolic in the graph: {declared}" if declared else "none declared"),
    )
    try:
        runner = _Runner(spec, module, onnx_path)
    except Exception as exc:
        report.add("onnxruntime load", False, describe_exception(exc))
        return
    base_sets = trace_feeds(spec, count=samples, seed=seed)
    base_shapes = {name: tuple(array.shape) for name, array in base_sets[0].items()}
    ok, worst_abs, worst_rel = True, 0.0, 0.0
    detail = ""
    for feeds in base_sets:
        try:
            within, abs_err, rel_err, detail = _compare(
                runner.reference(feeds), runner.onnx(feeds), report.atol, report.rtol
            )
        except Exception as exc:
            within, abs_err, rel_err = False, float("inf"), float("inf")
            detail = f"ONNX Runtime failed: {describe_exception(exc)}"
        ok, worst_abs, worst_rel = ok and within, max(worst_abs, abs_err), max(worst_rel, rel_err)
        if not within:
            break
    report.max_abs_error, report.max_rel_error = worst_abs, worst_rel
    shape_text = ", ".join(f"{n}{list(s)}" for n, s in base_shapes.items())
    bar = f"tolerance atol {report.atol:g} + rtol {report.rtol:g}"
    if ok:
        detail = f"{samples} input sets at {shape_text}: max abs error {worst_abs:.3g} (max rel {worst_rel:.3g}); {bar}"
    else:
        detail = f"at {shape_text}: {detail}; {bar}"
    report.add("outputs match PyTorch", ok, detail)
    _check_dynamic_sizes(report, spec, runner, axes, base_shapes, seed)


def _check_dynamic_sizes(
    report: ExportReport,
    spec: ModelSpec,
    runner: _Runner,
    axes: DynamicAxes,
    base_shapes: dict[str, tuple[int, ...]],
    seed: int,
) -> None:
    # Axes sharing a label change together (seq of input_ids and attention_mask).
    by_label: dict[str, list[tuple[str, int]]] = {}
    for name, named in axes.items():
        for axis, label in named.items():
            by_label.setdefault(label, []).append((name, axis))
    for label, members in by_label.items():
        name0, axis0 = members[0]
        base = base_shapes[name0][axis0]
        results, failure = [], None
        for size in _probe_sizes(label, base):
            shapes = dict(base_shapes)
            for name, axis in members:
                dims = list(shapes[name])
                dims[axis] = size
                shapes[name] = tuple(dims)
            feeds = generate_feeds(spec.inputs, shapes, 1, seed + size)[0]
            where = f"{label}={size} ({', '.join(f'{n} axis {a}' for n, a in members)})"
            try:
                reference = runner.reference(feeds)
            except Exception as exc:
                failure = f"PyTorch itself cannot run at {where}: {describe_exception(exc)}"
                break
            try:
                actual = runner.onnx(feeds)
            except Exception as exc:
                first = engine_message(exc, 300) or type(exc).__name__
                failure = f"ONNX Runtime fails at {where}: the axis is frozen inside the graph ({first[:300]})"
                break
            within, abs_err, _, detail = _compare(reference, actual, report.atol, report.rtol)
            if not within:
                failure = f"at {where}: {detail} (tolerance atol {report.atol:g} + rtol {report.rtol:g})"
                break
            results.append(f"{size} (max abs error {abs_err:.3g})")
        sizes_text = ", ".join(results)
        report.add(f"dynamic axis {label}", failure is None, failure or f"runs and matches at {label}={sizes_text}")
