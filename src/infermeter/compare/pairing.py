"""Which case of one results file is which case of the other, for `compare`: by case id first, then by the
controlled variables where they are unique on both sides, then (one model on each side, a different one) by the
variables without the model; each pair says how it was made."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from infermeter.results.schema import CaseResult


def _variables(case: CaseResult) -> tuple[object, ...]:
    return (case.model, case.backend, case.precision, case.batch, case.shape_mode, case.threads)


def _variables_but_model(case: CaseResult) -> tuple[object, ...]:
    return _variables(case)[1:]


def _pair_unique(
    left_base: list[CaseResult],
    left_new: list[CaseResult],
    key: Callable[[CaseResult], tuple[object, ...]],
    how: str,
    pairs: list[tuple[CaseResult, CaseResult, str]],
) -> tuple[list[CaseResult], list[CaseResult]]:
    """Pair the leftovers whose `key` is unique on both sides (appended to `pairs` as `how`); returns the rest."""
    keys_base, keys_new = [key(c) for c in left_base], [key(c) for c in left_new]
    still_base, taken = [], set()
    for case, k in zip(left_base, keys_base, strict=True):
        if keys_base.count(k) == 1 and keys_new.count(k) == 1:
            index = keys_new.index(k)
            pairs.append((case, left_new[index], how))
            taken.add(index)
        else:
            still_base.append(case)
    return still_base, [c for i, c in enumerate(left_new) if i not in taken]


def pair_cases(
    base: Sequence[CaseResult], new: Sequence[CaseResult]
) -> tuple[list[tuple[CaseResult, CaseResult, str]], list[CaseResult], list[CaseResult]]:
    """Pairs by case id (the id encodes every controlled variable and option); then the leftovers by (model,
    backend, precision, batch, shape mode, threads) where that key is unique on both sides; then, when each side
    has one model and they differ (a model changed between the runs), by the same key without the model. Returns
    (pairs with how they were paired: "id", "variables" or "model", unpaired base cases, unpaired new cases)."""
    new_by_id = {c.id: c for c in new}
    pairs: list[tuple[CaseResult, CaseResult, str]] = []
    left_base = []
    used: set[str] = set()
    for case in base:
        match = new_by_id.get(case.id)
        if match is not None and case.id not in used:
            pairs.append((case, match, "id"))
            used.add(case.id)
        else:
            left_base.append(case)
    left_new = [c for c in new if c.id not in used]
    left_base, left_new = _pair_unique(left_base, left_new, _variables, "variables", pairs)
    models_base, models_new = {c.model for c in base}, {c.model for c in new}
    if len(models_base) == 1 and len(models_new) == 1 and models_base != models_new:
        left_base, left_new = _pair_unique(left_base, left_new, _variables_but_model, "model", pairs)
    return pairs, left_base, left_new


def pairing_note(base: CaseResult, new: CaseResult, how: str) -> str | None:
    """Why a pair was not matched by case id, or None when it was."""
    if how == "variables":
        return "paired by controlled variables: backend options or input shapes differ between the runs"
    if how == "model":
        return f"model changed, was {base.model}"
    return None
