"""A check's report as a markdown summary (a pull request's step summary) and as JUnit XML (CI test views). Pure."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from infermeter.core.files import write_text_atomically
from infermeter.modelci.run import CheckReport
from infermeter.modelci.steps import Outcome

_MARK = {"pass": "✅ pass", "fail": "❌ FAIL", "skip": "⏭️ skip"}


def _cell(text: str) -> str:
    # A pipe ends a markdown table cell and a newline ends its row.
    return text.replace("|", "\\|").replace("\n", " ")


def _latency_table(report: CheckReport, outcome: Outcome) -> list[str]:
    change = outcome.change
    if change is None or change.base_value is None or change.new_value is None:
        return []
    rows = ["", f"| {outcome.name} | model | P50 ms | rounds |", "|---|---|---:|---:|"]
    sides = (
        ("baseline", report.config.baseline or "", change.base, change.base_value),
        ("new", report.config.model, change.new, change.new_value),
    )
    for side, model, result, value in sides:
        rows.append(f"| {side} | `{_cell(model)}` | {value:.4g} | {len(result.timing.rounds_p50_ms)} |")
    return rows


def render_markdown(report: CheckReport) -> str:
    """The summary: verdict, what was checked, one row per check, the latency figures and each check's details."""
    config = report.config
    failed = report.failures
    verdict = "✅ passed" if report.ok else f"❌ failed ({len(failed)} of {len(report.outcomes)} checks)"
    lines = [f"## infermeter check: {verdict}", ""]
    baseline = f" against baseline `{config.baseline}`" if config.baseline else " (no baseline)"
    lines.append(
        f"`{config.model}`{baseline} · engines {', '.join(config.backends)} · latency gate on "
        f"{config.gate_backend}: fails on a slowdown of {config.threshold:.0%} decided by a sequential test "
        f"(alpha {config.alpha:g}, beta {config.beta:g}), or when undecided after {config.budget_rounds} rounds"
    )
    lines += ["", "| check | result | detail |", "|---|---|---|"]
    for outcome in report.outcomes:
        lines.append(f"| {outcome.name} | {_MARK[outcome.status]} | {_cell(outcome.reason)} |")
    for outcome in report.outcomes:
        if outcome.name.startswith("latency"):
            lines += _latency_table(report, outcome)
    for outcome in report.outcomes:
        if outcome.details:
            lines += ["", f"<details><summary>{outcome.name}</summary>", ""]
            lines += [f"- {_cell(detail)}" for detail in outcome.details]
            lines += ["", "</details>"]
    lines += [
        "",
        f"<sub>infermeter {report.version} · {report.machine} · started {report.started} · "
        f"{report.duration_s:.1f} s</sub>",
        "",
    ]
    return "\n".join(lines)


def render_junit(report: CheckReport) -> str:
    """JUnit XML: one test suite, one test case per check (failure / skipped with the reason)."""
    name = f"infermeter check {report.config.model}"
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(report.outcomes)),
        failures=str(len(report.failures)),
        errors="0",
        skipped=str(sum(1 for o in report.outcomes if o.status == "skip")),
        time=f"{report.duration_s:.3f}",
        timestamp=report.started,
    )
    for outcome in report.outcomes:
        case = ET.SubElement(
            suite, "testcase", classname="infermeter.check", name=outcome.name, time=f"{outcome.seconds:.3f}"
        )
        decision = outcome.change.decision if outcome.change is not None else None
        if decision is not None:  # the sequential decision's record, machine-readable (docs/regression-gate.md)
            properties = ET.SubElement(case, "properties")
            for key, value in decision.to_dict().items():
                ET.SubElement(properties, "property", name=f"decision.{key}", value=str(value))
        if outcome.status == "fail":
            failure = ET.SubElement(case, "failure", message=outcome.reason)
            failure.text = "\n".join((outcome.reason, *outcome.details))
        elif outcome.status == "skip":
            ET.SubElement(case, "skipped", message=outcome.reason)
        elif outcome.details:
            ET.SubElement(case, "system-out").text = "\n".join(outcome.details)
    root = ET.Element("testsuites", name=name)
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_text(path: Path, text: str, append: bool = False) -> None:
    """Write (or append, as GitHub's step summary expects) `text` to `path`, making its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
        return
    write_text_atomically(path, text)


def step_summary_path() -> Path | None:
    """GitHub Actions' step summary file ($GITHUB_STEP_SUMMARY), when set."""
    value = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    return Path(value) if value else None
