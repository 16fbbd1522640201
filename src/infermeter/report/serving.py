"""The serving sweep's report, pure: a table per sweep (one row per level), the verdict lines (knee, max level
under the SLO), and the charts: output tokens/s against the level, TTFT and TPOT P50/P99 against the level
with the SLO drawn, and the server's own metrics against time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from infermeter.llm.serving_verdict import LevelPoint, SweepVerdict, fmt_level, verdicts
from infermeter.llm.short_outputs import STATUS
from infermeter.results.records import Distribution, ServerMetrics, read_record
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:
    from infermeter.report.charts import Chart

SERVING_COLUMNS = (
    "level",
    "status",
    "out tok/s",
    "req/s",
    "TTFT P50/P90/P99 ms",
    "TPOT P50/P90/P99 ms",
    "E2E P50 ms",
    "SLO met",
    "goodput req/s",
    "lag P99 ms",
)


def _dist(dist: Distribution | None) -> str:
    return "-" if dist is None else f"{dist.p50:.1f} / {dist.p90:.1f} / {dist.p99:.1f}"


def level_row(point: LevelPoint, verdict: SweepVerdict) -> list[str]:
    """One level's cells under SERVING_COLUMNS; the knee is marked on its level."""
    gen = point.summary
    level = fmt_level(point.level.level) + ("/s" if verdict.mode == "rate" else "")
    if verdict.knee is not None and point.level.level == verdict.knee:
        level += " (knee)"
    status = point.case.status if point.case.status == "ok" else f"{point.case.status}: {point.case.error or ''}"
    if point.case.status == STATUS and gen:  # `short_outputs N of M`; the cause is on the console and in notes
        status = f"{STATUS} {point.case.extra.get('short_outputs', '?')} of {gen.succeeded}"
    attainment = point.level.slo_attainment
    return [
        level,
        status,
        f"{point.tokens_per_s:.1f}" if point.tokens_per_s else "-",
        f"{gen.requests_per_s:.2f}" if gen and gen.succeeded else "-",
        _dist(gen.ttft_ms if gen else None),
        _dist(gen.tpot_ms if gen else None),
        f"{point.e2e_p50_ms:.1f}" if point.e2e_p50_ms is not None else "-",
        "-" if attainment is None else f"{attainment:.0%}" + (" ✓" if point.level.slo_held else " ✗"),
        f"{gen.goodput_rps:.2f}" if gen and attainment is not None and point.usable else "-",
        f"{gen.lag_ms.p99:.1f}" if gen and gen.lag_ms else "-",  # the client's own lag (rate levels)
    ]


def sweep_title(verdict: SweepVerdict) -> str:
    """`series, concurrency sweep` / `series, Poisson rate sweep (requests/s)`."""
    kind = "concurrency sweep" if verdict.mode == "concurrency" else "Poisson rate sweep (requests/s)"
    return f"{verdict.series}, {kind}"


def serving_markdown(cases: Sequence[CaseResult]) -> list[str]:
    """The markdown section: per sweep its title, table, verdict lines and partial-failure lines."""
    from infermeter.report.markdown_table import markdown_cell as _cell
    from infermeter.report.markdown_table import markdown_table

    found = verdicts(cases)
    if not found:
        return []
    out = ["## Serving sweeps", ""]
    for verdict in found:
        rows = [level_row(p, verdict) for p in verdict.points]
        out += [f"### {_cell(sweep_title(verdict))}", "", markdown_table(SERVING_COLUMNS, rows), ""]
        out += [f"- {_cell(line)}" for line in verdict.lines() + failure_notes(verdict)]
        out.append("")
    return out


def failure_notes(verdict: SweepVerdict) -> list[str]:
    """The one-line reason of each level where some (not all) requests failed, and of each level whose answers
    came back short (with the likely cause)."""
    notes = []
    for p in verdict.points:
        if p.case.status == STATUS:
            notes.append(f"level {fmt_level(p.level.level)}: {STATUS}, left out of the verdict: {p.case.error}")
        if p.level.failure and p.case.status in ("ok", STATUS):
            notes.append(f"level {fmt_level(p.level.level)}: {p.level.failure}")
    return notes


