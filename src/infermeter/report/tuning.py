"""What auto-tuning bought: for each case whose artifact was tuned (a `tune_s` build phase, TVM's MetaSchedule),
its speedup over the untuned case of the same engine and the break-even point, the number of inferences after
which the tuning's seconds are paid back, against untuned and against the fastest other engine of the same
comparison. For the bench table's footnotes, optimize's journal and benchmarks/compilers.py."""

from __future__ import annotations

import math
from collections.abc import Sequence

from infermeter.results.artifact import Phase
from infermeter.results.schema import CaseResult


def break_even_inferences(cost_s: float, slower_ms: float, faster_ms: float) -> int | None:
    """Inferences after which `cost_s` spent once is paid back by running at `faster_ms` instead of `slower_ms`
    per inference; None: never (not faster)."""
    if faster_ms >= slower_ms:
        return None
    return math.ceil(cost_s / ((slower_ms - faster_ms) / 1e3))


def tune_s(case: CaseResult) -> float:
    """Seconds the case's artifact spent tuning (0: untuned, or no build stage)."""
    return case.loading.build.build_phases_s.get(Phase.TUNE.value, 0.0) if case.loading.build is not None else 0.0


def _group(case: CaseResult) -> tuple[object, ...]:
    from infermeter.report.groups import comparison_group

    return (*comparison_group(case), case.precision)


def _p50(case: CaseResult) -> float:
    assert case.latency_ms is not None
    return case.latency_ms.p50


def _after(cost_s: float, slower: CaseResult, faster: CaseResult) -> str:
    count = break_even_inferences(cost_s, _p50(slower), _p50(faster))
    return "never (not faster)" if count is None else f"after {count:,} inferences"


def tuning_sentence(case: CaseResult, cases: Sequence[CaseResult]) -> str:
    """`tuning took 152 s: 9.8x faster than untuned tvm, paid back after 16,000 inferences; against onnxruntime
    (0.9 ms) never (not faster)`; empty for an untuned or failed case."""
    cost = tune_s(case)
    if cost <= 0 or not case.ok or case.latency_ms is None:
        return ""
    peers = [c for c in cases if c.ok and c.latency_ms is not None and _group(c) == _group(case)]
    untuned = next((c for c in peers if c.backend == case.backend and tune_s(c) == 0), None)
    others = [c for c in peers if c.backend != case.backend]
    parts = [f"tuning took {cost:.0f} s"]
    if untuned is not None:
        speedup = _p50(untuned) / _p50(case)
        parts.append(f"{speedup:.1f}x faster than untuned {case.backend}, paid back {_after(cost, untuned, case)}")
    if others:
        fastest = min(others, key=_p50)
        parts.append(f"against {fastest.backend} ({_p50(fastest):.3g} ms) {_after(cost, fastest, case)}")
    return parts[0] + ": " + "; ".join(parts[1:]) if len(parts) > 1 else parts[0]
