"""optimize's accuracy budget (points) as the FP32-fallback study's budget."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from crafted_results import accuracy_field
from infermeter.core.case import Case, MeasureSettings
from infermeter.figures.latency_stats import latency_stats
from infermeter.models.resolve import resolve_model
from infermeter.optimize.steps.fallback import budget_for, fallback_candidate
from infermeter.quantize.reduced import Budget
from infermeter.results.schema import CaseResult


def test_classifier_budget_is_decisions_changed() -> None:
    assert budget_for("classification", 200, 1.0) == Budget(max_changed=2)
    assert budget_for("classification", 64, 0.0) == Budget(max_changed=0)


def test_other_outputs_budget_is_a_mean_cosine() -> None:
    budget = budget_for("embedding", 64, 0.5)
    assert budget.min_cosine is not None and abs(budget.min_cosine - 0.995) < 1e-12


class _Journal:
    def __init__(self) -> None:
        self.skipped: list[tuple[str, str, str]] = []

    def skip(self, key: str, what: str, reason: str) -> None:
        self.skipped.append((key, what, reason))


def _run(best: CaseResult | None, sources: dict[str, tuple[object, Case]]) -> SimpleNamespace:
    """The parts of an optimize run the repair decision reads (what each case was measured from, to measure the
    pair again): the study itself must never be reached."""
    return SimpleNamespace(
        request=SimpleNamespace(max_accuracy_drop_pct=1.0),
        best_to_beat=lambda: best,
        journal=_Journal(),
        emit=lambda event: None,
        sources=sources,
    )


def _bf16_missing_the_budget(p50_ms: float) -> CaseResult:
    return CaseResult(id="torch-bf16", model="m", backend="torch", backend_version="1", device="cpu", batch=1,
                      shape_mode="static", precision="bf16", precision_effective="bf16", threads=1, status="ok",
                      latency_ms=latency_stats([p50_ms] * 20), extra=accuracy_field(0.9, 3.0))  # fmt: skip


def test_a_candidate_decided_slower_than_the_best_gets_no_fp32_fallback_study() -> None:
    # What the two were measured from: the null engine at 2 ms (the best) and 3 ms (the candidate), measured again
    # as one interleaved group by the repair rule, which decides the candidate slower.
    settings = MeasureSettings(warmup_iterations=2, min_iterations=5, min_time_s=0.05, max_time_s=10.0, rounds=2,
                               target_ci=0.0)  # fmt: skip
    fast, slow = (Case("tiny_cnn", "null", threads=1, options=(("null.latency_ms", ms),), settings=settings)
                  for ms in ("2", "3"))  # fmt: skip
    best = CaseResult(id=fast.id, model="m", backend="openvino", backend_version="1", device="cpu", batch=1,
                      shape_mode="static", precision="fp32", precision_effective="fp32", threads=1, status="ok",
                      latency_ms=latency_stats([18.0] * 20))  # fmt: skip
    spec = resolve_model("tiny_cnn")
    run = _run(best, {fast.id: (spec, fast), slow.id: (spec, slow)})
    candidate = replace(_bf16_missing_the_budget(24.0), id=slow.id)
    assert fallback_candidate(run, candidate) is None  # type: ignore[arg-type]
    ((step, what, reason),) = run.journal.skipped
    assert step == "half" and what == "torch bf16 FP32-fallback study" and "cannot win" in reason
    assert "decided slower than the best within the budget" in reason and "paired rounds" in reason
