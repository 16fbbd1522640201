"""The plotly figures of the HTML report, one function per chart. Pure: cases in, figures out.

A chart whose data is absent (no ok case, no roofline fields) is not drawn at all, never drawn empty.
plotly is imported lazily so that `import infermeter` stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.report.merged import MergedReport, parity_cell
from infermeter.report.pareto import pareto_front
from infermeter.report.summary import backend_labels
from infermeter.results.records import Roofline, ServingLevel, read_record
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Above this many samples a case's distribution is drawn from this many evenly spaced quantiles: the box is the
# same, and the page stays small however long the run was.
MAX_PLOTTED_SAMPLES = 2000
# Peak keys of extra["peak"] drawn as compute ceilings, with their labels.
COMPUTE_PEAKS = (("fp32_gflops", "fp32 peak"), ("bf16_gflops", "bf16 peak"), ("int8_gops", "int8 peak"))


@dataclass(frozen=True)
class Chart:
    """One figure of the report: `key` is its stable HTML id, `title` its heading."""

    key: str
    title: str
    figure: go.Figure
    caption: str = ""


def case_labels(report: MergedReport) -> list[str]:
    """Short unique labels of the cases: what varies (model only when several; a backend's options when its
    configurations differ, as the tables show them), `[file N]` for later files."""
    models = {c.model for c in report.cases}
    backends = backend_labels(report.cases)  # with the options that tell one backend's configurations apart
    labels = []
    for case, source in zip(report.cases, report.sources, strict=True):
        parts = [case.model] if len(models) > 1 else []
        parts += [backends[case.id], case.precision, f"b{case.batch}"]
        if case.shape_mode != "static":
            parts.append(case.shape_mode)
        label = " ".join(parts)
        if report.multi and source != report.files[0].name:
            label += f" [file {[f.name for f in report.files].index(source) + 1}]"
        labels.append(label)
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return unique


def _layout(fig: go.Figure, x_title: str, y_title: str, **extra: Any) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        margin={"l": 60, "r": 20, "t": 30, "b": 60},
        height=420,
        xaxis_title=x_title,
        yaxis_title=y_title,
        legend={"orientation": "h", "y": -0.25},
        **extra,
    )
    return fig


def _needs_log_axis(values: Sequence[float]) -> bool:
    """A log axis when values span more than 20x: on a linear one the small cases (or a case's body under its
    tail) flatten to an invisible line."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) / min(positive) > 20


def _plotted_samples(samples: Sequence[float]) -> list[float]:
    values = np.asarray(samples, dtype=np.float64)
    if len(values) > MAX_PLOTTED_SAMPLES:
        values = np.quantile(values, np.linspace(0, 1, MAX_PLOTTED_SAMPLES))
    return [round(float(v), 6) for v in values]


