"""The journal of optimize's steps as the user follows it: a step begun with why it is tried, its notes, what it
skips and why, and its end. Every step module writes through these (kept apart from the steps themselves so that
no step module imports another to log)."""

from __future__ import annotations

from infermeter.optimize.pipeline import OptimizeEvent, Run

STEP_TITLES = {
    "baseline": "1. Baseline",
    "export": "2. ONNX export, verified",
    "fp32": "3. Every backend at FP32, parity-checked",
    "tuning": "3b. Auto-tuning compilers, trials planned from the budget",
    "int8": "4a. INT8 with calibration (mixed precision if needed)",
    "half": "4b. BF16 / FP16 where the hardware has them",
    "shapes": "5a. Static vs dynamic shapes",
    "batching": "5b. Batching",
    "finalists": "5c. The finalists measured again together",
    "advise": "6. Pick under the constraints",
    "serving": "7. Batching for serving (tune-batching's search on the pick)",
}


def begin(run: Run, key: str, why: str) -> None:
    """Start step `key` in the journal and tell the live view."""
    run.journal.begin(key, STEP_TITLES[key], why)
    run.emit(OptimizeEvent("step", key, why, STEP_TITLES[key]))


def note(run: Run, key: str, text: str) -> None:
    """A fact about the step, in the journal and on screen."""
    run.journal.note(key, text)
    run.emit(OptimizeEvent("note", key, text))


def skip(run: Run, key: str, what: str, reason: str) -> None:
    """Something the step does not try, with the reason, in the journal and on screen."""
    run.journal.skip(key, what, reason)
    run.emit(OptimizeEvent("skip", key, reason, what))


def finish(run: Run, key: str, status: str = "done") -> None:
    """Close the step and save."""
    run.journal.finish(key, status)
    run.save()
