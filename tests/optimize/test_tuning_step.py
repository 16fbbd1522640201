"""optimize's auto-tuning step: trials planned from the budget for a backend that tunes in its build, the tuned
case measured as one more candidate, and a budget too small for tuning said so. Run on the null backend's
simulated tuning (`null.tune_trials`: a build that sleeps per trial and a case that then runs faster), so the
planning is tested in seconds; TVM's real tuning is tested in tests/backends/test_tvm.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infermeter.backends.base import AutoTuning
from infermeter.core.case import MeasureSettings
from infermeter.optimize.pipeline import Run, open_run
from infermeter.optimize.request import OptimizeRequest
from infermeter.optimize.steps.fp32 import step_fp32
from infermeter.optimize.steps.tuning import MIN_TRIALS, plan_trials, seconds_per_trial, step_tuning

QUICK = MeasureSettings(warmup_iterations=2, min_iterations=10, min_time_s=0.05, max_time_s=1.0, target_ci=0.0)
TRIAL_S = 0.0005


def _run(folder: Path, budget_s: float) -> Run:
    options = (("null.latency_ms", "2"), ("null.trial_s", str(TRIAL_S)))
    request = OptimizeRequest("tiny_cnn", folder, backends=("null",), options=options, budget_s=budget_s,
                              settings=QUICK)  # fmt: skip
    run = open_run(request, lambda _event: None)
    step_fp32(run, "torch")  # the baseline is torch's; only null is measured here
    return run


@pytest.fixture(scope="module")
def untuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder whose untuned null case is measured: each test resumes a copy of it (`_resumed`)."""
    folder = tmp_path_factory.mktemp("tuning") / "run"
    _run(folder, budget_s=120)
    return folder


def _resumed(untuned: Path, tmp_path: Path) -> Run:
    folder = tmp_path / "run"
    shutil.copytree(untuned, folder)
    run = _run(folder, budget_s=120)
    assert [c.backend for c in run.measured()] == ["null"]  # resumed, not measured again
    return run


def test_the_trials_are_planned_from_the_budget_and_the_tuned_case_is_a_candidate(
    untuned: Path, tmp_path: Path
) -> None:
    run = _resumed(untuned, tmp_path)
    step_tuning(run)
    step = run.journal.step("tuning")
    assert step is not None and step["status"] == "done", step
    untuned, tuned = (c for c in run.measured() if c.backend == "null")
    trials = int(tuned.options["null.tune_trials"])
    # Half of the ~115 s left, less the case, at the prior 0.01 s per trial: beyond the cap of 1024.
    assert trials == 1024 and float(tuned.options["null.tune_minutes"]) > 0
    assert (
        tuned.ok and tuned.loading.build is not None and tuned.loading.build.build_phases_s["tune_s"] == 1024 * TRIAL_S
    )
    assert tuned.latency_ms is not None and untuned.latency_ms is not None
    assert tuned.latency_ms.p50 < 0.6 * untuned.latency_ms.p50  # the simulated tuning halves the latency
    notes = " | ".join(step["notes"])
    assert "null: 1024 trials planned" in notes and "2.0x faster than untuned null, paid back after" in notes, notes


def test_a_budget_too_small_for_tuning_is_a_skip_with_the_reason(untuned: Path, tmp_path: Path) -> None:
    run = _resumed(untuned, tmp_path)
    run.budget.limit_s = run.budget.elapsed_s() + 0.3  # the untuned case ran; a third of a second is left
    step_tuning(run)
    step = run.journal.step("tuning")
    assert step is not None and not [c for c in run.measured() if "null.tune_trials" in c.options]
    (skipped,) = step["skipped"]
    assert (
        skipped["what"] == "null"
        and skipped["reason"].startswith("budget: ")
        and f"{MIN_TRIALS} trials" in (skipped["reason"])
    )


def test_seconds_per_trial_come_from_this_runs_tuned_builds_else_the_prior() -> None:
    tuning = AutoTuning("null.tune_trials", "null.tune_minutes", prior_s_per_trial=3.0)
    assert seconds_per_trial("null", tuning, []) == (3.0, "prior")
    assert plan_trials(seconds_left=100, case_s=10, per_trial_s=2) == 20  # (0.5 * 100 - 10) / 2
    assert plan_trials(seconds_left=10, case_s=10, per_trial_s=2) == 0