def latency_distribution(cases: Sequence[CaseResult], labels: Sequence[str]) -> Chart | None:
    """Box plot of the raw steady-state samples of each ok case."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for case, label in zip(cases, labels, strict=True):
        if case.ok and case.timing.samples_ms:
            fig.add_trace(go.Box(y=_plotted_samples(case.timing.samples_ms), name=label, boxpoints="outliers"))
    if not fig.data:
        return None
    samples = [s for c in cases if c.ok for s in c.timing.samples_ms]
    log = _needs_log_axis(samples)
    _layout(fig, "", "latency (ms)" + (", log scale" if log else ""), showlegend=False)
    if log:
        fig.update_yaxes(type="log")
    return Chart("latency-distribution", "Latency distribution per case", fig, "Raw steady-state samples.")


def percentile_bars(cases: Sequence[CaseResult], labels: Sequence[str]) -> Chart | None:
    """P50 and P99 per ok case, with their 95% confidence intervals as error bars."""
    import plotly.graph_objects as go

    ok = [(c, label) for c, label in zip(cases, labels, strict=True) if c.ok and c.latency_ms]
    if not ok:
        return None
    fig = go.Figure()
    for name, key, ci in (("P50", "p50", "p50_ci95"), ("P99", "p99", "p99_ci95")):
        values = [getattr(c.latency_ms, key) for c, _ in ok]
        low = [v - getattr(c.latency_ms, ci)[0] for v, (c, _) in zip(values, ok, strict=True)]
        high = [getattr(c.latency_ms, ci)[1] - v for v, (c, _) in zip(values, ok, strict=True)]
        fig.add_trace(
            go.Bar(
                x=[label for _, label in ok],
                y=values,
                name=name,
                error_y={"type": "data", "array": high, "arrayminus": low, "visible": True},
            )
        )
    log = _needs_log_axis([getattr(c.latency_ms, k) for c, _ in ok for k in ("p50", "p99")])
    _layout(fig, "", "latency (ms)" + (", log scale" if log else ""), barmode="group")
    if log:
        fig.update_yaxes(type="log")
    return Chart("percentiles", "P50 and P99 latency", fig, "Error bars: 95% confidence intervals.")


def throughput_vs_batch(report: MergedReport) -> Chart | None:
    """Throughput (inferences/s) against batch size, one line per (model, backend, precision, shape, file)."""
    import plotly.graph_objects as go

    series: dict[str, list[tuple[int, float]]] = {}
    for case, source in zip(report.cases, report.sources, strict=True):
        # A serving-sweep level has its own charts (report.serving): its x is the concurrency, not the batch.
        if case.ok and case.timing.throughput is not None and read_record(case, ServingLevel) is None:
            name = f"{case.backend} {case.precision} {case.shape_mode}"
            if len({c.model for c in report.cases}) > 1:
                name = f"{case.model} {name}"
            if report.multi and source != report.files[0].name:
                name += f" [file {[f.name for f in report.files].index(source) + 1}]"
            series.setdefault(name, []).append((case.batch, case.timing.throughput))
    if not series:
        return None
    fig = go.Figure()
    for name, points in series.items():
        points.sort()
        fig.add_trace(go.Scatter(x=[b for b, _ in points], y=[t for _, t in points], mode="lines+markers", name=name))
    _layout(fig, "batch size", "throughput (inferences/s)")
    fig.update_xaxes(type="log", tickvals=sorted({b for pts in series.values() for b, _ in pts}))
    return Chart("throughput-batch", "Throughput vs batch size", fig)


def latency_throughput(cases: Sequence[CaseResult], labels: Sequence[str]) -> Chart | None:
    """P50 latency against throughput; the Pareto front (no case is both faster and higher-throughput) marked.
    Cases whose outputs failed the parity check are drawn as crosses and kept off the front."""
    import plotly.graph_objects as go

    ok = [(c, label) for c, label in zip(cases, labels, strict=True) if c.ok and c.latency_ms and c.timing.throughput]
    if not ok:
        return None
    trusted = [(c, label) for c, label in ok if parity_cell(c) != "FAIL"]
    failed = [(c, label) for c, label in ok if parity_cell(c) == "FAIL"]
    fig = go.Figure()
    for members, name, marker in (
        (trusted, "cases", {"size": 10, "color": "#8c96a8"}),
        (failed, "parity failed", {"size": 11, "color": "#b42318", "symbol": "x"}),
    ):
        if members:
            fig.add_trace(
                go.Scatter(
                    x=[_p50(c) for c, _ in members],
                    y=[c.timing.throughput for c, _ in members],
                    mode="markers+text",
                    text=[label for _, label in members],
                    textposition="top center",
                    name=name,
                    marker=marker,
                )
            )
    points = [(_p50(c), c.timing.throughput or 0.0) for c, _ in trusted]
    ordered = sorted(pareto_front(points, maximize=(False, True)), key=lambda i: points[i][0])
    if ordered:
        fig.add_trace(
            go.Scatter(
                x=[points[i][0] for i in ordered],
                y=[points[i][1] for i in ordered],
                mode="lines+markers",
                name="Pareto front",
                line={"dash": "dot", "color": "#d62728"},
                marker={"size": 14, "symbol": "star", "color": "#d62728"},
            )
        )
    _layout(fig, "P50 latency (ms), log scale", "throughput (inferences/s)")
    fig.update_xaxes(type="log")
    return Chart(
        "pareto",
        "Latency vs throughput",
        fig,
        "Stars: the Pareto front, the cases that no other case beats on both P50 latency and throughput "
        "(cases that failed the parity check are crosses and never on it).",
    )


def _p50(case: CaseResult) -> float:
    return case.latency_ms.p50 if case.latency_ms is not None else float("inf")


def memory_and_load(cases: Sequence[CaseResult], labels: Sequence[str]) -> Chart | None:
    """Peak memory (MB) and load time (s) per case, side by side."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = [
        (c, label)
        for c, label in zip(cases, labels, strict=True)
        if c.memory.peak_rss_mb is not None or c.loading.load_s
    ]
    if not rows:
        return None
    fig = make_subplots(rows=1, cols=2, subplot_titles=("peak memory (MB)", "load time (s)"))
    names = [label for _, label in rows]
    fig.add_trace(
        go.Bar(x=names, y=[c.memory.peak_rss_mb for c, _ in rows], name="peak RSS", marker_color="#1f77b4"), 1, 1
    )
    fig.add_trace(
        go.Bar(
            x=names, y=[c.memory.rss_before_load_mb for c, _ in rows], name="RSS before load", marker_color="#aec7e8"
        ),
        1,
        1,
    )
    fig.add_trace(go.Bar(x=names, y=[c.loading.load_s for c, _ in rows], name="load", marker_color="#ff7f0e"), 1, 2)
    _layout(fig, "", "", barmode="group")
    return Chart("memory-load", "Peak memory and load time", fig, "Memory is the whole worker process (RSS).")


