"""optimize says when its accuracy budget is finer than one evaluation answer (a classifier on 64 samples moves
in steps of 1.56 points, so a 1-point budget lets no answer change)."""

from __future__ import annotations

from infermeter.optimize.accuracy import coarse_budget_note


def test_a_budget_finer_than_one_answer_is_named_with_the_samples_it_needs() -> None:
    text = coarse_budget_note("classification", 64, 1.0)
    assert text is not None
    assert "64 evaluation answers (1.56 points each)" in text and "at least 100 evaluation samples" in text


def test_a_budget_of_one_answer_or_more_and_other_metrics_say_nothing() -> None:
    assert coarse_budget_note("classification", 64, 1.5625) is None
    assert coarse_budget_note("classification", 300, 1.0) is None
    assert coarse_budget_note("classification", 64, 0.0) is None  # zero: no change allowed, on purpose
    assert coarse_budget_note("regression", 64, 1.0) is None  # a cosine drop is not counted in answers
