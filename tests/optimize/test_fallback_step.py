"""optimize's accuracy budget (points) as the FP32-fallback study's budget."""

from __future__ import annotations

from infermeter.optimize.steps_fallback import budget_for
from infermeter.quantize.reduced import Budget


def test_classifier_budget_is_decisions_changed() -> None:
    assert budget_for("classification", 200, 1.0) == Budget(max_changed=2)
    assert budget_for("classification", 64, 0.0) == Budget(max_changed=0)


def test_other_outputs_budget_is_a_mean_cosine() -> None:
    budget = budget_for("embedding", 64, 0.5)
    assert budget.min_cosine is not None and abs(budget.min_cosine - 0.995) < 1e-12
