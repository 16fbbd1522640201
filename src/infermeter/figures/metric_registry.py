"""The metric registry: every figure of the summary table declared once, with everything each output needs.

A `Metric` says how to read the figure from a case (`read`), how the table shows it (`header`, `cell`), its unit,
which direction is better, its CSV column and, when `infermeter compare` can gate on it, its `--metric` name. The
console, markdown and HTML tables (`report.summary.summary_table`), the CSV report (`report.csv`),
`Results.rows()` / `to_pandas()` (`view`), the history database (`history.store`), `compare` and `advise`
all walk `METRICS`, so a metric added here shows everywhere; `tests/report/test_metric_registry.py` checks that
every output shows every metric. How to add one: docs/design-notes.md, "Adding a table metric".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Literal

from infermeter.figures.latency_stats import min_samples_for
from infermeter.figures.number_format import format_number
from infermeter.results.records import Roofline, SoakRecord, read_record
from infermeter.results.schema import CaseResult, PairedSpeedup


@dataclass(frozen=True)
class Speedup:
    """A case's speedup over its group's baseline: `ratio` (baseline P50 / case P50, or the paired geometric mean
    when the group ran interleaved), `mark` (empty; "mixed" across precisions; "precision", "parity" or
    "interference" or "storage" when refused, ratio None) and the paired interval when there is one."""

    ratio: float | None
    mark: str = ""
    paired: PairedSpeedup | None = None


def format_ms(value: float | None) -> str:
    """Milliseconds with three significant digits at least (0.0123, 1.23, 123)."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value:.4f}"
    if value < 100:
        return f"{value:.2f}"
    return f"{value:,.0f}"


def speedup_cell(speedup: Speedup | None) -> str:
    """`2.71x [2.64–2.78]` (paired), `no diff [0.98–1.03]` when the interval holds 1.0, `1.52x` (unpaired),
    `n/a†`/`n/a‡`/`n/a§` when refused, `—` when there is nothing to compare."""
    if speedup is None:
        return "—"
    refused = {"precision": "n/a†", "parity": "n/a‡", "interference": "n/a§", "storage": "n/a¶"}
    if speedup.mark in refused:
        return refused[speedup.mark]
    assert speedup.ratio is not None
    star = "*" if speedup.mark == "mixed" else ""
    paired = speedup.paired
    if paired is None:
        return f"{speedup.ratio:.2f}x{star}"
    interval = f"[{paired.ci_low:.2f}–{paired.ci_high:.2f}]"
    return f"no diff{star} {interval}" if paired.no_difference else f"{paired.ratio:.2f}x{star} {interval}"


def p50_cell(case: CaseResult, _: Speedup | None = None) -> str:
    """P50, with its interval's half-width (`483 ±6%`) when that is wider than the case's --target-ci: the stop
    rule ran out of --max-time before the median was known as precisely as asked."""
    stats = case.latency_ms
    assert stats is not None
    low, high = stats.p50_ci95
    halfwidth = max(stats.p50 - low, high - stats.p50) / stats.p50 if stats.p50 > 0 else 0.0
    if case.timing.target_ci is None or halfwidth <= case.timing.target_ci:
        return format_ms(stats.p50)
    # One decimal below 10%, so that a 1.4% interval against a 1% target does not read "±1%".
    width = f"{halfwidth:.0%}" if halfwidth >= 0.1 else f"{halfwidth:.1%}"
    return f"{format_ms(stats.p50)} ±{width}"


def p99_cell(case: CaseResult, _: Speedup | None = None) -> str:
    """P99, prefixed `~` when fewer than the samples a sound P99 needs stand behind it (see stats.min_samples_for)."""
    stats = case.latency_ms
    assert stats is not None
    sound = stats.count >= min_samples_for(99)
    return format_ms(stats.p99) if sound else f"~{format_ms(stats.p99)}"


def _roofline_cell(name: str, spec: str) -> Callable[[CaseResult, Speedup | None], str]:
    """Achieved GFLOP/s or the fraction of this machine's ceiling (`bench` adds them from `infermeter peak`); "—"
    when not annotated (--no-roofline, a synthetic case, FLOPs not countable), "≥" before lower bounds (some of
    the graph's nodes uncounted: nodes without shapes count 0)."""

    def cell(case: CaseResult, _: Speedup | None) -> str:
        roofline = read_record(case, Roofline)
        value = None if roofline is None else getattr(roofline, name)
        if roofline is None or value is None:
            return "—"
        return f"{'≥' if roofline.uncounted_nodes else ''}{value:{spec}}"

    return cell


def _roofline(name: str) -> Callable[[CaseResult], float | None]:
    def read(case: CaseResult) -> float | None:
        roofline = read_record(case, Roofline)
        return None if roofline is None else getattr(roofline, name)

    return read


def _soak_slope(case: CaseResult) -> float | None:
    soak = read_record(case, SoakRecord)
    return None if soak is None else soak.slope_mb_per_1k


def _always(cases: Sequence[CaseResult]) -> bool:
    return True


def _any_soak(cases: Sequence[CaseResult]) -> bool:
    return any(read_record(case, SoakRecord) is not None for case in cases)


