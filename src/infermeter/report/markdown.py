"""Markdown report: the summary table (the same rows as the console), fastest case per group, warnings and the
environment. Pure: results in, text out."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.figures.metric_registry import format_ms, speedup_cell
from infermeter.report.markdown_table import markdown_cell as _cell
from infermeter.report.markdown_table import markdown_table
from infermeter.report.merged import MergedReport, environment_summary, parity_cell, report_table
from infermeter.report.summary import case_label, group_warnings, speedups
from infermeter.results.schema import CaseResult


def fastest_lines(cases: Sequence[CaseResult], allow_mixed_precision: bool = False) -> list[str]:
    """One line per group of comparable cases (same model, batch, shapes, threads) with more than one ok case:
    the fastest by P50 and its speedup over the group's baseline (the first case)."""
    ratios = speedups(cases, allow_mixed_precision)
    groups: dict[tuple[object, ...], list[CaseResult]] = {}
    for case in cases:
        speedup = ratios.get(case.id)
        if (
            case.ok and speedup is not None and (speedup.ratio is not None or speedup.mark == "parity")
        ):  # parity failures: named below, never the winner
            groups.setdefault((case.model, case.batch, case.shape_mode, case.threads), []).append(case)
    lines = []
    for members in groups.values():
        if len(members) < 2:
            continue
        base = members[0]
        # A speedup is believed only when the outputs were not found wrong.
        trusted = [c for c in members if parity_cell(c) != "FAIL"]
        if not trusted:
            continue
        best = min(trusted, key=_p50)
        speedup = ratios[best.id]
        assert best.latency_ms is not None and base.latency_ms is not None and speedup.ratio is not None
        if speedup.paired is not None and speedup.paired.no_difference:
            line = (
                f"{case_label(best)}: no difference between {best.backend} and {base.backend} "
                f"({speedup_cell(speedup)}, P50 {format_ms(_p50(best))} ms vs {format_ms(_p50(base))} ms)"
            )
        elif best is base:
            line = f"{case_label(best)}: the baseline {best.backend} is the fastest (P50 {format_ms(_p50(best))} ms)"
        else:
            line = (
                f"{case_label(best)}: {best.backend} is {speedup_cell(speedup)} faster than {base.backend} "
                f"(P50 {format_ms(_p50(best))} ms vs {format_ms(_p50(base))} ms)"
            )
        failed = [_name_in(members, c) for c in members if parity_cell(c) == "FAIL" and _p50(c) < _p50(best)]
        if failed:
            line += f"; {', '.join(failed)} measured faster but failed the parity check, so it does not count"
        lines.append(line)
    return lines


def _name_in(members: Sequence[CaseResult], case: CaseResult) -> str:
    """The case's backend, with its precision when another case of the group runs on the same backend (OpenVINO
    BF16 failing parity beside OpenVINO FP32, the best)."""
    shared = sum(member.backend == case.backend for member in members) > 1
    return f"{case.backend} {case.precision}" if shared else case.backend


def _p50(case: CaseResult) -> float:
    return case.latency_ms.p50 if case.latency_ms is not None else float("inf")


def _soak_section(cases: Sequence[CaseResult]) -> list[str]:
    """The soak table and each growing case's remedy (nothing when no case soaked)."""
    from infermeter.report.soak import soak_remedies, soak_table

    table = soak_table(cases)
    if table is None:
        return []
    out = ["## Soak: memory over the replay", "", markdown_table(table.columns, table.rows), ""]
    remedies = soak_remedies(cases)
    out += [f"- {_cell(line)}" for line in remedies]
    return out + ([""] if remedies else [])


def render_markdown(report: MergedReport, allow_mixed_precision: bool = False) -> str:
    """The whole markdown report."""
    out = ["# infermeter report", ""]
    if report.multi:
        out += ["Merged from:", ""]
        out += [f"- `{s.name}` ({s.results.created}, {len(s.results.cases)} cases)" for s in report.files]
        out.append("")
    elif report.files:
        source = report.files[0]
        out += [f"`{source.name}`, created {source.results.created}", ""]
    table = report_table(report, allow_mixed_precision)
    columns, rows, caption = table.compact()
    out += ["## Results", ""]
    if caption:
        out += [f"*{_cell(caption)}*", ""]
    if rows:
        out += [markdown_table(columns, rows), ""]
    else:
        out += ["No cases.", ""]
    out += [f"- {_cell(note)}" for note in table.footnotes]
    if table.footnotes:
        out.append("")
    out += _soak_section(report.cases)
    from infermeter.report.serving import serving_markdown

    out += serving_markdown(report.cases)
    fastest = fastest_lines(report.cases, allow_mixed_precision)
    if fastest:
        out += [
            "## Speedups",
            "",
            "Speedup = baseline P50 / case P50; the baseline is the first case of each group.",
            "",
        ]
        out += [f"- {_cell(line)}" for line in fastest]
        out.append("")
    groups = group_warnings(table.warnings)
    if groups:
        out += ["## Warnings", ""]
        for group in groups:
            where = ", ".join(f"{label} ({detail})" if detail else label for label, detail in group.cases)
            out.append(f"- **{group.code}**: {_cell(group.title)}: {_cell(where)}")
            out.append(f"  - remedy: {_cell(group.remedy)}")
        out.append("")
    out += ["## Environment", ""]
    out += [markdown_table(["", "value"], [[k, v] for k, v in environment_summary(report.environment)]), ""]
    for name, diffs in report.env_differences:
        out += [f"**Environment of `{name}` differs** from the first file: {_cell('; '.join(diffs))}.", ""]
        out += ["Figures across these files are not like-for-like.", ""]
    return "\n".join(out).rstrip() + "\n"
