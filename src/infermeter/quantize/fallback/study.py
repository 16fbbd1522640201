"""What a reduced-precision study works on (`StudyContext`) and what it finds per engine (`EngineStudy`), and the
search on the emulated ONNX graph that ONNX Runtime, TensorRT and OpenVINO share (`emulated_search`)."""

from __future__ import annotations

import tempfile
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.core.case import Case, MeasureSettings
from infermeter.models.samples import SampleSet
from infermeter.models.spec import ModelSpec
from infermeter.quantize.emulate import FP16_MAX, emulated, graph_layers, range_outliers
from infermeter.quantize.evaluate import ModelRunner
from infermeter.quantize.fallback.marks import MarkReadback
from infermeter.quantize.fallback.search import SearchResult, Verdict, find_fallback
from infermeter.quantize.reduced import Budget, Judgement, judge
from infermeter.results.schema import CaseResult


@dataclass(frozen=True)
class StudyContext:
    """One study: the model, its named FP32 ONNX graph, the samples and FP32's outputs on them, the budget."""

    spec: ModelSpec
    fp32_onnx: Path
    _: KW_ONLY  # the rest by keyword
    samples: SampleSet
    reference: np.ndarray
    kind: str
    precision: str
    budget: Budget
    threads: int
    folder: Path
    max_evaluations: int
    searches: dict[str, SearchResult] = field(default_factory=dict, compare=False)

    def judge(self, output: np.ndarray, how: str) -> Judgement:
        """`output` against FP32's, tagged with how it was obtained."""
        return judge(self.kind, self.reference, output, self.samples.labels, self.budget.threshold, how)

    def file(self, suffix: str) -> Path:
        """A file of this study in the output folder: `<model>.<precision><suffix>`."""
        stem = Path(self.spec.ref).stem.replace(":", "_")
        return self.folder / f"{stem}.{self.precision}{suffix}"


@dataclass
class BenchArm:
    """One variant timed in the study's interleaved group."""

    label: str
    spec: ModelSpec
    case: Case
    result: CaseResult | None = None


@dataclass
class EngineStudy:
    """What one engine gave: the full reduced-precision run, the search, the mixed model and its check, which of
    its FP32 marks the engine held (`marks`), the variants to time, and one line per thing it could not do."""

    engine: str
    precision: str
    _: KW_ONLY  # the rest by keyword
    lines: list[str] = field(default_factory=list)
    fp32: Judgement | None = None  # the engine's own FP32 run against the reference: its agreement floor
    full: Judgement | None = None
    search: SearchResult | None = None
    search_how: str = ""
    mixed: Judgement | None = None
    mixed_path: Path | None = None
    parity: str | None = None
    arms: list[BenchArm] = field(default_factory=list)
    speed_note: str | None = None
    marks: MarkReadback | None = None  # which FP32 marks the engine really held, read from what it ran
    mixed_refused: str | None = None  # why the written mixed model was refused as a build (`build_invalid`)

    def mixed_cell(self) -> str | None:
        """What a table's mixed column shows instead of a figure: `build_invalid`, or `= full (no mark held)` (the
        mixed model would be the full one); None when there is a mixed figure (or none was sought)."""
        if self.mixed_refused is not None:
            return "build_invalid (mixed model)"
        return self.marks.mixed_cell() if self.marks is not None else None


def emulated_outputs(ctx: StudyContext, keep: frozenset[str] | set[str]) -> np.ndarray:
    """The model's outputs on the samples with ctx.precision emulated everywhere but `keep`."""
    import onnx

    model = emulated(ctx.fp32_onnx, ctx.precision, keep)
    with tempfile.TemporaryDirectory(prefix="infermeter-emulate-") as scratch:
        path = Path(scratch) / "emulated.onnx"
        onnx.save(model, str(path))
        return ModelRunner(path, ctx.threads, optimize=False).predict(ctx.samples)


def emulated_search(ctx: StudyContext) -> SearchResult:
    """The layers to keep in FP32, found on the emulated graph (once per study: engines share it)."""
    if ctx.precision in ctx.searches:
        return ctx.searches[ctx.precision]
    how = f"emulated {ctx.precision}"

    def evaluate(keep: frozenset[str]) -> Verdict:
        judgement = ctx.judge(emulated_outputs(ctx, keep), how)
        return Verdict(judgement.meets(ctx.budget), judgement)

    # BF16 keeps FP32's exponent: nothing overflows it that did not overflow FP32, so no range pre-pass.
    flagged = range_outliers(ctx.fp32_onnx, ctx.samples, FP16_MAX) if ctx.precision == "fp16" else []
    result = find_fallback(graph_layers(ctx.fp32_onnx), evaluate, flagged, ctx.max_evaluations)
    ctx.searches[ctx.precision] = result
    return result


def judgement_of(verdict: Verdict) -> Judgement | None:
    """The Judgement a study's Verdict carries."""
    detail: Any = verdict.detail
    return detail if isinstance(detail, Judgement) else None


def record_marks(study: EngineStudy, marks: MarkReadback) -> bool:
    """Record what the engine did with the FP32 marks (`study.marks`, its lines); False, and no mixed figure, when
    no held mark changes what it runs: its mixed model would be the full one, timed twice."""
    study.marks = marks
    study.lines += marks.lines()
    if marks.effective:
        return True
    study.mixed = None
    return False


def parity_line(mixed: np.ndarray, emulated_mixed: np.ndarray, what: str) -> str:
    """How far the written mixed model's outputs are from the emulated ones it was chosen on."""
    diff = float(np.max(np.abs(mixed.astype(np.float64) - emulated_mixed.astype(np.float64))))
    scale = float(np.max(np.abs(emulated_mixed))) or 1.0
    return f"{what}: max |difference| from the emulated mixed model {diff:.3g} ({diff / scale:.2%} of the output scale)"


# Short, like quantize's other timings (`bench` is there for more), but interleaved with a paired interval.
STUDY_SETTINGS = MeasureSettings(warmup_iterations=5, min_iterations=30, min_time_s=0.5, max_time_s=6.0,
                                 target_ci=0.02)  # fmt: skip


def arm(ctx: StudyContext, label: str, spec: ModelSpec, backend: str, precision: str,
        options: dict[str, str] | None = None) -> BenchArm:  # fmt: skip
    """A variant to time: `spec` on `backend` at `precision`, at batch 1 and the samples' shapes."""
    shapes = tuple((name, (1, *array.shape[1:])) for name, array in ctx.samples.arrays.items())
    opts = tuple(sorted((options or {}).items()))
    case = Case(
        spec.ref,
        backend,
        precision=precision,
        batch=1,
        shape_mode="static",
        threads=ctx.threads,
        input_shapes=shapes,
        options=opts,
        settings=STUDY_SETTINGS,
    )
    return BenchArm(label, spec, case)
