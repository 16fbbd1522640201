"""Whether to repair a reduced precision that missed the accuracy budget (its FP32-fallback study): only when the
repair might win. A repair keeps some layers in FP32, with casts around them, so it is no faster than the
unrepaired candidate; a candidate slower than the best admissible case by δ cannot be repaired into a winner.

"Slower" is decided, not read off two P50s measured minutes apart with a margin for the machine's drift: when the
candidate's P50 is above the best's, the two are measured again as one interleaved group until the sequential
decision (`compare.decision_rounds`) says *slower* (no repair), or *same*, *faster* or *unknown* (repaired: a
candidate is never given up on an undecided comparison).
"""

from __future__ import annotations

from collections.abc import Mapping

from infermeter.compare.decision import Decision, DecisionParams
from infermeter.core.case import Case
from infermeter.models.spec import ModelSpec
from infermeter.optimize.candidates import p50
from infermeter.optimize.pipeline import Run, case_variant_label, remeasured_item
from infermeter.optimize.steps.log import note
from infermeter.results.schema import CaseResult

# A false *slower* leaves a repair untried that was within δ₀ of the best: α 5%. β 5% at δ 5% (the gate's δ).
REPAIR_PARAMS = DecisionParams(alpha=0.05, beta=0.05, delta=0.05, min_rounds=6, budget_rounds=40)
# The re-measured pair is tagged so that its ids differ from the cases they copy; no backend reads the option.
REPAIR_TAG = ("optimize.round", "repair-check")
# Each side of the pair is timed for at most this long: enough for the budget of rounds at small latencies.
REPAIR_MAX_TIME_S = 10.0


def paired_decision(
    sources: Mapping[str, tuple[ModelSpec, Case]], best: CaseResult, candidate: CaseResult
) -> tuple[Decision | None, str | None]:
    """The candidate (NEW) against the best (BASE), each measured again from what it was measured from
    (`sources`, by case id) in interleaved rounds until decided: (decision, None), or (None, why) when they could
    not be measured together."""
    from infermeter.compare.decision_rounds import decided_group

    items = []
    for case in (best, candidate):
        if case.id not in sources:
            return None, f"{case_variant_label(case)} was measured by an earlier invocation"
        timed_s = min(sources[case.id][1].settings.max_time_s, REPAIR_MAX_TIME_S)
        items.append(remeasured_item(sources[case.id], REPAIR_TAG, timed_s))
    _done, decision, reason = decided_group(items, REPAIR_PARAMS)
    return decision, reason


def repair_prune_reason(run: Run, candidate: CaseResult, best: CaseResult | None) -> str | None:
    """Why repairing `candidate` cannot win (module docstring), or None when it is repaired: no admissible case yet
    or `--no-prune` (`best` None), a P50 no higher than the best's, or not decided slower on paired rounds."""
    if best is None or p50(candidate) <= p50(best):
        return None
    what, than = case_variant_label(candidate), case_variant_label(best)
    decision, why = paired_decision(run.sources, best, candidate)
    if decision is None:
        note(run, "half", f"{what} could not be measured again beside {than} ({why}): repaired")
        return None
    if not decision.slower:
        note(run, "half", f"{what} is not decided slower than {than} on paired rounds: repaired ({decision.summary()})")
        return None
    return (
        f"cannot win: a repair keeps layers in FP32, so it is no faster than {what} itself, decided slower than the "
        f"best within the budget ({than}) on paired rounds: {decision.summary()}; --no-prune repairs it anyway"
    )
