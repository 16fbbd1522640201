"""optimize's finalists step on crafted results: the advice ranks the re-measured copies in place of their
originals, with the originals' identity; candidates that were not finalists are out with the reason; and the
step says when it does not run (no framework: the step's group itself runs in test_optimize_cli)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crafted_results import make_case
from infermeter.optimize.journal import Journal
from infermeter.optimize.pipeline import FINALIST_TAG
from infermeter.optimize.request import OptimizeRequest
from infermeter.optimize.steps.finalists import _skip_reason, final_pool, finalists_lines
from infermeter.results.schema import CaseResult, ResultsFile


def _case(backend: str, p50_ms: float, precision: str = "fp32") -> CaseResult:
    return make_case(backend, p50_ms=p50_ms, precision=precision, sigma=0.0)


def _copy(original: CaseResult, p50_ms: float, rounds: list[float]) -> CaseResult:
    """The finalist's copy as the group returns it: tagged, its own id, the group's figures."""
    figures = _case(original.backend, p50_ms, original.precision)
    key, value = FINALIST_TAG
    return replace(
        figures,
        id=f"{original.id}-again",
        options={**original.options, key: value},
        timing=replace(figures.timing, rounds_p50_ms=rounds),
    )


def _run(cases: list[CaseResult], details: dict[str, Any], **request: Any) -> SimpleNamespace:
    results = ResultsFile(created="now", environment={}, cases=cases)
    journal = Journal(results)
    journal.begin("finalists", "5c", "why")
    journal.details("finalists").update(details)
    return SimpleNamespace(journal=journal, request=OptimizeRequest("m", Path("out"), **request), sources={})


def test_the_copies_stand_for_their_originals_and_the_others_are_eliminated() -> None:
    fast, second, third = _case("onnxruntime", 10.0), _case("openvino", 11.0), _case("torch", 14.0)
    fast_again, second_again = _copy(fast, 13.0, [13.0, 13.1]), _copy(second, 12.0, [12.0, 12.2])
    details = {"originals": [fast.id, second.id], "copies": [fast_again.id, second_again.id], "eliminated": [third.id]}
    run = _run([fast, second, third, fast_again, second_again], details)
    pool, eliminated = final_pool(run, [fast, second, third])  # type: ignore[arg-type]
    assert [(c.id, c.latency_ms.p50 if c.latency_ms else None) for c in pool] == [(fast.id, 13.0), (second.id, 12.0)]
    assert all(FINALIST_TAG[0] not in c.options for c in pool)  # what deploy and serve load: the original case
    assert [e.case.id for e in eliminated] == [third.id] and "not a finalist" in eliminated[0].reasons[0]


def test_a_finalist_dropped_in_the_race_is_out_with_the_decision() -> None:
    fast, slow = _case("onnxruntime", 10.0), _case("openvino", 11.0)
    fast_again, slow_again = _copy(fast, 10.0, [10.0] * 6), _copy(slow, 14.0, [14.0] * 4)
    why = "openvino: dropped in the race, decided slower than onnxruntime: different (slower) after 4 rounds"
    details = {"originals": [fast.id, slow.id], "copies": [fast_again.id, slow_again.id], "eliminated": [],
               "dropped": {slow_again.id: why}}  # fmt: skip
    run = _run([fast, slow, fast_again, slow_again], details)
    pool, out = final_pool(run, [fast, slow])  # type: ignore[arg-type]
    assert [c.id for c in pool] == [fast.id]
    assert [(e.case.id, e.reasons) for e in out] == [(slow.id, [why])]


def test_without_the_step_the_pool_is_unchanged() -> None:
    cases = [_case("onnxruntime", 10.0), _case("torch", 14.0)]
    run = _run(cases, {})
    assert final_pool(run, cases) == (cases, [])  # type: ignore[arg-type]


def test_the_advice_quotes_the_paired_margin_between_finalists_of_different_models() -> None:
    pick = _case("openvino", 12.0, "int8")
    pick.model, pick.timing.rounds_p50_ms = "artifacts/model.int8.xml", [12.0, 12.1, 11.9, 12]
    runner = _case("onnxruntime", 13.0)
    runner.timing.rounds_p50_ms = [13.0, 13.2, 12.9, 13.1]
    run = _run([], {"originals": [pick.id, runner.id], "copies": ["x", "y"], "eliminated": ["z"]})
    lines = finalists_lines(run, pick, runner)  # type: ignore[arg-type]
    assert "2 best admissible candidates measured again together, in 4 interleaved rounds" in lines[0]
    assert "1 other admissible candidate(s)" in lines[0]
    assert "1.08" in lines[1] and "the pick is faster" in lines[1]
    # Of one model, the advice itself quotes the margin (tradeoff.paired_margin_lines): not said twice.
    same_model = replace(pick, model=runner.model, precision="fp32")
    assert len(finalists_lines(run, same_model, runner)) == 1  # type: ignore[arg-type]
    assert finalists_lines(_run([], {}), pick, runner) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("request_fields", "expected"),
    [
        ({"finalists": 1}, "--finalists below 2"),
        ({"objective": "memory"}, "timed rounds do not decide"),
        ({"cluster": "auto"}, "no group to interleave"),
        ({}, "fewer than 2 admissible candidates"),
    ],
)
def test_when_the_step_does_not_run_it_says_why(request_fields: dict[str, Any], expected: str) -> None:
    run = _run([], {}, **request_fields)
    reason = _skip_reason(run, [_case("onnxruntime", 10.0)])  # type: ignore[arg-type]
    assert reason is not None and expected in reason


def test_the_group_shrinks_to_what_the_budget_has_left_and_says_when_nothing_fits() -> None:
    from infermeter.core.case import MeasureSettings
    from infermeter.optimize.candidates import Budget
    from infermeter.optimize.steps.finalists import _time_per_finalist_s

    def run_with(left_s: float) -> SimpleNamespace:
        settings = MeasureSettings(min_time_s=2.0, max_time_s=20.0)
        return SimpleNamespace(request=SimpleNamespace(settings=settings), budget=Budget(limit_s=left_s))

    assert _time_per_finalist_s(run_with(600.0), 3) == (6.0, None)  # 3x --min-time, plenty left
    timed_s, reason = _time_per_finalist_s(run_with(40.0), 3)  # resnet18's rerun: 40 s left after the steps
    assert reason is None and 2.0 <= timed_s < 6.0
    timed_s, reason = _time_per_finalist_s(run_with(20.0), 3)
    assert reason is not None and "budget" in reason and "finalists' group" in reason


def test_a_resumed_run_keeps_the_group_measured_earlier() -> None:
    from infermeter.optimize.steps.finalists import _measured_earlier

    fast, second = _case("onnxruntime", 10.0), _case("openvino", 11.0)
    fast_again, second_again = _copy(fast, 13.0, [13.0]), _copy(second, 12.0, [12.0])
    details = {"originals": [fast.id, second.id], "copies": [fast_again.id, second_again.id]}
    assert _measured_earlier(_run([fast, second, fast_again, second_again], details), details)  # type: ignore[arg-type]
    # A copy missing (the group was interrupted): measured again.
    assert not _measured_earlier(_run([fast, second, fast_again], details), details)  # type: ignore[arg-type]
    assert not _measured_earlier(_run([fast, second], {}), {})  # type: ignore[arg-type]
