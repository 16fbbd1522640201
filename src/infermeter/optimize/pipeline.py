"""The optimize run: state shared by the steps (request, model, results file, journal, budget) and the measuring
of one case. The steps themselves live in `optimize.steps`; `run_optimize` runs them in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Any

from infermeter.core.case import Case
from infermeter.core.errors import UsageError
from infermeter.machine.environment import new_results_file
from infermeter.measure.plan import PlanItem
from infermeter.models.reshape import reshape_notes
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.optimize.candidates import Budget, GainLog, finalists_reserve_s
from infermeter.optimize.journal import Journal
from infermeter.optimize.request import OptimizeRequest
from infermeter.results.records import OptimizeStep, write_record
from infermeter.results.schema import CaseResult, ResultsFile

RESULTS_NAME = "results.json"
ARTIFACTS = "artifacts"
FP32_ONNX = f"{ARTIFACTS}/model.fp32.onnx"
INT8_ONNX = f"{ARTIFACTS}/model.int8.onnx"
MIXED_ONNX = f"{ARTIFACTS}/model.mixed.onnx"
INT8_IR = f"{ARTIFACTS}/model.int8.xml"  # NNCF's INT8 for OpenVINO (with its .bin)
# The option that tags a finalist's re-measured copy (optimize.steps_finalists); no backend reads it.
FINALIST_TAG = ("optimize.round", "finalists")


@dataclass(frozen=True)
class OptimizeEvent:
    """Progress for a live view. `kind`: step (a step starts; `message` says why), note, skip (`message` is the
    reason), case (a case starts), phase (the running case's phase), done (a case finished; `result`),
    warning."""

    kind: str
    step: str
    message: str = ""
    label: str = ""
    result: CaseResult | None = None


EventCallback = Callable[[OptimizeEvent], None]


def remeasured_item(source: tuple[ModelSpec, Case], tag: tuple[str, str], max_time_s: float) -> PlanItem:
    """A case measured again from what it was measured from (`Run.sources`): tagged with the option `tag` (so its
    id differs from the case it copies; no backend reads it), timed for at most `max_time_s`, no parity check."""
    spec, planned = source
    options = tuple(sorted({**dict(planned.options), tag[0]: tag[1]}.items()))
    settings = replace(planned.settings, check_parity=False, max_time_s=max_time_s)
    return PlanItem(spec, (replace(planned, options=options, settings=settings),))


def case_variant_label(case: Case | CaseResult, variant: str = "") -> str:
    """`onnxruntime int8 b1 static` (plus the variant when it says more than the precision)."""
    text = f"{case.backend} {case.precision} b{case.batch} {case.shape_mode}"
    return f"{text} ({variant})" if variant else text


@dataclass
class Run:
    """Everything the steps share. `results` is the results file (written after every case and every step)."""

    request: OptimizeRequest
    spec: ModelSpec
    _: KW_ONLY  # the rest by keyword
    results: ResultsFile
    emit: EventCallback
    budget: Budget
    gains: GainLog = field(default_factory=GainLog)
    # Loaded once per invocation by the steps that need them: evaluation data and the FP32 reference outputs.
    memo: dict[str, Any] = field(default_factory=dict)
    # What each case of this invocation was measured from (measured now or resumed), by case id: the finalists'
    # step measures some of them again.
    sources: dict[str, tuple[ModelSpec, Case]] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        """The output folder."""
        return self.request.output

    @property
    def results_path(self) -> Path:
        """The results file of the run."""
        return self.folder / RESULTS_NAME

    @property
    def journal(self) -> Journal:
        """The story of the run, kept in the results file."""
        return Journal(self.results)

    def path(self, relative: str) -> Path:
        """A path inside the output folder."""
        return self.folder / relative

    def save(self) -> None:
        """Write the results file (atomically)."""
        from infermeter.results.io import write_results

        write_results(self.results_path, self.results)

    def options_for(self, backend: str) -> tuple[tuple[str, str], ...]:
        """The user's options that `backend` declares, checked and normalized (`backends.options.options_for`)."""
        from infermeter.backends.options import options_for

        return options_for(backend, self.request.options)

    def case(
        self,
        model_ref: str,
        backend: str,
        precision: str = "fp32",
        batch: int | None = None,
        shape_mode: str = "static",
        check_parity: bool = True,
    ) -> Case:
        """A case of this run with its measurement settings. The "fp32" of a model that is INT8 by design is its own
        precision (`ModelSpec.default_precision`) on every engine that takes int8: it runs its own graph."""
        from infermeter.backends.registry import get_backend

        own = self.spec.default_precision
        if precision == "fp32" and own != "fp32" and own in get_backend(backend).precisions:
            precision = own
        settings = replace(self.request.settings, check_parity=check_parity, seed=self.request.seed)
        return Case(
            model_ref,
            backend,
            precision=precision,
            batch=batch or self.request.batch,
            shape_mode=shape_mode,
            threads=self.request.threads,
            input_shapes=self.request.input_shapes,
            options=self.options_for(backend),
            settings=settings,
            input_values=self.request.input_values,
            machine=self.request.machine,
            reshape=self.spec.reshape if model_ref == self.spec.ref else (),
        )

    def measured(self) -> list[CaseResult]:
        """Every case the run has measured (this invocation and resumed ones), the finalists' re-measured copies
        left out: each stands for a case already here."""
        key, value = FINALIST_TAG
        return [case for case in self.journal.all_cases() if case.options.get(key) != value]

    def best_to_beat(self) -> CaseResult | None:
        """The admissible case with the lowest P50 at the main batch: what a candidate must beat to be worth
        measuring or repairing. None under `--no-prune` (every candidate is tried and every miss repaired)."""
        from infermeter.optimize.candidates import best_case

        if not self.request.prune:
            return None
        return best_case(self.measured(), self.request.max_accuracy_drop_pct, self.request.batch)

    def measure(
        self, step: str, spec: ModelSpec, case: Case, variant: str = "", artifact: str | None = None
    ) -> CaseResult | None:
        """Measure `case` in an isolated worker (unless the results file already holds it: a resumed run) and
        tag it with the step; None when the budget does not allow it (recorded as a skip)."""
        from infermeter.measure.sweep import SweepEvent, run_sweep

        label = case_variant_label(case, variant)
        journal = self.journal
        existing = journal.case(case.id)
        if existing is None:
            reason = self.budget.case_reason(case.backend, self.measured())
            if reason:
                journal.skip(step, label, reason)
                self.emit(OptimizeEvent("skip", step, reason, label))
                return None
            self.emit(OptimizeEvent("case", step, label=label))

            def on_event(event: SweepEvent) -> None:
                if event.kind == "phase":
                    self.emit(OptimizeEvent("phase", step, event.phase, label))

            item = PlanItem(spec, (case,))
            if self.request.cluster:
                from infermeter.cluster.driver import run_on_cluster
                from infermeter.measure.scenarios import LATENCY

                warn = lambda text: self.emit(OptimizeEvent("warning", step, text))  # noqa: E731
                run_on_cluster([item], [item], self.results, self.results_path, True, LATENCY, on_event, warn)
            else:
                run_sweep([item], self.results, self.results_path, isolate=True, on_event=on_event)
            result = self.results.cases[-1]
        else:
            result = existing
        write_record(result, OptimizeStep(step, variant, artifact))
        journal.add_case(step, result.id)
        self.sources[case.id] = (spec, case)
        self.save()
        self.emit(OptimizeEvent("done", step, "resumed: measured earlier" if existing else "", label, result))
        return result

    def fp32_case_of(self, backend: str, batch: int | None = None) -> CaseResult | None:
        """The FP32 static case of `backend` at the main batch measured by the baseline or FP32 step."""
        for step in ("baseline", "fp32"):
            for c in self.journal.step_cases(step):
                if c.backend == backend and c.batch == (batch or self.request.batch) and c.shape_mode == "static":
                    return c
        return None


def open_run(request: OptimizeRequest, emit: EventCallback) -> Run:
    """Resolve the model and open the output folder: a fresh results file, or the one of an earlier run of the
    same request (resume). A folder holding another model's run is refused."""
    from infermeter.results.io import read_results

    spec = resolve_model(request.model, request.reshape)
    for text in reshape_notes(spec):
        emit(OptimizeEvent("warning", "start", text))
    path = request.output / RESULTS_NAME
    if path.exists():
        results = read_results(path)
        earlier = Journal(results).data.get("request", {})
        if earlier.get("model") != request.model:
            raise UsageError(
                f"{request.output} holds an optimize run of {earlier.get('model') or 'something else'!r}, not "
                f"{request.model!r}; give another -o folder (or delete that one)"
            )
        keys = ("batches", "device", "threads", "machine", "input_shapes", "input_values", "reshape")
        differs = [k for k in keys if earlier.get(k) != request.to_dict().get(k)]
        if differs:
            raise UsageError(
                f"{request.output} holds a run with other {', '.join(differs)}; rerun with the same settings to "
                "resume it, or give another -o folder"
            )
        emit(OptimizeEvent("note", "start", f"resuming {path}: {len(results.cases)} case(s) already measured"))
        results.command = list(request.command)  # the command that resumed it
    else:
        results = new_results_file(request.command)
    journal = Journal(results)
    journal.data["model"] = request.model
    journal.data["request"] = request.to_dict()
    reserve_s = finalists_reserve_s(request.finalists, request.settings.min_time_s)
    run = Run(request, spec, results=results, emit=emit, budget=Budget(request.budget_s, reserve_s=reserve_s))
    run.save()
    return run
