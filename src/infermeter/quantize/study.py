"""The INT8 study `quantize` and `optimize` both run, once: the FP32 reference on the evaluation data, the plain
static INT8 graph written from the pre-processed float model, and — under an accuracy budget — the per-layer
sensitivity ranking, the greedy search that keeps the most sensitive layers in float until the budget is met,
and the writing of the chosen model. The data come from `quantize.study_data`.

Accuracy is always scored the same way (`quantize.evaluate.score`): against the FP32 model's outputs on the
evaluation samples, as top-1 against labels when the data has them, else as agreement with FP32 (top-1
agreement for classifiers, cosine similarity otherwise)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infermeter.build.int8.ort_quant import QuantConfig, preprocess, quantize_onnx, weighted_nodes
from infermeter.core.interrupts import deferred_interrupts
from infermeter.models.samples import SampleSet
from infermeter.quantize.evaluate import Accuracy, ModelRunner, score, task_kind
from infermeter.quantize.sensitivity import FrontierPoint, LayerSensitivity, greedy_mixed, layer_sensitivity
from infermeter.quantize.study_data import StudyData
from infermeter.results.schema import CaseWarning

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Reference:
    """The FP32 model's outputs on the evaluation samples, the metric kind they call for, and FP32's own score."""

    outputs: np.ndarray
    kind: str
    accuracy: Accuracy


def fp32_reference(fp32: Path, task: str, evaluation: SampleSet, threads: int) -> Reference:
    """Run the float model as given (its FP32 ONNX form, or an OpenVINO IR) over the evaluation samples."""
    outputs = ModelRunner(fp32, threads).predict(evaluation)
    kind = task_kind(task, outputs, evaluation.labels is not None)
    return Reference(outputs, kind, score(kind, outputs, outputs, evaluation.labels))


def score_file(path: Path, reference: Reference, evaluation: SampleSet, threads: int) -> Accuracy:
    """Accuracy of a model file (ONNX Runtime for .onnx, OpenVINO for an IR) against the reference."""
    outputs = ModelRunner(path, threads).predict(evaluation)
    return score(reference.kind, reference.outputs, outputs, evaluation.labels)


@dataclass(frozen=True)
class Prepared:
    """The pre-processed FP32 graph quantization starts from, its calibration-range cache (static mode: ranges
    computed once, reused by every probe of the search) and what pre-processing did."""

    fp32: Path
    calibration_cache: Path | None
    note: str


def prepare(fp32_onnx: Path, scratch: Path, static: bool = True) -> Prepared:
    """`quant_pre_process` of the FP32 ONNX model into `scratch`."""
    scratch.mkdir(parents=True, exist_ok=True)
    target = scratch / "fp32-pre.onnx"
    note = preprocess(fp32_onnx, target)
    return Prepared(target, scratch / "calibration.json" if static else None, note)


def quantize_plain(prepared: Prepared, config: QuantConfig, calib: SampleSet | None, target: Path) -> float:
    """Write the INT8 model of `config` to `target` (held from Ctrl-C: no half-written file); returns the seconds
    it took, the unit a mixed search's cost is estimated in."""
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    with deferred_interrupts():
        quantize_onnx(prepared.fp32, target, config, calib, prepared.calibration_cache)
    return time.perf_counter() - started


def layer_count(prepared: Prepared) -> int:
    """How many weighted layers the sensitivity search would rank."""
    return len(weighted_nodes(prepared.fp32))


def rank_layers(
    prepared: Prepared,
    config: QuantConfig,
    data: StudyData,
    reference: Reference,
    scratch: Path,
    on_progress: Progress | None = None,
) -> list[LayerSensitivity]:
    """Every weighted layer's sensitivity (accuracy and output SQNR recovered when it alone stays in float), most
    sensitive first."""
    _, ranking = layer_sensitivity(
        prepared.fp32, config, data.calib, data.evaluation, reference.kind, reference.outputs, scratch,
        prepared.calibration_cache, on_progress,
    )  # fmt: skip
    return ranking


@dataclass(frozen=True)
class MixedSearch:
    """The greedy search under a budget: every candidate tried (the frontier, plain INT8 first), the first that
    met the budget (None: none did), and the ranking it followed."""

    max_drop_pct: float
    frontier: list[FrontierPoint]
    best: FrontierPoint | None
    ranking: list[LayerSensitivity] = field(default_factory=list)

    @property
    def budget_met(self) -> bool:
        """Whether a candidate met the budget."""
        return self.best is not None

    @property
    def chosen(self) -> FrontierPoint:
        """The model the study writes: the first candidate within budget, else the most accurate one."""
        return self.best or min(self.frontier, key=lambda p: p.accuracy.drop_pct)

    def missed_warning(self) -> CaseWarning | None:
        """The warning a missed budget carries (None when it was met)."""
        if self.budget_met:
            return None
        drop = self.chosen.accuracy.drop_pct
        return CaseWarning(
            "accuracy_budget_missed",
            f"no mix of float and int8 layers met --max-drop {self.max_drop_pct:g}; wrote the most accurate "
            f"candidate ({drop:.2f} points); try better calibration data, --per-channel or --finetune",
            f"best drop {drop:.2f}",
        )


def search_mixed(
    prepared: Prepared,
    config: QuantConfig,
    data: StudyData,
    reference: Reference,
    max_drop_pct: float,
    scratch: Path,
    ranking: list[LayerSensitivity] | None = None,
    measure_latency: Callable[[Path], float | None] | None = None,
    on_progress: Progress | None = None,
) -> MixedSearch:
    """Sensitivity (unless `ranking` is given) → greedy: keep the most sensitive layers in float, one more at a
    time, until the drop is within `max_drop_pct`; candidates are timed with `measure_latency` when given."""
    if ranking is None:
        ranking = rank_layers(prepared, config, data, reference, scratch, on_progress)
    frontier, best = greedy_mixed(
        prepared.fp32, config, data.calib, data.evaluation, reference.kind, reference.outputs, ranking,
        max_drop_pct, scratch, prepared.calibration_cache, measure_latency, on_progress,
    )  # fmt: skip
    return MixedSearch(max_drop_pct, frontier, best, ranking)


def write_model(source: Path, target: Path) -> Path:
    """Write a model the study made (in its scratch folder) to where the user reads it: `target`, and for an
    OpenVINO IR the weights beside it. Held from Ctrl-C: no half-written model."""
    target.parent.mkdir(parents=True, exist_ok=True)
    suffixes = (".xml", ".bin") if source.suffix.lower() == ".xml" else (source.suffix,)
    with deferred_interrupts():
        for suffix in suffixes:
            shutil.copyfile(source.with_suffix(suffix), target.with_suffix(suffix))
    return target


def plain_beside(output: Path) -> Path:
    """Where the plain INT8 model is kept when a mixed one takes the `-o` path: `NAME.int8-all.SUFFIX`."""
    return output.with_name(f"{output.stem}.int8-all{output.suffix}")
