"""The serving sweep's report: a table per sweep with the knee and the SLO verdict (markdown), the throughput and
TTFT/TPOT charts with the SLO line and the server-metrics chart (HTML), from sweeps run against the tiny server."""

from __future__ import annotations

from fake_openai import FakeOpenAIServer

from crafted_results import make_results
from infermeter.llm.generation_metrics import SLO
from infermeter.llm.openai_bench import EndpointSettings
from infermeter.llm.serving_sweep import SweepSettings, run_sweep
from infermeter.report.chart_list import report_charts
from infermeter.report.html import render_html
from infermeter.report.markdown import render_markdown
from infermeter.report.merged import SourceFile, merge_results
from infermeter.results.schema import CaseResult


def _sweeps() -> list[CaseResult]:
    cases = []
    for slots in (1, 4):
        with FakeOpenAIServer(["ok"], tokens=4, delay_s=0.01, slots=slots) as server:
            endpoint = EndpointSettings(server.url, gen_len=4, requests=4, slo=SLO(ttft_ms=10_000, tpot_ms=10_000))
            series = f"fake -np {slots}"
            cases += run_sweep(
                SweepSettings(endpoint, "concurrency", levels=(1, 2), series=series, server_metrics=True)
            )
            cases += run_sweep(SweepSettings(endpoint, "rate", levels=(50.0,), series=series))
    return cases


def test_markdown_and_html_carry_the_sweep_tables_and_charts() -> None:
    report = merge_results([SourceFile("sweep.json", make_results(_sweeps()))])
    markdown = render_markdown(report)
    assert "## Serving sweeps" in markdown
    for series in ("fake -np 1", "fake -np 4"):
        assert f"### {series}, concurrency sweep" in markdown
        assert f"### {series}, Poisson rate sweep (requests/s)" in markdown
        assert f"{series}: max concurrency under the SLO (90% of requests within it): 2" in markdown
        assert f"{series}: max request rate under the SLO (90% of requests within it): 50" in markdown
    assert "| 50/s | ok |" in markdown and "TTFT P50/P90/P99 ms" in markdown
    keys = [chart.key for chart in report_charts(report)]
    for key in ("serving-throughput-concurrency", "serving-latency-concurrency", "serving-throughput-rate"):
        assert key in keys
    assert "serving-server-metrics" in keys
    latency = next(c for c in report_charts(report) if c.key == "serving-latency-concurrency")
    assert {shape.y0 for shape in latency.figure.layout.shapes} == {10_000}  # the SLO lines, TTFT and TPOT
    metrics = next(c for c in report_charts(report) if c.key == "serving-server-metrics")
    assert {trace.name for trace in metrics.figure.data} >= {
        "fake -np 1 llamacpp:requests_processing",
        "fake -np 4 slots:busy",
    }
    html = render_html(report)
    assert 'id="section-serving-throughput-concurrency"' in html and "SLO TTFT 10000 ms" in html
