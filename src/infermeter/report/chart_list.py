"""Every chart of the report, in page order: the general ones (`report.charts`) and the soak's and serving's."""

from __future__ import annotations

from infermeter.report.charts import (
    Chart,
    case_labels,
    latency_distribution,
    latency_throughput,
    memory_and_load,
    percentile_bars,
    roofline,
    throughput_vs_batch,
)
from infermeter.report.merged import MergedReport
from infermeter.report.serving import serving_charts
from infermeter.report.soak import soak_chart


def report_charts(report: MergedReport) -> list[Chart]:
    """Every chart the data supports, in page order."""
    labels = case_labels(report)
    charts = [
        latency_distribution(report.cases, labels),
        percentile_bars(report.cases, labels),
        throughput_vs_batch(report),
        latency_throughput(report.cases, labels),
        memory_and_load(report.cases, labels),
        roofline(report, labels),
        soak_chart(report.cases),
        *serving_charts(report.cases),
    ]
    return [chart for chart in charts if chart is not None]
