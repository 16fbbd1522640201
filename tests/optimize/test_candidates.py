"""Pure parts of optimize: pruning of dominated configurations, the time budget, backend and precision
selection, and the story section of the report (crafted results, no framework)."""

from __future__ import annotations

from typing import Any

import pytest

from crafted_results import accuracy_field, parity_field
from infermeter.optimize.candidates import (
    Budget,
    GainLog,
    admissible,
    best_case,
    finalists_reserve_s,
    hardware_precision_reason,
    plan_backends,
    prune_reason,
)
from infermeter.report.merged import SourceFile, merge_results
from infermeter.report.story import render_story, render_story_html
from infermeter.results.schema import CaseResult, LatencyStats, ResultsFile, TimingFigures


def _case(backend: str, p50_ms: float, precision: str = "fp32", duration_s: float = 5.0, **extra: Any) -> CaseResult:
    stats = LatencyStats(
        p50_ms,
        p50_ms,
        p95=p50_ms,
        p99=p50_ms * 1.1,
        p999=p50_ms,
        mean=p50_ms,
        std=0.0,
        min=p50_ms,
        max=p50_ms,
        cv=0.01,
        p50_ci95=(p50_ms, p50_ms),
        p99_ci95=(p50_ms, p50_ms),
        outliers=0,
        count=100,
    )
    return CaseResult(
        id=f"{backend}-{precision}-{p50_ms}",
        model="m",
        backend=backend,
        backend_version="1",
        device="cpu",
        batch=1,
        shape_mode="static",
        precision=precision,
        precision_effective=precision,
        threads=1,
        status="ok",
        latency_ms=stats,
        timing=TimingFigures(throughput=1000 / p50_ms),
        duration_s=duration_s,
        extra=dict(extra),
    )


def test_a_backend_twice_as_slow_is_pruned_once_int8_has_shown_its_gain() -> None:
    best_fp32, slow_fp32 = _case("onnxruntime", 10.0), _case("torchy", 25.0)
    gains = GainLog()
    # Before any int8 was measured the prior ceiling (4x) keeps the slow backend in play: 25 / 4 < 10.
    assert prune_reason("int8", "torchy", slow_fp32, best_fp32, gains) is None
    int8 = _case("onnxruntime", 5.0, "int8", **accuracy_field(0.9, 0.1))
    gains.record("int8", "onnxruntime", best_fp32, int8)
    reason = prune_reason("int8", "torchy", slow_fp32, int8, gains)
    assert reason is not None and "dominated" in reason and "5.00x gain" in reason and "ceiling 4.00x" in reason
    # A measured gain beyond the prior raises the ceiling: a 6x int8 gain elsewhere keeps torchy in play.
    gains.record("int8", "other", _case("other", 30.0), _case("other", 5.0, "int8"))
    assert prune_reason("int8", "torchy", slow_fp32, int8, gains) is None


def test_nothing_is_built_on_a_failed_fp32_case() -> None:
    failed = _case("null", 1.0)
    failed.status = "crashed"
    assert "failed" in (prune_reason("bf16", "null", failed, None, GainLog()) or "")
    assert "not measured" in (prune_reason("bf16", "null", None, None, GainLog()) or "")


def test_admissible_and_best_respect_accuracy_and_parity() -> None:
    fast_but_wrong = _case("a", 1.0, **parity_field(False))
    fast_but_inaccurate = _case("b", 2.0, "int8", **accuracy_field(0.9, 3.0))
    good = _case("c", 3.0, "int8", **accuracy_field(0.9, 0.5))
    assert not admissible(fast_but_wrong, 1.0) and not admissible(fast_but_inaccurate, 1.0)
    assert best_case([fast_but_wrong, fast_but_inaccurate, good], 1.0, 1) is good
    assert best_case([fast_but_wrong, fast_but_inaccurate, good], 5.0, 1) is fast_but_inaccurate


