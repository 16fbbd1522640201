"""INT8 artifacts for optimize: plain static INT8 (QDQ, calibrated), and — when that breaks the accuracy budget —
the sensitivity-guided mixed model, both through `infermeter.quantize`'s own functions."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infermeter.interrupts import deferred_interrupts
from infermeter.optimize.accuracy import EvalData, Reference, score_file
from infermeter.quantize.evaluate import Accuracy
from infermeter.quantize.ort_quant import QuantConfig, preprocess, quantize_onnx, weighted_nodes
from infermeter.quantize.sensitivity import greedy_mixed, layer_sensitivity

CONFIG = QuantConfig("static", "minmax", per_channel=False)


@dataclass
class Prepared:
    """The pre-processed FP32 graph quantization starts from, and its calibration-range cache."""

    fp32: Path
    calibration_cache: Path
    note: str


def prepare(fp32_onnx: Path, scratch: Path) -> Prepared:
    """`quant_pre_process` of the FP32 artifact into `scratch`."""
    target = scratch / "fp32-pre.onnx"
    note = preprocess(fp32_onnx, target)
    return Prepared(target, scratch / "calibration.json", note)


def quantize_plain(prepared: Prepared, target: Path, data: EvalData) -> float:
    """Write the plain INT8 model to `target`; returns the seconds it took (the unit the mixed search's cost is
    estimated in)."""
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    with deferred_interrupts():
        quantize_onnx(prepared.fp32, target, CONFIG, data.calib, prepared.calibration_cache)
    return time.perf_counter() - started


def layer_count(prepared: Prepared) -> int:
    """How many weighted layers the sensitivity search would rank."""
    return len(weighted_nodes(prepared.fp32))


@dataclass
class MixedOutcome:
    """The mixed search: every candidate tried (frontier), the chosen one (None when none met the budget; then the
    most accurate is written), and the sensitivity ranking."""

    accuracy: Accuracy
    float_nodes: tuple[str, ...]
    budget_met: bool
    frontier: list[dict[str, Any]] = field(default_factory=list)
    ranking: list[dict[str, Any]] = field(default_factory=list)


def search_mixed(
    prepared: Prepared,
    target: Path,
    data: EvalData,
    reference: Reference,
    max_drop_pct: float,
    scratch: Path,
    threads: int,
    on_progress: Callable[[str], None] | None = None,
) -> MixedOutcome:
    """Rank layers by sensitivity, then keep the most sensitive in float, greedily, until the accuracy drop is
    within `max_drop_pct`; write the chosen (or the most accurate) model to `target`."""
    _, ranking = layer_sensitivity(
        prepared.fp32,
        CONFIG,
        data.calib,
        data.evaluation,
        reference.kind,
        reference.outputs,
        scratch,
        prepared.calibration_cache,
        on_progress,
    )
    frontier, best = greedy_mixed(
        prepared.fp32,
        CONFIG,
        data.calib,
        data.evaluation,
        reference.kind,
        reference.outputs,
        ranking,
        max_drop_pct,
        scratch,
        prepared.calibration_cache,
        on_progress=on_progress,
    )
    chosen = best if best is not None else min(frontier, key=lambda p: p.accuracy.drop_pct)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(chosen.path, target)
    # Scored again from the written file: the evidence is about the artifact that ships, not a scratch copy.
    with deferred_interrupts():
        accuracy = score_file(target, reference, data.evaluation, threads)
    return MixedOutcome(
        accuracy,
        chosen.float_nodes,
        best is not None,
        [
            {
                "float_layers": len(p.float_nodes),
                "drop_pct": _finite(p.accuracy.drop_pct),
                "value": _finite(p.accuracy.value),
            }
            for p in frontier
        ],
        [
            {
                "layer": s.node,
                "op": s.op_type,
                "recovered_pct": _finite(s.recovered_pct),
                "sqnr_gain_db": _finite(s.output_sqnr_gain_db),
            }
            for s in ranking[:10]
        ],
    )


def _finite(value: float) -> float | None:
    # Results files are strict JSON: an infinite SQNR gain (a layer whose float copy is exact) becomes null.
    return value if math.isfinite(value) else None
