"""The limits a case must meet (`advise --max-p99-ms ...`): each one a check on a metric of the registry, the
violations of a case, and, when no case meets them all, the constraints that bind (closest first)."""

from __future__ import annotations

from dataclasses import dataclass

from infermeter.figures.metric_registry import Metric, metric
from infermeter.report.summary import case_label
from infermeter.results.records import Accuracy, read_record
from infermeter.results.schema import CaseResult


@dataclass(frozen=True)
class Constraints:
    """Limits a case must meet; None means no limit. `max_accuracy_drop_pct` reads the case's `Accuracy` record."""

    max_p99_ms: float | None = None
    max_memory_mb: float | None = None
    max_load_s: float | None = None
    min_throughput: float | None = None
    max_accuracy_drop_pct: float | None = None


@dataclass(frozen=True)
class Check:
    """A constraint flag on one metric of the registry (its name, unit and better direction say how it is judged:
    a lower-is-better metric has an upper limit)."""

    flag: str
    attribute: str
    metric: Metric

    @property
    def what(self) -> str:
        return self.metric.name

    @property
    def unit(self) -> str:
        return self.metric.suffix

    @property
    def upper(self) -> bool:
        """True: the value must be <= the limit; False: >= the limit."""
        return self.metric.better == "lower"

    def value(self, case: CaseResult) -> float | None:
        return self.metric.value(case)


def accuracy_drop(case: CaseResult) -> float | None:
    """The accuracy drop (points) recorded on a case, or None when it carries no accuracy measurement."""
    accuracy = read_record(case, Accuracy)
    return None if accuracy is None else accuracy.drop_pct


# Not a table metric (the table has a parity column instead), so not in the registry: declared here the same way.
_ACCURACY_DROP = Metric(
    "accuracy_drop_pct", "accuracy drop", header="accuracy drop", unit="%", better="lower", read=accuracy_drop
)
CHECKS = (
    Check("--max-p99-ms", "max_p99_ms", metric("p99_ms")),
    Check("--max-memory-mb", "max_memory_mb", metric("peak_rss_mb")),
    Check("--max-load-s", "max_load_s", metric("load_s")),
    Check("--min-throughput", "min_throughput", metric("throughput")),
    Check("--max-accuracy-drop", "max_accuracy_drop_pct", _ACCURACY_DROP),
)


@dataclass(frozen=True)
class Binding:
    """A constraint that keeps every case out: the best value a case reaches against the limit."""

    flag: str
    limit: float
    best_value: float
    best_case: CaseResult
    gap_pct: float  # how far the best case is off the limit, in percent of the limit
    alone: bool  # True when relaxing this constraint alone would admit a case

    @property
    def message(self) -> str:
        """One sentence naming the constraint and the distance."""
        check = next(c for c in CHECKS if c.flag == self.flag)
        scope = "the best case that meets every other constraint" if self.alone else "the best case"
        direction = "over" if check.upper else "under"
        return (
            f"{self.flag} {self.limit:g} is binding: {scope}, {case_label(self.best_case)}, has {check.what} "
            f"{self.best_value:,.4g}{check.unit} ({self.gap_pct:.0f}% {direction} the limit)"
        )


def violations(case: CaseResult, constraints: Constraints) -> list[tuple[Check, float | None, float]]:
    """(check, value, limit) of every constraint `case` breaks; value None: the metric was not measured."""
    out: list[tuple[Check, float | None, float]] = []
    for check in CHECKS:
        limit = getattr(constraints, check.attribute)
        if limit is None:
            continue
        value = check.value(case)
        if value is None:
            if check.attribute != "max_accuracy_drop_pct":  # no accuracy data: not excluded, flagged as unverified
                out.append((check, None, limit))
        elif (value > limit) if check.upper else (value < limit):
            out.append((check, value, limit))
    return out


def violation_text(check: Check, value: float | None, limit: float) -> str:
    """Why a violation excludes the case, with how far off the limit it is."""
    if value is None:
        return f"{check.what} was not measured, so {check.flag} {limit:g} cannot be verified"
    ratio = value / limit if limit else float("inf")
    how = f"{ratio:.1f}x the limit" if check.upper else f"{value / limit:.0%} of the minimum" if limit else ""
    return f"its {check.what} {value:,.4g}{check.unit} breaks {check.flag} {limit:g} ({how})"


def binding_constraints(eligible: list[CaseResult], constraints: Constraints) -> list[Binding]:
    """The constraints that keep every eligible case out, those that alone do first, then the closest."""
    active = [c for c in CHECKS if getattr(constraints, c.attribute) is not None]
    found: list[Binding] = []
    for check in active:
        limit = float(getattr(constraints, check.attribute))
        others = Constraints(**{**constraints.__dict__, check.attribute: None})
        pool = [c for c in eligible if not violations(c, others) and check.value(c) is not None]
        alone = bool(pool)
        if not pool:
            pool = [c for c in eligible if check.value(c) is not None]
        if not pool:
            continue
        best = (min if check.upper else max)(pool, key=lambda c: check.value(c) or 0.0)
        value = check.value(best)
        assert value is not None
        if (value <= limit) if check.upper else (value >= limit):
            continue  # this constraint is met by its best case: not what keeps cases out
        gap = abs(value - limit) / limit * 100 if limit else float("inf")
        found.append(Binding(check.flag, limit, value, best, gap, alone))
    return sorted(found, key=lambda b: (not b.alone, b.gap_pct))
