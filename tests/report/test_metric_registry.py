"""The metric registry: every output (console, markdown, HTML, CSV, rows/pandas, history, compare, advise) shows
every registry metric, with the value the crafted case carries. Adding a metric: one row in EXPECTED below."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from crafted_results import make_case, make_results
from infermeter.advise.constraints import CHECKS
from infermeter.api.results_view import Results
from infermeter.compare.verdict import METRICS as COMPARE_METRICS
from infermeter.compare.verdict import compare_results
from infermeter.figures.metric_registry import METRICS, NUMERIC_COLUMNS, Metric
from infermeter.history.store import _SCHEMA, load_history, record_run
from infermeter.report.csv import parse_csv, render_csv
from infermeter.report.html import render_html
from infermeter.report.markdown import render_markdown
from infermeter.report.merged import SourceFile, merge_results, report_table
from infermeter.report.summary import summary_table
from infermeter.results.records import Roofline, SoakRecord, write_record
from infermeter.results.schema import CaseResult, ResultsFile

# Each metric's value on the measured case, and its table cell: one row per registry metric.
EXPECTED: dict[str, tuple[float, str]] = {
    "p50_ms": (2.0, "2.00"),
    "p99_ms": (2.0, "2.00"),
    "throughput": (500.0, "500.0"),
    "peak_rss_mb": (123.0, "123"),
    "load_s": (0.75, "0.75"),
    "speedup": (2.0, "2.00x"),
    "achieved_gflops": (12.5, "12.5"),
    "peak_fraction": (0.25, "25%"),
    "growth_mb_per_1k": (1.5, "+1.50"),
}


def _soak(slope_mb_per_1k: float) -> SoakRecord:
    samples = [[0.0, 0.0, 100.0, 90.0], [1000.0, 1.0, 101.5, 91.5]]
    return SoakRecord(
        1000,
        10,
        exploration_requests=90,
        replay_requests=900,
        distinct_shapes=8,
        lengths="8..64",
        stopped_by="requests",
        samples=samples,
        slope_mb_per_1k=slope_mb_per_1k,
        slope_ci_mb_per_1k=[1.0, 2.0],
        growing=True,
        plateau_at=None,
        tolerance_mb=1.0,
        peak_rss_mb=101.5,
        start_rss_mb=100.0,
        end_rss_mb=101.5,
        windows=[[0, 1000, 2.0, 2.0]],
    )


def _cases() -> list[CaseResult]:
    """The baseline (4 ms, no soak) and the measured case (2 ms, every metric known), then a failed case."""
    base = make_case("torch", samples=[4.0] * 600, peak_mb=200.0, load_s=1.0)
    case = make_case("onnxruntime", samples=[2.0] * 600, peak_mb=123.0, load_s=0.75)
    for one, gflops, fraction in ((base, 6.25, 0.125), (case, 12.5, 0.25)):
        write_record(
            one,
            Roofline(
                1000,
                100,
                achieved_gflops=gflops,
                arithmetic_intensity=10.0,
                peak_precision="fp32_gflops",
                peak_ceiling_gflops=gflops / fraction,
                peak_fraction=fraction,
            ),
        )
    write_record(case, _soak(1.5))
    return [base, case, make_case("openvino", status="failed", error="openvino: model not supported")]


def _results() -> ResultsFile:
    return make_results(_cases())


def test_every_registry_metric_has_a_row_in_expected() -> None:
    assert [m.key for m in METRICS] == list(EXPECTED)
    assert len({m.header for m in METRICS}) == len(METRICS) and len({m.key for m in METRICS}) == len(METRICS)


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.key)
def test_the_tables_show_the_metric(metric: Metric) -> None:
    cases = _cases()
    table = summary_table(cases)
    assert metric.header in table.columns and metric.header in NUMERIC_COLUMNS
    cells = dict(zip(table.columns, table.rows[1], strict=True))
    assert cells[metric.header] == EXPECTED[metric.key][1]
    # The console (via the API's table), markdown and HTML show the column and the cell.
    text = Results(make_results(cases)).table()
    header = next(line for line in text.splitlines() if "backend" in line)
    assert metric.header in header and EXPECTED[metric.key][1] in text
    report = merge_results([SourceFile("r.json", make_results(cases))])
    markdown = render_markdown(report)
    header = next(line for line in markdown.splitlines() if line.startswith("| backend |"))
    assert f" {metric.header} |" in header and f" {EXPECTED[metric.key][1]} |" in markdown
    assert f'<th class="num">{metric.header}</th>' in render_html(report)


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.key)
def test_csv_rows_and_history_carry_the_metric(metric: Metric, tmp_path: Path) -> None:
    value = EXPECTED[metric.key][0]
    row = Results(_results()).rows()[1]
    assert (getattr(row, metric.key) if hasattr(row, metric.key) else row.extra[metric.key]) == pytest.approx(value)
    frame = Results(_results()).to_pandas()
    assert frame[metric.key][1] == pytest.approx(value)
    if metric.relative:  # relative to the cases beside it: no CSV column, not stored
        assert metric.csv is None
        return
    assert metric.csv is not None
    records = parse_csv(render_csv(merge_results([SourceFile("r.json", _results())])))
    assert records[1][metric.csv] == pytest.approx(value) and records[2][metric.csv] is None
    db = tmp_path / "history.db"
    assert record_run(_results(), tmp_path / "r.json", db) is None
    point = load_history(db)[1]
    stored = getattr(point, metric.key) if hasattr(point, metric.key) else point.extra[metric.key]
    assert stored == pytest.approx(value)


@pytest.mark.parametrize("metric", [m for m in METRICS if m.gate], ids=lambda m: m.key)
def test_compare_gates_each_gateable_metric_in_its_direction(metric: Metric) -> None:
    assert metric.gate is not None
    slower = [c for c in _cases()[:2]]
    faster = [
        dataclasses.replace(c, timing=dataclasses.replace(c.timing, samples_ms=[x / 2 for x in c.timing.samples_ms]))
        for c in slower
    ]
    comparison = compare_results(make_results(slower), make_results(faster), metric.gate)
    change = comparison.changes[1]
    assert change.slowdown is not None and change.slowdown < 1  # half the latency: better, whatever the metric
    assert change.base_value == pytest.approx(EXPECTED[metric.key][0])


def test_compare_and_advise_read_the_registry() -> None:
    assert COMPARE_METRICS == ("p50", "p99", "throughput")
    by_key = {m.key: m for m in METRICS}
    for check in CHECKS:
        if check.metric.key in by_key:
            assert check.metric is by_key[check.metric.key]
            assert check.upper == (check.metric.better == "lower")
    assert {c.flag: c.unit for c in CHECKS}["--max-p99-ms"] == " ms"
    assert {c.flag: c.unit for c in CHECKS}["--min-throughput"] == "/s"


@pytest.mark.parametrize("soaked", [True, False])
def test_a_failed_row_has_a_cell_under_every_column(soaked: bool) -> None:
    cases = _cases() if soaked else [make_case("torch"), make_case("x", status="crashed", error="boom")]
    table = summary_table(cases)
    assert ("growth MB/1k req" in table.columns) == soaked  # the soak's column only where a case soaked
    failed = dict(zip(table.columns, table.rows[-1], strict=True))
    assert failed["P50 ms"] in ("FAILED", "CRASHED")
    assert all(failed[m.header] == "—" for m in METRICS[1:] if m.header in failed)
    assert len(report_table(merge_results([SourceFile("r", make_results(cases))])).rows[-1]) == len(table.columns)


def test_a_history_database_from_before_a_metric_gets_its_column(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as connection:
        connection.executescript(_SCHEMA)  # the first schema: no column for the metrics added since
        connection.execute("INSERT INTO runs (created, recorded) VALUES ('then', 'then')")
        row = (1, "old-case", "m", "torch", "fp32", "fp32", 1, "static", 4, "ok", 1.5, 2.5, 600.0, 90.0, 0.5)
        connection.execute("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (*row, json.dumps([1.5])))  # fmt: skip
    assert record_run(_results(), None, db) is None
    old, _, new, _ = load_history(db)
    assert old.p50_ms == 1.5 and old.extra["growth_mb_per_1k"] is None and old.samples_ms == [1.5]
    assert new.extra["growth_mb_per_1k"] == pytest.approx(1.5)
