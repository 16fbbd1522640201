"""Per-layer sensitivity and the greedy mixed-precision search.

Sensitivity of a layer = how much closer to FP32 the output gets (SQNR gain) and how much accuracy comes back
when that one layer is left in float while every other is quantized (the `nodes_to_exclude` route: calibration
runs once and is reused from ORT's calibration cache).
Beside it, the SQNR between the FP32 model's and the fully quantized model's output of that layer.
The search keeps the most sensitive layers in float, one more at a time, until the drop fits the budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from infermeter.build.int8.ort_quant import QuantConfig, layer_groups, quantize_onnx, weighted_nodes
from infermeter.models.samples import SampleSet
from infermeter.quantize import accuracy_metrics as metrics
from infermeter.quantize.evaluate import Accuracy, ModelRunner, score


@dataclass(frozen=True)
class LayerSensitivity:
    """One layer's sensitivity: the drop with only it left in float (vs the fully quantized drop), the gain in
    output SQNR that brings, and the SQNR of its own activation between FP32 and the quantized model."""

    node: str
    op_type: str
    drop_pct_kept_float: float
    recovered_pct: float
    output_sqnr_gain_db: float
    activation_sqnr_db: float


@dataclass(frozen=True)
class FrontierPoint:
    """A mixed-precision candidate: the layers kept in float, its accuracy and (when measured) latency."""

    float_nodes: tuple[str, ...]
    accuracy: Accuracy
    latency_p50_ms: float | None
    path: Path


def _with_outputs(source: Path, target: Path, names: Sequence[str]) -> None:
    """A copy of `source` that also outputs the tensors `names` (for activation comparisons)."""
    import onnx

    model = onnx.load(str(source))
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    onnx.save(model, str(target))


def _run_probe(path: Path, tensors: Sequence[str], samples: SampleSet, scratch: Path) -> dict[str, np.ndarray]:
    """The values of `tensors` (graph inputs or intermediate tensors) over `samples`, flattened."""
    import onnxruntime as ort

    probe = scratch / f"probe-{path.stem}.onnx"
    _with_outputs(path, probe, [t for t in tensors if t not in samples.arrays])
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # Graph optimisations fuse producers away; the probe must see the tensors as named.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(probe), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs() if o.name in tensors]
    parts: dict[str, list[np.ndarray]] = {t: [] for t in tensors}
    for feeds in samples.batches(16):
        values = dict(zip(names, session.run(names, feeds), strict=True))
        values.update({k: v for k, v in feeds.items() if k in parts})
        for name, value in values.items():
            parts[name].append(np.asarray(value).reshape(-1))
    return {name: np.concatenate(chunks) for name, chunks in parts.items() if chunks}


def activation_sqnr(
    fp32_path: Path, quant_path: Path, nodes: Sequence[str], samples: SampleSet, scratch: Path
) -> dict[str, float]:
    """Per weighted node, the SQNR (dB) of the activation it consumes: the FP32 model's tensor against the
    quantized model's (dequantized) tensor at the same place. Accumulates the noise of every earlier layer."""
    import onnx

    def first_inputs(path: Path) -> dict[str, str]:
        graph = onnx.load(str(path), load_external_data=False).graph
        return {n.name: n.input[0] for n in graph.node if n.name in set(nodes) and n.input}

    fp32_inputs, quant_inputs = first_inputs(fp32_path), first_inputs(quant_path)
    shared = [n for n in nodes if n in fp32_inputs and n in quant_inputs]
    reference = _run_probe(fp32_path, sorted({fp32_inputs[n] for n in shared}), samples, scratch)
    quantized = _run_probe(quant_path, sorted({quant_inputs[n] for n in shared}), samples, scratch)
    result = {}
    for node in shared:
        ref, test = reference.get(fp32_inputs[node]), quantized.get(quant_inputs[node])
        if ref is not None and test is not None and ref.shape == test.shape:
            result[node] = metrics.sqnr_db(test, ref)
    return result