@dataclass(frozen=True)
class Metric:
    """One table metric. `key` names it in `Results.rows()`/pandas and in the history database (unit in the
    name); `name` is how sentences call it (`advise`); `header` its table column; `read` the value of one case
    (None when not measured), or None itself for a figure relative to the case's comparison group (speedup:
    shown in the tables and rows, never stored, since it changes with the cases beside it); `spec` the format of
    its table cell, or `cell` the cell's own text for an ok case (its speedup passed along) where a format spec
    is not enough; `csv` its column in the CSV report; `gate` the
    `compare --metric` name when a regression of it can fail a gate; `shown` whether the tables have the column
    for these cases (a soak figure only where a case soaked)."""

    key: str
    name: str
    _: KW_ONLY  # the rest by keyword
    header: str
    unit: str
    better: Literal["lower", "higher"]
    read: Callable[[CaseResult], float | None] | None
    spec: str = ",.2f"
    cell: Callable[[CaseResult, Speedup | None], str] | None = None
    csv: str | None = None
    gate: str | None = None
    shown: Callable[[Sequence[CaseResult]], bool] = _always

    @property
    def relative(self) -> bool:
        """True for a figure relative to the case's group (no `read`, no CSV column, not in history)."""
        return self.read is None

    def text(self, case: CaseResult, speedup: Speedup | None = None) -> str:
        """The table cell of an ok case ("—" when not measured)."""
        return self.cell(case, speedup) if self.cell is not None else format_number(self.value(case), self.spec)

    def value(self, case: CaseResult) -> float | None:
        """The case's figure (None when not measured, and always for a relative metric)."""
        return None if self.read is None else self.read(case)

    @property
    def suffix(self) -> str:
        """The unit as written after a number: `/s` and `%` close up, others after a space (` ms`)."""
        return self.unit if self.unit[:1] in "/%" else f" {self.unit}"


def _latency(name: str) -> Callable[[CaseResult], float | None]:
    return lambda case: None if case.latency_ms is None else getattr(case.latency_ms, name)


def _throughput(case: CaseResult) -> float | None:
    return case.timing.throughput


def _peak_rss(case: CaseResult) -> float | None:
    return case.memory.peak_rss_mb


def _load(case: CaseResult) -> float | None:
    return case.loading.load_s


# The summary table's metric columns, in table order (each after the case's model, backend, precision, batch, shape
# and streams). A new metric: one entry here (and the record field it reads); see docs/design-notes.md.
METRICS: tuple[Metric, ...] = (
    Metric(
        "p50_ms",
        "P50",
        header="P50 ms",
        unit="ms",
        better="lower",
        read=_latency("p50"),
        cell=p50_cell,
        csv="latency_ms.p50",
        gate="p50",
    ),
    Metric(
        "p99_ms",
        "P99",
        header="P99 ms",
        unit="ms",
        better="lower",
        read=_latency("p99"),
        cell=p99_cell,
        csv="latency_ms.p99",
        gate="p99",
    ),
    Metric(
        "throughput",
        "throughput",
        header="throughput/s",
        unit="/s",
        better="higher",
        read=_throughput,
        spec=",.1f",
        csv="throughput",
        gate="throughput",
    ),
    Metric(
        "peak_rss_mb",
        "peak memory",
        header="peak MB",
        unit="MB",
        better="lower",
        read=_peak_rss,
        spec=",.0f",
        csv="peak_rss_mb",
    ),
    Metric("load_s", "load time", header="load s", unit="s", better="lower", read=_load, spec=",.2f", csv="load_s"),
    Metric(
        "speedup",
        "speedup",
        header="speedup",
        unit="x",
        better="higher",
        read=None,
        cell=lambda _, speedup: speedup_cell(speedup),
    ),
    Metric(
        "achieved_gflops",
        "achieved GFLOP/s",
        header="GFLOP/s",
        unit="GFLOP/s",
        better="higher",
        read=_roofline("achieved_gflops"),
        cell=_roofline_cell("achieved_gflops", ",.1f"),
        csv="achieved_gflops",
    ),
    Metric(
        "peak_fraction",
        "fraction of peak",
        header="% peak",
        unit="%",
        better="higher",
        read=_roofline("peak_fraction"),
        cell=_roofline_cell("peak_fraction", ".0%"),
        csv="peak_fraction",
    ),
    Metric(
        "growth_mb_per_1k",
        "memory growth",
        header="growth MB/1k req",
        unit="MB/1k req",
        better="lower",
        read=_soak_slope,
        spec="+.2f",
        csv="soak.slope_mb_per_1k",
        shown=_any_soak,
    ),
)

# Right-aligned by every renderer (console, markdown, HTML).
NUMERIC_COLUMNS = frozenset({"batch", *(metric.header for metric in METRICS)})


def metric(key: str) -> Metric:
    """The registry's metric of this key; KeyError naming the known keys for an unknown one."""
    for candidate in METRICS:
        if candidate.key == key:
            return candidate
    raise KeyError(f"no table metric {key!r}: one of {', '.join(m.key for m in METRICS)}")


def gate_metric(gate: str) -> Metric:
    """The metric behind a `compare --metric` name (p50, p99, throughput)."""
    return next(m for m in METRICS if m.gate == gate)


GATES = tuple(m.gate for m in METRICS if m.gate is not None)
STORED = tuple(m for m in METRICS if not m.relative)  # the figures of one case: CSV, history


def values_of(case: CaseResult) -> dict[str, float | None]:
    """Every stored metric of one case by key (None where not measured)."""
    return {m.key: m.value(case) for m in STORED}
