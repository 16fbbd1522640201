"""The soak's report, pure: a table (slope with its interval, plateau, peak, latency at the start and end of the
soak), the remedies for growing cases (the variant that stayed flat in this very run), and the memory-over-time
chart, one line per case."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from infermeter.figures.metric_registry import metric
from infermeter.report.summary import SummaryTable, backend_labels
from infermeter.results.records import SoakRecord, read_record
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:
    from infermeter.report.charts import Chart

SOAK_COLUMNS = (
    "case",
    "status",
    "requests",
    "MB/1k req",
    "95% CI",
    "plateau at",
    "start MB",
    "peak MB",
    "end MB",
    "P50 ms first→last",
    "P99 ms first→last",
)


def soak_cases(cases: Sequence[CaseResult]) -> list[tuple[CaseResult, SoakRecord | None]]:
    """The soak cases (those with a soak record, and failed, crashed or oom cases of a soak run) and records."""
    found = [(case, read_record(case, SoakRecord)) for case in cases]
    if not any(record is not None for _, record in found):
        return []
    return [(case, record) for case, record in found if record is not None or not case.ok]


def soak_labels(cases: Sequence[CaseResult]) -> dict[str, str]:
    """Each soak case's label: its backend (with the options and allocator that tell variants apart), `buckets`
    when its sizes were padded, and its size range when the cases' ranges differ."""
    base = backend_labels(cases)
    records = {case.id: read_record(case, SoakRecord) for case in cases}
    ranges = {str(r.size_range) for r in records.values() if r is not None}
    batches = {case.batch for case in cases}
    labels = {}
    for case in cases:
        record = records[case.id]
        label = base[case.id] + (f" b{case.batch}" if len(batches) > 1 else "")
        allocator = case.options.get("allocator")
        if allocator and f"allocator={allocator}" not in label:  # shown even when every case shares it
            label += f" allocator={allocator}"
        if record is not None and record.buckets:
            label += " buckets"
        if record is not None and record.recycle_after:
            label += f" recycle={record.recycle_after}"
        if record is not None and len(ranges) > 1:
            label += " " + ",".join(f"{d}={lo}..{hi}" for d, (lo, hi) in record.size_range.items())
        labels[case.id] = label
    return labels


def _drift(windows: list[list[float]], column: int) -> str:
    if not windows:
        return "—"
    return f"{windows[0][column]:.2f}→{windows[-1][column]:.2f}"


def soak_table(cases: Sequence[CaseResult]) -> SummaryTable | None:
    """The soak table, None when no case soaked."""
    found = soak_cases(cases)
    if not found:
        return None
    labels = soak_labels([case for case, _ in found])
    rows = []
    for case, record in found:
        if record is None:
            peak = f"{case.memory.peak_rss_mb:.0f}" if case.memory.peak_rss_mb else "—"
            rows.append([labels[case.id], case.status, "—", "—", "—", "—", "—", peak, "—", "—", "—"])
            continue
        ci = record.slope_ci_mb_per_1k
        slope = metric("growth_mb_per_1k").text(case)  # as the summary table's column writes it
        status = "growing" if record.growing else case.status
        rows.append([
            labels[case.id],
            status,
            f"{record.requests:,}",
            slope,
            "—" if ci is None else f"{ci[0]:+.2f}..{ci[1]:+.2f}",
            "none" if record.plateau_at is None else f"{record.plateau_at:,}",
            f"{record.start_rss_mb:.0f}",
            f"{record.peak_rss_mb:.0f}",
            f"{record.end_rss_mb:.0f}",
            _drift(record.windows, 2),
            _drift(record.windows, 3),
        ])  # fmt: skip
    return SummaryTable(SOAK_COLUMNS, rows)


def soak_remedies(cases: Sequence[CaseResult]) -> list[str]:
    """For each growing case, the variant of the same backend and model that stayed flat in this run (the
    flattest), named as the remedy; else the generic remedies of the `memory_growing` warning."""
    found = [(case, record) for case, record in soak_cases(cases) if record is not None]
    labels = soak_labels([case for case, _ in found])
    lines = []
    for case, record in found:
        if not record.growing:
            continue
        flat = [
            (abs(other.slope_mb_per_1k or 0.0), labels[peer.id])
            for peer, other in found
            if (peer.backend, peer.model, peer.batch) == (case.backend, case.model, case.batch) and not other.growing
        ]
        if flat:
            lines.append(f"{labels[case.id]}: memory still growing; in this run {min(flat)[1]} stayed flat")
        else:
            lines.append(f"{labels[case.id]}: memory still growing, and no variant of it stayed flat in this run")
    return lines


def soak_chart(cases: Sequence[CaseResult]) -> Chart | None:
    """RSS against requests, one line per soak case; the replay's start marked on each line."""
    import plotly.graph_objects as go

    from infermeter.report.charts import Chart, _layout

    found = [(case, record) for case, record in soak_cases(cases) if record is not None]
    if not found:
        return None
    labels = soak_labels([case for case, _ in found])
    fig = go.Figure()
    for case, record in found:
        requests = [row[0] for row in record.samples]
        fig.add_trace(go.Scatter(x=requests, y=[row[2] for row in record.samples], mode="lines", name=labels[case.id]))
    _layout(fig, "requests", "resident memory (MB)")
    caption = (
        "Resident memory of each case's worker over the soak. Phases: warm-up, exploration (every size seen once), "
        "then a replay of the same sequence; the growth slope is fitted over the replay only."
    )
    return Chart("soak-memory", "Memory over a soak", fig, caption)