def node_types(path: Path) -> dict[str, str]:
    """Weighted node name -> op type, of a float ONNX graph."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weighted = set(weighted_nodes(path))
    return {n.name: n.op_type for n in graph.node if n.name in weighted}


def layer_sensitivity(
    fp32_path: Path,
    config: QuantConfig,
    calib: SampleSet | None,
    evaluation: SampleSet,
    kind: str,
    fp32_outputs: np.ndarray,
    scratch: Path,
    calibration_cache: Path | None,
    on_progress: Callable[[str], None] | None = None,
) -> tuple[Accuracy, list[LayerSensitivity]]:
    """Accuracy of the fully quantized model and every weighted layer's sensitivity, most sensitive first."""
    progress = on_progress or (lambda _msg: None)
    full_path = scratch / "sens-full.onnx"
    quantize_onnx(fp32_path, full_path, config, calib, calibration_cache)
    full = score(kind, fp32_outputs, ModelRunner(full_path).predict(evaluation), evaluation.labels)
    full_sqnr = full.details["sqnr_db"]
    types = node_types(fp32_path)
    candidates = [n for n in weighted_nodes(fp32_path) if n not in config.exclude]
    activation = activation_sqnr(fp32_path, full_path, candidates, evaluation.head(64), scratch)
    ranked = []
    groups = layer_groups(fp32_path)
    for index, node in enumerate(candidates, 1):
        progress(f"sensitivity {index}/{len(candidates)}: {node}")
        path = scratch / "sens-one.onnx"
        quantize_onnx(fp32_path, path, _keeping_float(config, groups, [node]), calib, calibration_cache)
        accuracy = score(kind, fp32_outputs, ModelRunner(path).predict(evaluation), evaluation.labels)
        gain = accuracy.details["sqnr_db"] - full_sqnr if math.isfinite(full_sqnr) else 0.0
        ranked.append(
            LayerSensitivity(
                node,
                types[node],
                accuracy.drop_pct,
                full.drop_pct - accuracy.drop_pct,
                gain,
                activation.get(node, float("nan")),
            )
        )
    # Ranked by how much closer to FP32 the output gets (continuous, so stable on small evaluation sets where
    # top-1 moves in steps of one sample); the accuracy recovered breaks ties.
    ranked.sort(key=lambda s: (-_finite(s.output_sqnr_gain_db), -s.recovered_pct))
    return full, ranked


def _keeping_float(config: QuantConfig, groups: dict[str, tuple[str, ...]], nodes: Sequence[str]) -> QuantConfig:
    """`config` with the layers `nodes` (each with its input activations, see `layer_groups`) left in float."""
    extra = [member for node in nodes for member in groups.get(node, (node,))]
    return replace(config, exclude=tuple(dict.fromkeys((*config.exclude, *extra))))


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 1e9


def greedy_mixed(
    fp32_path: Path,
    config: QuantConfig,
    calib: SampleSet | None,
    evaluation: SampleSet,
    kind: str,
    fp32_outputs: np.ndarray,
    ranking: Sequence[LayerSensitivity],
    max_drop_pct: float,
    scratch: Path,
    calibration_cache: Path | None,
    measure_latency: Callable[[Path], float | None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> tuple[list[FrontierPoint], FrontierPoint | None]:
    """Keep the top-k most sensitive layers in float for k = 0, 1, ... until the drop is within
    `max_drop_pct`. Returns the frontier (every candidate tried) and the first one within budget (or None)."""
    progress = on_progress or (lambda _msg: None)
    groups = layer_groups(fp32_path)
    frontier: list[FrontierPoint] = []
    for keep in range(len(ranking) + 1):
        float_nodes = tuple(s.node for s in ranking[:keep])
        progress(f"mixed precision: {keep} layer(s) in float")
        path = scratch / f"mixed-{keep}.onnx"
        quantize_onnx(fp32_path, path, _keeping_float(config, groups, float_nodes), calib, calibration_cache)
        accuracy = score(kind, fp32_outputs, ModelRunner(path).predict(evaluation), evaluation.labels)
        latency = measure_latency(path) if measure_latency else None
        point = FrontierPoint(float_nodes, accuracy, latency, path)
        frontier.append(point)
        if accuracy.drop_pct <= max_drop_pct:
            return frontier, point
    return frontier, None