def test_budget_estimates_from_measured_cases() -> None:
    measured = [_case("x", 1.0, duration_s=40.0), _case("y", 1.0, duration_s=10.0)]
    budget = Budget(limit_s=30.0)
    assert budget.estimate_case_s("x", measured)[0] == 40.0
    reason = budget.case_reason("x", measured)
    assert reason is not None and "budget" in reason and "median of 1 x case(s)" in reason
    assert budget.case_reason("y", measured) is None
    assert budget.estimate_case_s("z", measured)[0] == 25.0  # no z yet: the median of every case


def test_backends_that_cannot_run_are_named_with_their_reason() -> None:
    plan = plan_backends("cpu", ["onnxruntime", "tensorrt", "null"])
    assert "onnxruntime" in plan.usable and "null" in plan.usable
    reasons = dict(plan.skipped)
    assert "tensorrt" in reasons and "cpu" in reasons["tensorrt"]
    default = plan_backends("cpu", [])
    assert "null" not in default.usable and all(name != "tensorrt" for name in default.usable)


def test_bf16_is_skipped_when_the_cpu_has_no_native_support(monkeypatch: pytest.MonkeyPatch) -> None:
    import infermeter.results.env as env

    monkeypatch.setattr(env, "cpu_isa", lambda: ["avx2", "fma"])
    reason = hardware_precision_reason("bf16", "cpu")
    assert reason is not None and "avx512_bf16" in reason and "amx_bf16" in reason
    monkeypatch.setattr(env, "cpu_isa", lambda: ["avx2", "amx_bf16"])
    assert hardware_precision_reason("bf16", "cpu") is None
    assert hardware_precision_reason("int8", "cpu") is None


def test_story_tells_each_step_with_skips_and_the_pick() -> None:
    base, fast = _case("torch", 20.0), _case("onnxruntime", 4.0, **parity_field(True))
    journal = {
        "version": 1,
        "model": "m<odel>",
        "steps": [
            {"key": "baseline", "title": "1. Baseline", "why": "reference", "status": "done", "case_ids": [base.id],
             "notes": [], "skipped": [], "seconds": 3},
            {"key": "fp32", "title": "3. FP32", "why": "free gains", "status": "done", "case_ids": [fast.id],
             "notes": ["a note"], "skipped": [{"what": "openvino", "reason": "unavailable (<pip install>)"}]},
            {"key": "advise", "title": "6. Pick", "why": "rank", "status": "done", "case_ids": [], "notes": [],
             "skipped": [], "details": {"pick": fast.id, "baseline": base.id, "explanation": ["Pick it."],
                                        "objective": "latency", "constraints": "none"}},
        ],
    }  # fmt: skip
    results = ResultsFile(created="now", environment={}, cases=[base, fast], extra={"optimize": journal})
    merged = merge_results([SourceFile("results.json", results)])
    story = render_story(merged)
    assert "m&lt;odel&gt;" in story and "unavailable (&lt;pip install&gt;)" in story
    assert "5.00x" in story and "◀ pick" in story and "Pick it." in story
    page = render_story_html(merged)
    assert page.index('id="story"') < page.index("<h2>Results</h2>")
    plain = ResultsFile(created="now", environment={}, cases=[base])
    assert render_story(merge_results([SourceFile("r.json", plain)])) == ""


def test_the_budget_keeps_the_finalists_reserve_until_their_step() -> None:
    reserve = finalists_reserve_s(3, min_time_s=2.0)
    assert reserve == 3 * (3.0 * 2.0 + 10.0) and finalists_reserve_s(1, 2.0) == 0.0  # no group of one
    budget = Budget(limit_s=100.0, reserve_s=reserve)
    assert budget.remaining_s() <= 100.0 - reserve
    assert budget.case_reason("x", [_case("x", 1.0, duration_s=60.0)]) is not None  # 60 s no longer fits in 52
    budget.release_reserve()
    assert budget.case_reason("x", [_case("x", 1.0, duration_s=60.0)]) is None