def _slo_line(fig: object, value: float | None, label: str, row: int) -> None:
    if value is not None:
        fig.add_hline(y=value, line_dash="dash", line_color="#d92d20", annotation_text=label, row=row, col=1)  # type: ignore[attr-defined]


def serving_charts(cases: Sequence[CaseResult]) -> list[Chart]:
    """Throughput against level and latency against level (one line per sweep), and server metrics over time."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from infermeter.report.charts import Chart, _layout

    found = verdicts(cases)
    if not found:
        return []
    charts = []
    for mode in ("concurrency", "rate"):
        sweeps = [v for v in found if v.mode == mode and any(p.tokens_per_s for p in v.points)]
        if not sweeps:
            continue
        axis = "concurrency (clients)" if mode == "concurrency" else "request rate (requests/s, Poisson)"
        tput = go.Figure()
        lat = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=("TTFT (ms)", "TPOT (ms)"))
        slo = None
        for verdict in sweeps:
            points = [p for p in verdict.points if p.usable and p.summary and p.summary.succeeded]
            xs = [p.level.level for p in points]
            tput.add_trace(
                go.Scatter(x=xs, y=[p.tokens_per_s for p in points], mode="lines+markers", name=verdict.series)
            )
            for row, metric in ((1, "ttft_ms"), (2, "tpot_ms")):
                for pct, dash in (("p50", "solid"), ("p99", "dot")):
                    ys = [getattr(getattr(p.summary, metric), pct, None) for p in points]
                    name = f"{verdict.series} {pct.upper()}"
                    trace = go.Scatter(x=xs, y=ys, mode="lines+markers", name=name, line={"dash": dash})
                    lat.add_trace(trace, row=row, col=1)
            slo = slo or next((p.summary.slo for p in points if p.summary), None)
        _layout(tput, axis, "output tokens/s (all requests)")
        _layout(lat, axis, "")
        lat.update_layout(height=620)
        if slo is not None:
            _slo_line(lat, slo.ttft_ms, f"SLO TTFT {slo.ttft_ms:g} ms" if slo.ttft_ms else "", 1)
            _slo_line(lat, slo.tpot_ms, f"SLO TPOT {slo.tpot_ms:g} ms" if slo.tpot_ms else "", 2)
        if mode == "concurrency":
            for fig in (tput, lat):
                fig.update_xaxes(type="log", tickvals=sorted({p.level.level for v in sweeps for p in v.points}))
        knees = "; ".join(line for v in sweeps for line in v.lines())
        charts.append(Chart(f"serving-throughput-{mode}", f"Throughput vs {mode}", tput, knees))
        caption = "P50 solid, P99 dotted; the SLO is the dashed line." if slo else "P50 solid, P99 dotted."
        charts.append(Chart(f"serving-latency-{mode}", f"TTFT and TPOT vs {mode}", lat, caption))
    metrics = server_metrics_chart(cases)
    return charts + ([metrics] if metrics else [])


def server_metrics_chart(cases: Sequence[CaseResult]) -> Chart | None:
    """The server's charted metrics (`server_metrics.CHARTED`) against time since its sweep started."""
    import plotly.graph_objects as go

    from infermeter.llm.server_metrics import CHARTED
    from infermeter.report.charts import Chart, _layout

    fig = go.Figure()
    for verdict in verdicts(cases):
        series: dict[str, tuple[list[float], list[float]]] = {}
        for point in verdict.points:
            record = read_record(point.case, ServerMetrics)
            for sample in record.samples if record else ():
                for name in CHARTED:
                    if name in sample.values:
                        xs, ys = series.setdefault(name, ([], []))
                        xs.append(sample.t_s)
                        ys.append(sample.values[name])
        for name, (xs, ys) in series.items():
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"{verdict.series} {name}"))
    if not fig.data:
        return None
    _layout(fig, "seconds since the sweep started", "value (requests, slots, or cache fraction)")
    caption = "Read from the server's own /metrics and /slots while each level ran; levels follow one another."
    return Chart("serving-server-metrics", "Server state over the sweep", fig, caption)
