"""The story section of an `infermeter optimize` report: baseline → each step's gain and accuracy → the pick.

Pure: reads the journal an optimize run keeps in its results file (`extra["optimize"]`: steps with why, notes,
skips and case ids; the advice) and the cases themselves. `render_story_html` is the standard HTML report
(`report.html.render_html`) with this section placed before the results table.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from infermeter.report.merged import MergedReport
from infermeter.report.summary import format_ms
from infermeter.results.records import Accuracy, OptimizeStep, ParityRecord, read_record
from infermeter.results.schema import CaseResult

STORY_STYLE = """
.story ol.steps { padding-left: 0; list-style: none; }
.story li.step { border-left: 4px solid #3b82f6; padding: 0.2em 1em; margin: 1em 0; }
.story li.step.skipped { border-left-color: #9aa3b2; } .story li.step.failed { border-left-color: #d92d20; }
.story .why { color: #3d4556; font-style: italic; } .story .pick { background: #ecfdf3; border-left: 4px solid #12b76a;
  padding: 0.6em 1em; } .story .nopick { background: #fdecea; border-left: 4px solid #d92d20; padding: 0.6em 1em; }
.story ul.skips li { color: #5b6475; } .story td.best { font-weight: 600; }
"""
COLUMNS = ("configuration", "P50 ms", "P99 ms", "throughput/s", "peak MB", "load s", "vs baseline", "accuracy",
           "parity", "status")  # fmt: skip


def journal_of(report: MergedReport) -> dict[str, Any] | None:
    """The optimize journal of the report's first file, or None for an ordinary results file."""
    if not report.files:
        return None
    journal = report.files[0].results.extra.get("optimize")
    return journal if isinstance(journal, dict) and journal.get("steps") else None


def _accuracy_cell(case: CaseResult) -> str:
    accuracy = read_record(case, Accuracy)
    if accuracy is None:
        return "—"
    return f"{accuracy.metric} {accuracy.value:.4f} (drop {accuracy.drop_pct:.2f})"


def _parity_cell(case: CaseResult) -> str:
    parity = read_record(case, ParityRecord)
    if parity is None:
        return "—"
    return "pass" if parity.passed else f"FAIL: {parity.reason[:80]}"


def _label(case: CaseResult) -> str:
    info = read_record(case, OptimizeStep)
    variant = info.variant if info else ""
    text = f"{case.backend} {case.precision} b{case.batch} {case.shape_mode}"
    return f"{text} · {variant}" if variant and variant != "baseline" else text


def _row(case: CaseResult, baseline: CaseResult | None, pick_id: str | None) -> str:
    stats = case.latency_ms
    gain = "—"
    if baseline is not None and baseline.latency_ms and stats and baseline.batch == case.batch:
        gain = f"{baseline.latency_ms.p50 / stats.p50:.2f}x"
    elif baseline is not None and baseline.timing.throughput and case.timing.throughput:
        gain = f"{case.timing.throughput / baseline.timing.throughput:.2f}x thr."
    cells = [
        _label(case) + ("  ◀ pick" if case.id == pick_id else ""),
        format_ms(stats.p50) if stats else "—",
        format_ms(stats.p99) if stats else "—",
        f"{case.timing.throughput:,.1f}" if case.timing.throughput else "—",
        f"{case.memory.peak_rss_mb:,.0f}" if case.memory.peak_rss_mb else "—",
        f"{case.loading.load_s:.2f}" if case.loading.load_s is not None else "—",
        gain,
        _accuracy_cell(case),
        _parity_cell(case),
        case.status if case.ok else f"{case.status}: {(case.error or '')[:120]}",
    ]
    css = "best" if case.id == pick_id else ""
    tds = "".join(f'<td class="{css}">{escape(cell)}</td>' for cell in cells)
    return f'<tr class="{"case" if case.ok else "failed"}" data-case="{escape(case.id)}">{tds}</tr>'


def _cases_table(cases: Sequence[CaseResult], baseline: CaseResult | None, pick_id: str | None) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    rows = "".join(_row(c, baseline, pick_id) for c in cases)
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def render_story(report: MergedReport) -> str:
    """The story section (HTML fragment); "" when the report is not of an optimize run."""
    journal = journal_of(report)
    if journal is None:
        return ""
    by_id = {c.id: c for c in report.cases}
    advice: dict[str, Any] = next((s.get("details", {}) for s in journal["steps"] if s["key"] == "advise"), {})
    pick_id = advice.get("pick")
    baseline = by_id.get(advice.get("baseline") or "")
    if baseline is None:
        first = next((s for s in journal["steps"] if s["key"] == "baseline"), None)
        baseline = by_id.get(first["case_ids"][0]) if first and first["case_ids"] else None
    parts = [f"<style>{STORY_STYLE}</style>", '<section class="story" id="story">',
             f"<h2>How the configuration was chosen: {escape(str(journal.get('model', '')))}</h2>"]  # fmt: skip
    if advice:
        css = "pick" if pick_id else "nopick"
        lines = advice.get("explanation", []) + advice.get("binding", [])
        heading = "Pick" if pick_id else "No configuration meets the constraints"
        parts.append(
            f'<div class="{css}" id="verdict"><strong>{heading}</strong> '
            f"(objective {escape(str(advice.get('objective')))}; "
            f"{escape(str(advice.get('constraints')))})<ul>"
            + "".join(f"<li>{escape(str(line))}</li>" for line in lines)
            + "</ul></div>"
        )
    parts.append('<ol class="steps">')
    for step in journal["steps"]:
        cases = [by_id[i] for i in step.get("case_ids", []) if i in by_id]
        parts.append(f'<li class="step {escape(step.get("status", ""))}" id="step-{escape(step["key"])}">')
        parts.append(f"<h3>{escape(step['title'])} <small>({escape(step.get('status', ''))}, "
                     f"{step.get('seconds', 0):.0f} s)</small></h3>")  # fmt: skip
        parts.append(f'<p class="why">{escape(step.get("why", ""))}</p>')
        if cases:
            parts.append(_cases_table(cases, baseline, pick_id))
        if step.get("notes"):
            parts.append('<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in step["notes"]) + "</ul>")
        if step.get("skipped"):
            items = "".join(f"<li>skipped {escape(s['what'])}: {escape(s['reason'])}</li>" for s in step["skipped"])
            parts.append(f'<ul class="skips">{items}</ul>')
        parts.append("</li>")
    parts.append("</ol></section>")
    return "\n".join(parts)


def render_story_html(report: MergedReport, allow_mixed_precision: bool = True) -> str:
    """The full HTML report of an optimize run: title, story, then the standard report sections. Mixed
    precisions are compared on purpose here (that is what optimize does), so speedups across them are shown."""
    from infermeter.report.html import render_html

    page = render_html(report, allow_mixed_precision)
    story = render_story(report)
    if not story:
        return page
    page = page.replace("<title>infermeter report</title>", "<title>infermeter optimize report</title>", 1)
    marker = "<h2>Results</h2>"
    return page.replace(marker, story + "\n" + marker, 1) if marker in page else page
