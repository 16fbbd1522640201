"""Which few layers must stay in FP32 for a reduced-precision model to meet an accuracy budget: the seeds' path
(run everything reduced, then bisect to the operators responsible), as pure logic over a scoring callback.

The search, in order: the layers a range pre-pass flagged (outputs beyond FP16's range) are kept from the start;
an operator-type table (one evaluation per type: what keeping every LayerNorm, every Softmax... in FP32 buys);
a segment bisection over the topologically ordered layers (over one type's layers when keeping that type alone
met the budget); then a shrink that drops every kept layer whose removal still meets the budget. Every distinct
keep-set is evaluated once (cached) and the number of evaluations is capped: a budget below the precision's own
noise floor makes a bisection explode, and a capped search says so rather than running for hours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

DEFAULT_MAX_EVALUATIONS = 64


@dataclass(frozen=True)
class Layer:
    """One layer the search may keep in FP32: its name, operator type and position in topological order."""

    name: str
    op_type: str
    position: int


@dataclass(frozen=True)
class Verdict:
    """One evaluation of a keep-set: whether it meets the budget, and the figures behind it (`detail`)."""

    meets: bool
    detail: Any = None


@dataclass(frozen=True)
class TypeRow:
    """What keeping every layer of one operator type in FP32 gives."""

    op_type: str
    layers: int
    verdict: Verdict


@dataclass(frozen=True)
class SearchResult:
    """The layers kept in FP32 (in position order), what they give, and what the search cost."""

    kept: tuple[Layer, ...]
    verdict: Verdict
    _: KW_ONLY  # the rest by keyword
    full: Verdict
    range_kept: tuple[str, ...]
    type_table: tuple[TypeRow, ...]
    evaluations: int
    elapsed_s: float
    capped: bool
    reachable: bool
    notes: tuple[str, ...] = ()


class _Capped(Exception):
    pass


@dataclass
class _Scorer:
    evaluate: Callable[[frozenset[str]], Verdict]
    cap: int
    cache: dict[frozenset[str], Verdict] = field(default_factory=dict)
    best: frozenset[str] | None = None  # the smallest meeting keep-set seen, the answer when capped

    def __call__(self, keep: frozenset[str]) -> Verdict:
        if keep in self.cache:
            return self.cache[keep]
        if len(self.cache) >= self.cap:
            raise _Capped
        verdict = self.evaluate(keep)
        self.cache[keep] = verdict
        if verdict.meets and (self.best is None or len(keep) < len(self.best)):
            self.best = keep
        return verdict

    def meets(self, keep: frozenset[str]) -> bool:
        return self(keep).meets


def _bisect(score: _Scorer, segment: list[str], base: frozenset[str]) -> frozenset[str]:
    """A small subset S of `segment` with base ∪ S meeting the budget, given that base ∪ segment meets it
    (QuickXplain's halving: a half that meets alone is searched alone, else each half given the other)."""
    if score.meets(base):
        return frozenset()
    if len(segment) == 1:
        return frozenset(segment)
    half = len(segment) // 2
    first, second = segment[:half], segment[half:]
    if score.meets(base | frozenset(first)):
        return _bisect(score, first, base)
    if score.meets(base | frozenset(second)):
        return _bisect(score, second, base)
    needed_first = _bisect(score, first, base | frozenset(second))
    return needed_first | _bisect(score, second, base | needed_first)


def _shrink(score: _Scorer, keep: frozenset[str], order: dict[str, int]) -> frozenset[str]:
    """Drop every kept layer whose removal still meets the budget (last layers first)."""
    for name in sorted(keep, key=lambda n: -order.get(n, 0)):
        trial = keep - {name}
        if score.meets(trial):
            keep = trial
    return keep


def _type_table(score: _Scorer, layers: Sequence[Layer], base: frozenset[str]) -> list[TypeRow]:
    by_type: dict[str, list[str]] = {}
    for layer in layers:
        if layer.name not in base:
            by_type.setdefault(layer.op_type, []).append(layer.name)
    rows = []
    for op_type, names in sorted(by_type.items(), key=lambda item: len(item[1])):
        rows.append(TypeRow(op_type, len(names), score(base | frozenset(names))))
    return rows


def find_fallback(
    layers: Sequence[Layer],
    evaluate: Callable[[frozenset[str]], Verdict],
    range_kept: Sequence[str] = (),
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
) -> SearchResult:
    """The layers of `layers` to keep in FP32 so that `evaluate(keep)` meets the budget (see the module
    docstring). `evaluate` gets the names kept in FP32; `range_kept` are kept from the start (range pre-pass).
    At most `max_evaluations` distinct keep-sets are evaluated; past that the result is `capped`."""
    start = time.perf_counter()
    score = _Scorer(evaluate, max(2, max_evaluations))
    order = {layer.name: layer.position for layer in layers}
    base = frozenset(name for name in range_kept if name in order)
    everything = frozenset(order)
    notes: list[str] = []
    full = score(frozenset())
    table: list[TypeRow] = []
    kept, capped, reachable = frozenset[str](), False, True
    try:
        if not full.meets:
            if not score.meets(everything):
                reachable = False
                notes.append("even with every layer in FP32 the budget is missed: no fallback can meet it")
            elif score.meets(base):
                kept = _shrink(score, base, order)
            else:
                table = _type_table(score, layers, base)
                met = [row for row in table if row.verdict.meets]
                # One type that meets alone narrows the bisection to its layers (the table's smallest such type).
                pool = everything - base
                if met:
                    types = {layer.name: layer.op_type for layer in layers}
                    pool = frozenset(name for name in pool if types[name] == met[0].op_type)
                segment = sorted(pool, key=order.__getitem__)
                kept = _shrink(score, base | _bisect(score, segment, base), order)
    except _Capped:
        capped = True
        kept = score.best if score.best is not None else everything
        notes.append(
            f"capped: the search stopped at {score.cap} evaluations; the smallest keep-set that met the budget so "
            "far is reported (the budget may sit below the precision's own noise: loosen it)"
        )
    verdict = score.cache.get(kept) or full
    chosen = tuple(sorted((la for la in layers if la.name in kept), key=lambda la: la.position))
    return SearchResult(
        chosen,
        verdict,
        full=full,
        range_kept=tuple(sorted(base, key=order.__getitem__)),
        type_table=tuple(table),
        evaluations=len(score.cache),
        elapsed_s=time.perf_counter() - start,
        capped=capped,
        reachable=reachable,
        notes=tuple(notes),
    )
