"""The pure renderers on a crafted results file: markdown snapshot, HTML structure, CSV round trip, CLI."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cli_helpers import run_cli
from crafted_results import ENVIRONMENT, make_case, make_results, parity_field, sample_results
from infermeter.report.chart_list import report_charts
from infermeter.report.csv import COLUMN_TYPES, csv_records, decode_json_cell, parse_csv, render_csv
from infermeter.report.html import render_html
from infermeter.report.markdown import render_markdown
from infermeter.report.merged import SourceFile, merge_results, report_table
from infermeter.results.io import write_results

SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"


def _check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1" or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; rerun with UPDATE_SNAPSHOTS=1 if the change is intended"


def test_markdown_matches_snapshot_and_names_every_case() -> None:
    report = merge_results([SourceFile("sample.json", sample_results())])
    text = render_markdown(report)
    _check_snapshot("report_sample.md", text)
    # The same rows as the console table: one source of truth.
    _, rows, caption = report_table(report).compact()
    for row in rows:
        assert "| " + " | ".join(row) + " |" in text
    assert "model tiny_cnn" in caption
    assert "| speedup | GFLOP/s | parity |" in text  # % peak: no case has a ceiling, so the column is dropped
    assert "| FAIL |" in text and "openvino: model not supported" in text
    # openvino measured fastest at batch 1 but failed parity: the speedup line names onnxruntime instead.
    assert "tiny_cnn onnxruntime fp32 b1 static: onnxruntime is 3.99x faster than torch" in text
    assert "openvino measured faster but failed the parity check" in text
    assert "## Warnings" in text and "high_cv" in text
    assert "Test CPU 3000" in text


def test_markdown_is_deterministic() -> None:
    assert render_markdown(merge_results([SourceFile("a", sample_results())])) == render_markdown(
        merge_results([SourceFile("a", sample_results())])
    )


def test_merging_two_files_shows_the_file_and_environment_differences() -> None:
    other_env = {**ENVIRONMENT, "cpu_model": "Other CPU", "frameworks": {**ENVIRONMENT["frameworks"], "torch": "2.5"}}
    second = make_results([make_case("torch", 1, 1.5, seed=9)], environment=other_env)
    report = merge_results([SourceFile("a.json", sample_results()), SourceFile("b.json", second)])
    table = report_table(report)
    assert table.columns[-1] == "file"
    assert [row[-1] for row in table.rows] == ["a.json"] * 6 + ["b.json"]
    assert report.cases[-1].id.endswith("#2")
    text = render_markdown(report)
    assert "cpu_model: Test CPU 3000 vs Other CPU" in text
    assert "torch 2.13.0 vs 2.5" in text
    assert "not like-for-like" in text


def test_csv_round_trips_and_keeps_a_stable_column_order() -> None:
    report = merge_results([SourceFile("sample.json", sample_results())])
    text = render_csv(report)
    header = text.splitlines()[0].split(",")
    assert header == ["file", *COLUMN_TYPES]
    assert header[:4] == ["file", "id", "model", "backend"]
    assert len(text.splitlines()) == 1 + len(report.cases)
    rows = parse_csv(text)
    assert rows == csv_records(report)
    first = rows[0]
    case = report.cases[0]
    assert first["latency_ms.p50"] == case.latency_ms.p50  # exact float round trip
    assert first["latency_ms.p99_ci95_high"] == case.latency_ms.p99_ci95[1]
    assert first["parity.passed"] is True and rows[2]["parity.passed"] is False
    assert decode_json_cell(first["input_shapes"]) == {"input": [1, 3, 32, 32]}
    failed = rows[5]
    assert failed["status"] == "failed" and failed["latency_ms.p50"] is None
    assert failed["error"] == "openvino: model not supported"


def test_csv_quotes_awkward_text() -> None:
    case = make_case("null", 1, 1.0, status="failed", error='bad, "quoted"\nline')
    report = merge_results([SourceFile("x,y.json", make_results([case]))])
    rows = parse_csv(render_csv(report))
    assert rows[0]["error"] == 'bad, "quoted"\nline'
    assert rows[0]["file"] == "x,y.json"


def test_html_is_self_contained_and_has_every_chart() -> None:
    report = merge_results([SourceFile("sample.json", sample_results())])
    page = render_html(report)
    assert page == render_html(report)  # deterministic: fixed div ids, no timestamps
    assert not re.search(r"<script[^>]+src=", page), "no external script: the page must work offline"
    assert "cdn." not in page.split("</script>", 1)[1]
    keys = [chart.key for chart in report_charts(report)]
    assert keys == ["latency-distribution", "percentiles", "throughput-batch", "pareto", "memory-load", "roofline"]
    for key in keys:
        assert page.count(f'id="chart-{key}"') == 1
    assert page.count("Plotly.newPlot") == len(keys)
    assert '<table id="summary">' in page and "openvino: model not supported" in page
    assert '<td class="FAIL">FAIL</td>' in page


def test_html_draws_no_roofline_without_the_fields() -> None:
    report = merge_results([SourceFile("r.json", make_results([make_case("torch", 1, 1.0)]))])
    keys = [chart.key for chart in report_charts(report)]
    assert "roofline" not in keys
    assert "roofline" not in render_html(report).lower().split("</script>", 1)[1]


def test_html_escapes_user_text() -> None:
    case = make_case("null", 1, 1.0, status="failed", error="<script>alert(1)</script>")
    page = render_html(merge_results([SourceFile("r.json", make_results([case]))]))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize(
    ("fmt", "suffix", "marker"), [("md", ".md", "# infermeter report"), ("csv", ".csv", "file,id")]
)
def test_cli_report_writes_files(tmp_path: Path, fmt: str, suffix: str, marker: str) -> None:
    results = tmp_path / "r.json"
    write_results(results, sample_results())
    out = tmp_path / f"report{suffix}"
    proc = run_cli("report", str(results), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith(marker)
    proc = run_cli("report", str(results), "--format", fmt)
    assert proc.returncode == 0 and proc.stdout == out.read_text()


def test_cli_report_table_and_errors(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    write_results(results, sample_results())
    proc = run_cli("report", str(results))
    assert proc.returncode == 0, proc.stderr
    assert "onnxruntime" in proc.stdout and "openvino" in proc.stdout
    missing = run_cli("report", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: cannot read results file")
    bad = run_cli("report", str(results), "-o", str(tmp_path / "x.txt"))
    assert bad.returncode == 2 and "--format" in bad.stderr


def test_a_parity_failure_beside_its_own_backends_best_is_named_with_its_precision() -> None:
    cases = [
        make_case("torch", 1, 2.0, seed=1, extra=parity_field(True)),
        make_case("openvino", 1, 0.5, seed=2, extra=parity_field(True)),
        make_case("openvino", 1, 0.3, seed=3, precision="bf16", extra=parity_field(False, "max abs err 0.3")),
    ]
    text = render_markdown(merge_results([SourceFile("r.json", make_results(cases))]))
    assert "openvino is 3.99x faster than torch" in text
    assert "openvino bf16 measured faster but failed the parity check" in text, text


def test_chart_labels_tell_a_backends_configurations_apart_by_their_options() -> None:
    from infermeter.report.charts import case_labels

    first = make_case("openvino", 1, 0.5, seed=1, case_id="ov")
    again = make_case("openvino", 1, 0.6, seed=2, case_id="ov-finalists")
    again.options = {"optimize.round": "finalists"}
    labels = case_labels(merge_results([SourceFile("r.json", make_results([first, again]))]))
    assert labels == ["openvino fp32 b1", "openvino round=finalists fp32 b1"], labels
