"""`infermeter quantize --to fp16|bf16` as a library call: run a model in reduced precision on each engine, judge
it against FP32 (errors and decisions changed), find the few layers that must stay in FP32 when it misses the
budget, write the mixed model, and time FP32, full reduced and mixed interleaved on each engine. Prints nothing;
returns a `FallbackOutcome`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from infermeter.core.errors import InfermeterError, UsageError, describe_exception
from infermeter.models.resolve import resolve_model
from infermeter.models.samples import SampleSet, load_samples, random_samples
from infermeter.quantize.emulate import named_model
from infermeter.quantize.evaluate import ModelRunner, task_kind
from infermeter.quantize.fallback.search import DEFAULT_MAX_EVALUATIONS
from infermeter.quantize.fallback.study import EngineStudy, StudyContext
from infermeter.quantize.reduced import PRECISIONS, Budget


@dataclass(frozen=True)
class FallbackRequest:
    """Everything `quantize --to` was asked to do."""

    model: str
    precision: str
    _: KW_ONLY  # the rest by keyword
    engines: tuple[str, ...]
    output: Path
    budget: Budget = field(default_factory=Budget)
    data: str | None = None
    samples: int = 64
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS
    latency: bool = True
    threads: int = 1
    seed: int = 0
    sample_set: SampleSet | None = field(default=None, compare=False)  # samples given in code (optimize's)


@dataclass
class FallbackOutcome:
    """What the study found: one `EngineStudy` per engine, and notes on the data and the reference."""

    request: FallbackRequest
    studies: list[EngineStudy] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fp32_model: Path | None = None


def fallback_engines_here() -> tuple[str, ...]:
    """The engines with a reduced-precision fallback path (`Backend.precision_fallback`) that can run here."""
    from infermeter.backends.registry import inference_backends

    return tuple(cls.name for cls in inference_backends() if cls.precision_fallback and cls.available() is None)


def check_fallback_request(request: FallbackRequest) -> None:
    """UsageError for requests that cannot work, before any slow step."""
    from infermeter.backends.registry import inference_backends

    if request.precision not in PRECISIONS:
        raise UsageError(f"--to {request.precision!r}: use one of {', '.join(PRECISIONS)}")
    request.budget.check()
    names = [cls.name for cls in inference_backends()]
    for engine in request.engines:
        if engine not in names:
            raise UsageError(f"-b {engine!r} is not an inference backend ({', '.join(names)})")
    if not request.engines:
        raise UsageError("-b: name at least one engine (e.g. -b onnxruntime,openvino,torch)")
    if request.samples < 2:
        raise UsageError(f"--samples {request.samples} must be at least 2")
    if request.max_evaluations < 2:
        raise UsageError(f"--max-evals {request.max_evaluations} must be at least 2")
    if request.output.suffix:
        raise UsageError(f"-o {str(request.output)!r}: with --to, -o is a folder for the mixed models")


def _study_engine(ctx: StudyContext, engine: str) -> EngineStudy:
    from infermeter.backends.registry import get_backend
    from infermeter.quantize.fallback.engines import FALLBACK_PATHS

    cls = get_backend(engine)
    if cls.precision_fallback is None:
        return EngineStudy(engine, ctx.precision, lines=[f"{engine}: no reduced-precision fallback path here"])
    unavailable = cls.available()
    if unavailable and cls.precision_fallback != "tensorrt-layer-precision":  # its constraints are written anyway
        return EngineStudy(engine, ctx.precision, lines=[f"{engine}: not available here: {unavailable}"])
    try:
        study = FALLBACK_PATHS[cls.precision_fallback](ctx)
    except InfermeterError as exc:
        return EngineStudy(engine, ctx.precision, lines=[f"{engine}: {exc}"])
    except Exception as exc:  # an engine's own failure ends its study, not the others'
        return EngineStudy(engine, ctx.precision, lines=[f"{engine}: failed: {describe_exception(exc)}"])
    fp32 = study.fp32
    if fp32 is not None and not fp32.meets(ctx.budget):  # the seeds' first step: FP32 itself must agree
        changed = "" if fp32.decisions_changed is None else f"{fp32.decisions_changed} decision(s) changed, "
        study.lines.insert(0, f"{engine}: its own FP32 run misses the budget against the reference ({changed}cosine "
                              f"{fp32.cosine:.6f}): its reduced-precision figures mix in that difference")  # fmt: skip
    return study


def time_arms(study: EngineStudy) -> None:
    """FP32, full reduced and mixed on one engine, timed interleaved (`measure.interleave.run_group`): each in a
    worker of its own, rounds alternating, speedups paired per round against FP32 (the first arm)."""
    from infermeter.measure.interleave import run_group
    from infermeter.measure.plan import PlanItem

    if len(study.arms) < 2:
        return
    items = [PlanItem(a.spec, (a.case,)) for a in study.arms]
    done, reason = run_group(items, lambda _i, _case, _phase: None)
    if reason is not None:
        study.lines.append(f"{study.engine}: not timed: {reason}")
        return
    for (_item, result, _skipped), target in zip(done, study.arms, strict=True):
        target.result = result
        if not result.ok:
            study.lines.append(f"{study.engine} {target.label}: {result.status}: {result.error}")


def study_fallback(request: FallbackRequest, on_progress: Callable[[str], None] | None = None) -> FallbackOutcome:
    """Run the whole request (see the module docstring). Raises InfermeterError subclasses for bad input."""
    from infermeter.models.convert import onnx_for

    check_fallback_request(request)
    progress = on_progress or (lambda _msg: None)
    spec = resolve_model(request.model)
    outcome = FallbackOutcome(request)
    if spec.kind == "openvino_ir":
        raise UsageError(f"{spec.ref} is an OpenVINO IR: --to studies an ONNX or PyTorch model (its layers by name)")
    progress("loading data")
    if request.sample_set is not None:
        samples = request.sample_set
    elif request.data:
        samples = load_samples(spec.inputs, request.data, request.samples)
    else:
        samples = random_samples(spec.inputs, request.samples, request.seed + 2)
        outcome.notes.append(f"no --data: {request.samples} random inputs; decisions on them are not a task's")
    request.output.mkdir(parents=True, exist_ok=True)
    stem = Path(spec.ref).stem.replace(":", "_")
    outcome.fp32_model = named_model(onnx_for(spec).path, request.output / f"{stem}.fp32.onnx")
    progress("FP32 reference (ONNX Runtime, the graph as written)")
    reference = ModelRunner(outcome.fp32_model, request.threads, optimize=False).predict(samples)
    kind = task_kind(spec.task, reference, samples.labels is not None)
    ctx = StudyContext(
        spec,
        outcome.fp32_model,
        samples=samples,
        reference=reference,
        kind=kind,
        precision=request.precision,
        budget=request.budget,
        threads=request.threads,
        folder=request.output,
        max_evaluations=request.max_evaluations,
    )
    for engine in request.engines:
        progress(f"{engine}: {request.precision} and the FP32 fallback search")
        study = _study_engine(ctx, engine)
        if request.latency and study.arms:
            progress(f"{engine}: timing FP32, full {request.precision} and mixed, interleaved")
            time_arms(study)
        outcome.studies.append(study)
    return outcome
