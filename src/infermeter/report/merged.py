"""Several results files seen as one report: cases tagged with the file they came from, environments compared.

Shared by every renderer (markdown, HTML, CSV) so that they agree on which cases there are, in which order,
and on the table rows (one source of truth: `report_table`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infermeter.report.summary import SummaryTable, summary_table
from infermeter.results.env import environment_differences
from infermeter.results.records import ParityRecord, read_record
from infermeter.results.schema import CaseResult, ResultsFile


@dataclass(frozen=True)
class SourceFile:
    """One results file of a report: its display name (usually the path) and content."""

    name: str
    results: ResultsFile


@dataclass(frozen=True)
class MergedReport:
    """Every case of every file in file order; `sources[i]` names the file of `cases[i]`.

    `env_differences` holds (file name, differences against the first file) for every later file whose
    environment differs in what matters for comparison (CPU, cores, framework versions, GPU).
    """

    files: list[SourceFile]
    cases: list[CaseResult]
    sources: list[str]
    env_differences: list[tuple[str, list[str]]]

    @property
    def multi(self) -> bool:
        """True when the report merges more than one file (a `file` column is shown)."""
        return len(self.files) > 1

    @property
    def environment(self) -> dict[str, Any]:
        """The environment of the first file (the others are shown as differences against it)."""
        return self.files[0].results.environment if self.files else {}

    @property
    def peak(self) -> dict[str, float] | None:
        """Hardware peaks (`extra["peak"]`: fp32_gflops, bandwidth_gbs, ...) of the first file that has them."""
        for source in self.files:
            peak = source.results.extra.get("peak")
            if isinstance(peak, dict) and peak:
                return {str(k): float(v) for k, v in peak.items() if isinstance(v, int | float)}
        return None


def merge_results(files: Sequence[SourceFile]) -> MergedReport:
    """Merge results files in the order given. Case ids are made unique per file (`#2` suffix for the second
    file) so that a case measured in two files keeps two rows and its own speedup."""
    cases: list[CaseResult] = []
    sources: list[str] = []
    for index, source in enumerate(files):
        for case in source.results.cases:
            unique = case if index == 0 else dataclasses.replace(case, id=f"{case.id}#{index + 1}")
            cases.append(unique)
            sources.append(source.name)
    differences = []
    if files:
        first = files[0].results.environment
        for source in files[1:]:
            diffs = environment_differences(first, source.results.environment)
            if diffs:
                differences.append((source.name, diffs))
    return MergedReport(list(files), cases, sources, differences)


def parity_cell(case: CaseResult) -> str:
    """`pass`, `FAIL` or `—` from the case's parity record (written by the parity check)."""
    parity = read_record(case, ParityRecord)
    if parity is None:
        return "—"
    return "pass" if parity.passed else "FAIL"


def has_parity(cases: Sequence[CaseResult]) -> bool:
    """True when at least one case carries a parity verdict."""
    return any(parity_cell(case) != "—" for case in cases)


def report_table(report: MergedReport, allow_mixed_precision: bool = False) -> SummaryTable:
    """The summary table of the merged cases, with a `parity` column when any case has a verdict and a `file`
    column when several files are merged."""
    table = summary_table(report.cases, allow_mixed_precision)
    columns = list(table.columns)
    rows = [list(row) for row in table.rows]
    if has_parity(report.cases):
        columns.append("parity")
        for row, case in zip(rows, report.cases, strict=True):
            row.append(parity_cell(case))
    if report.multi:
        columns.append("file")
        for row, source in zip(rows, report.sources, strict=True):
            row.append(source)
    return SummaryTable(tuple(columns), rows, table.warnings, table.footnotes)


def environment_summary(environment: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs describing a machine, in a fixed order, for the markdown and HTML reports."""
    frameworks = environment.get("frameworks") or {}
    gpus = environment.get("gpu") or []
    pairs = [
        ("CPU", str(environment.get("cpu_model", "unknown"))),
        ("ISA", ", ".join(environment.get("isa") or []) or "—"),
        (
            "cores",
            f"{environment.get('physical_cores', '?')} physical / {environment.get('logical_cores', '?')} logical",
        ),
        ("memory", f"{environment.get('memory_total_gb', '?')} GB"),
        ("OS", str(environment.get("os", "unknown"))),
        ("Python", str(environment.get("python", "unknown"))),
        ("frameworks", ", ".join(f"{k} {v}" for k, v in sorted(frameworks.items())) or "—"),
    ]
    threads = environment.get("thread_env") or {}
    if threads:
        pairs.append(("thread settings", ", ".join(f"{k}={v}" for k, v in sorted(threads.items()))))
    if gpus:
        pairs.append(("GPU", "; ".join(f"{g.get('name')} (driver {g.get('driver')})" for g in gpus)))
    return pairs
