"""`run_optimize`: the steps in order, each one saved as it finishes, so that an interrupted run resumes."""

from __future__ import annotations

from dataclasses import replace

from infermeter.core.interrupts import deferred_interrupts
from infermeter.optimize.finish import Outcome, step_advise, with_serving, write_report
from infermeter.optimize.pipeline import EventCallback, OptimizeEvent, open_run
from infermeter.optimize.request import OptimizeRequest, check_request
from infermeter.optimize.steps.finalists import step_finalists
from infermeter.optimize.steps.fp32 import (
    baseline_backend,
    step_baseline,
    step_batching,
    step_export,
    step_fp32,
    step_half,
    step_shapes,
)
from infermeter.optimize.steps.int8 import step_int8
from infermeter.optimize.steps.serving import step_serving
from infermeter.optimize.steps.tuning import step_tuning


def run_optimize(request: OptimizeRequest, on_event: EventCallback | None = None) -> Outcome:
    """Run every step of the procedure for `request` (see the package docstring) and return how it ended.
    Raises InfermeterError subclasses for bad input; a failing backend or case never stops the run."""
    check_request(request)
    emit = on_event or (lambda _event: None)
    run = open_run(request, emit)
    baseline = step_baseline(run)
    with deferred_interrupts():  # torch's exporter and ORT's verification run in this process
        fp32_onnx = step_export(run)
    step_fp32(run, baseline_backend(run))
    step_tuning(run)
    step_int8(run, fp32_onnx)
    step_half(run)
    step_shapes(run)
    step_batching(run)
    step_finalists(run)
    outcome = step_advise(run, baseline if baseline is not None and baseline.ok else None)
    if request.serving is not None:
        policy = step_serving(run, outcome.advice.pick)
        outcome = with_serving(run, outcome, policy) if policy else replace(outcome, report=write_report(run))
    emit(OptimizeEvent("note", "end", f"{run.budget.elapsed_s():.0f} s spent of a {request.budget_s:.0f} s budget"))
    return outcome
