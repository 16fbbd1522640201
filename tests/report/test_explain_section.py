"""The Explain section of the HTML report (`infermeter report results.json --explain explain.json`): its blocks
sorted by difference, the engines' rows and the findings, one renderer shared with explain's own page, and the
record read back from its JSON file."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_helpers import run_cli
from crafted_results import sample_results
from infermeter.report.explain_section import block_label, explain_section, render_explain_page
from infermeter.report.html import render_html
from infermeter.report.merged import SourceFile, merge_results
from infermeter.results.explain import ExplainRecord, read_explain
from infermeter.results.io import write_results
from report.crafted_explain import BY_DIFFERENCE, explain_record


def _section(page: str) -> str:
    start = page.index('<section class="chart" id="section-explain">')
    return page[start : page.index("</section>", start)]


def _in_order(text: str, needles: list[str]) -> bool:
    positions = [text.index(needle) for needle in needles]
    return positions == sorted(positions)


def test_a_report_with_an_explain_record_shows_its_blocks_by_difference() -> None:
    report = merge_results([SourceFile("sample.json", sample_results())])
    record = explain_record()
    page = render_html(report, explain=record)
    assert 'id="section-explain"' not in render_html(report)
    assert page.count('id="section-explain"') == 1 and page.count('id="chart-explain-blocks"') == 1
    section = _section(page)
    table = section[section.index('<table id="explain-blocks">') :]
    assert _in_order(table, [f'<td class="">{name}</td>' for name in BY_DIFFERENCE])
    # The chart's bars: the same order (plotly draws the first label on top, the axis reversed).
    figure = section[section.index('id="chart-explain-blocks"') :]
    labels = [block_label(next(b for b in record.blocks if b.label == name)) for name in BY_DIFFERENCE]
    assert _in_order(figure, [json.dumps(label) for label in labels])
    engines = section[section.index('<table id="explain-engines">') : section.index('<table id="explain-blocks">')]
    for cell in ("1,100.0", "1,005.0", "95.0", "420.0", "359.0", "61.0", "2,000.0"):
        assert f'<td class="num">{cell}</td>' in engines, cell
    assert "tflite gives no per-unit profile here" in engines
    findings = section[section.index('id="explain-findings"') :]
    assert _in_order(findings, ["block_dominates", "layout_conversions"])
    assert "note: no FLOPs per block: crafted" in section
    # The section comes after the report's charts and before its environment.
    assert page.index('id="chart-roofline"') < page.index('id="section-explain"') < page.index('id="environment"')


def test_the_explain_page_and_the_report_section_are_one_renderer() -> None:
    record = explain_record()
    section = "\n".join(explain_section(record))
    assert section in render_explain_page(record)
    assert section in render_html(merge_results([SourceFile("s.json", sample_results())]), explain=record)


def test_a_record_without_profiles_has_no_chart() -> None:
    record = explain_record()
    record.engines = [e for e in record.engines if not e.profiled]
    record.blocks = []
    section = "\n".join(explain_section(record))
    assert 'id="chart-explain-blocks"' not in section and 'class="explain"' in section
    assert "tflite gives no per-unit profile here" in section


def test_the_record_reads_back_from_its_json(tmp_path: Path) -> None:
    record = explain_record()
    path = tmp_path / "explain.json"
    path.write_text(json.dumps(record.to_dict()))
    assert read_explain(path) == record
    assert ExplainRecord.from_dict(record.to_dict()) == record


def test_cli_report_takes_an_explain_record(tmp_path: Path) -> None:
    results, explain = tmp_path / "r.json", tmp_path / "explain.json"
    write_results(results, sample_results())
    explain.write_text(json.dumps(explain_record().to_dict()))
    out = tmp_path / "report.html"
    proc = run_cli("report", str(results), "--explain", str(explain), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text(encoding="utf-8")
    assert re.search(r"<h2>Explain: where each engine spends its time on planted\.onnx</h2>", page)
    markdown = run_cli("report", str(results), "--explain", str(explain), "-o", str(tmp_path / "r.md"))
    assert markdown.returncode == 2 and "--explain adds a section to the HTML report" in markdown.stderr
    assert not (tmp_path / "r.md").exists()
    wrong = run_cli("report", str(results), "--explain", str(results), "-o", str(tmp_path / "x.html"))
    assert wrong.returncode == 2 and "is not an explain record" in wrong.stderr
    assert not (tmp_path / "x.html").exists()