def _roofline_points(cases: Sequence[CaseResult], labels: Sequence[str]) -> list[tuple[float, float, str]]:
    points = []
    for case, label in zip(cases, labels, strict=True):
        roofline = read_record(case, Roofline)
        if case.ok and roofline is not None and roofline.arithmetic_intensity > 0 and roofline.achieved_gflops > 0:
            points.append((float(roofline.arithmetic_intensity), float(roofline.achieved_gflops), label))
    return points


def roofline(report: MergedReport, labels: Sequence[str]) -> Chart | None:
    """Arithmetic intensity (FLOP/byte) against achieved GFLOP/s on log axes, under the compute ceilings and the
    bandwidth slope of `extra["peak"]`. None unless some case carries both fields."""
    import plotly.graph_objects as go

    points = _roofline_points(report.cases, labels)
    if not points:
        return None
    fig = go.Figure()
    peak = report.peak or {}
    bandwidth = peak.get("bandwidth_gbs")
    xs = [p[0] for p in points]
    x_low, x_high = min(xs) / 4, max(xs) * 4
    for key, _ in COMPUTE_PEAKS:
        compute = peak.get(key)
        if not compute:
            continue
        x_low = min(x_low, compute / bandwidth / 4) if bandwidth else x_low
        x_high = max(x_high, compute / bandwidth * 4) if bandwidth else x_high
    grid = list(np.geomspace(x_low, x_high, 64))
    for key, name in COMPUTE_PEAKS:
        compute = peak.get(key)
        if not compute:
            continue
        roof = [min(compute, x * bandwidth) if bandwidth else compute for x in grid]
        fig.add_trace(go.Scatter(x=grid, y=roof, mode="lines", name=f"{name} {compute:,.0f} G/s", line={"width": 2}))
    if bandwidth and not any(peak.get(k) for k, _ in COMPUTE_PEAKS):
        fig.add_trace(go.Scatter(x=grid, y=[x * bandwidth for x in grid], mode="lines", name="bandwidth"))
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[p[1] for p in points],
            mode="markers+text",
            text=[p[2] for p in points],
            textposition="top center",
            name="cases",
            marker={"size": 11, "color": "#2ca02c"},
        )
    )
    _layout(fig, "arithmetic intensity (FLOP/byte)", "achieved GFLOP/s")
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    caption = (
        f"Ceilings from the measured peaks (memory bandwidth {bandwidth:,.1f} GB/s)."
        if bandwidth
        else "No peak figures in the results file: cases only, no ceilings."
    )
    return Chart("roofline", "Roofline", fig, caption)
