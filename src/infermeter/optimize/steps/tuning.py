"""Step 3b of optimize: auto-tuning compilers. For each backend that auto-tunes in its build (`Backend.auto_tuning`:
TVM's MetaSchedule) and whose untuned FP32 case ran in step 3, the trials are planned from the time budget: at
most `TUNING_SHARE` of what is left, less the case itself, at the measured (else prior) seconds per trial, with the
tuning's minutes bounded by the same share so that a slower trial rate cannot overrun it. The tuned case is one
more candidate, parity-checked like every other; the journal says what the tuning cost and when it pays back."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

from infermeter.backends.base import AutoTuning
from infermeter.backends.options import options_for
from infermeter.backends.registry import get_backend
from infermeter.optimize.pipeline import Run
from infermeter.optimize.steps.fp32 import begin, finish, note, skip
from infermeter.report.tuning import tune_s, tuning_sentence
from infermeter.results.schema import CaseResult

# Of what is left of the budget when the step starts: the steps after it (INT8, BF16, shapes, batching) need the
# rest.
TUNING_SHARE = 0.5
# Fewer trials than this spread over a model's fused kernels buys nothing measurable (MetaSchedule measures
# candidates in batches per kernel); more than this is a bench run's job, not optimize's.
MIN_TRIALS = 16
MAX_TRIALS = 1024


def seconds_per_trial(backend: str, tuning: AutoTuning, measured: Sequence[CaseResult]) -> tuple[float, str]:
    """Seconds one trial costs: the median over this run's tuned builds of `backend`, else the backend's prior."""
    rates = [
        tune_s(case) / int(case.options[tuning.trials_key])
        for case in measured
        if case.backend == backend and tune_s(case) > 0 and int(case.options.get(tuning.trials_key, 0)) > 0
    ]
    if rates:
        return statistics.median(rates), f"median of {len(rates)} tuned build(s) of this run"
    return tuning.prior_s_per_trial, "prior"


def plan_trials(seconds_left: float, case_s: float, per_trial_s: float) -> int:
    """Trials that fit in `TUNING_SHARE` of `seconds_left` once the case itself (`case_s`) is paid for."""
    return min(MAX_TRIALS, max(0, math.floor((TUNING_SHARE * seconds_left - case_s) / per_trial_s)))


def step_tuning(run: Run) -> None:
    """3b. Tune each auto-tuning compiler whose untuned FP32 case ran, with trials planned from the budget."""
    tuners = [name for name in _measured_backends(run) if get_backend(name).auto_tuning is not None]
    if not tuners:
        return
    begin(run, "tuning", "a compiler's untuned kernels are its defaults, not what it can do: auto-tuning searches "
          "each fused kernel's schedule on this CPU, at a cost in build time that the budget decides")  # fmt: skip
    for name in tuners:
        _tune(run, name)
    finish(run, "tuning")


def _measured_backends(run: Run) -> list[str]:
    return list(dict.fromkeys(case.backend for case in run.journal.step_cases("fp32")))


def _tune(run: Run, backend: str) -> None:
    tuning = get_backend(backend).auto_tuning
    assert tuning is not None
    untuned = run.fp32_case_of(backend)
    if untuned is None or not untuned.ok:
        skip(run, "tuning", backend, "its untuned FP32 case did not run, so tuning has nothing to stand on")
        return
    if tune_s(untuned) > 0:
        skip(run, "tuning", backend, f"step 3 already ran it tuned (-O {tuning.trials_key} given)")
        return
    measured = run.measured()
    per_trial, source = seconds_per_trial(backend, tuning, measured)
    case_s, _ = run.budget.estimate_case_s(backend, measured)
    left_s = run.budget.remaining_s()  # the plan and what the journal says of it, from one reading
    trials = plan_trials(left_s, case_s, per_trial)
    if trials < MIN_TRIALS:
        skip(run, "tuning", backend, f"budget: {max(left_s, 0):.0f} s left; {MIN_TRIALS} trials at "
             f"{per_trial:.1f} s each ({source}) do not fit in {TUNING_SHARE:.0%} of it")  # fmt: skip
        return
    minutes = trials * per_trial / 60
    note(run, "tuning", f"{backend}: {trials} trials planned ({TUNING_SHARE:.0%} of the {left_s:.0f} "
         f"s left, {per_trial:.1f} s per trial, {source}), the tuning bounded at {minutes:.1f} min")  # fmt: skip
    case = run.case(run.spec.ref, backend)
    given = (*run.request.options, (tuning.trials_key, str(trials)), (tuning.minutes_key, f"{minutes:.2f}"))
    # The build gets the tuning's bound and the case's own estimate on top, so MetaSchedule's last batch can end.
    build_timeout_s = minutes * 60 + max(case_s, 60.0) * 2
    case = replace(case, options=options_for(backend, given),
                   settings=replace(case.settings, build_timeout_s=build_timeout_s))  # fmt: skip
    result = run.measure("tuning", run.spec, case, variant=f"tuned, {trials} trials")
    if result is not None and result.ok:
        note(run, "tuning", f"{backend} tuned: {tuning_sentence(result, run.measured())}")
