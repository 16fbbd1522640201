"""`Results`: a results file in hand, for notebooks and scripts. What `infermeter.bench` and
`infermeter.load_results` return.

Every figure and table comes from the code the CLI uses: the summary table of `bench` and `report`, the speedups
(`report.summary.speedups`), the results file (`results.io`), the reports (`infermeter report`'s renderers) and
the comparison (`infermeter compare`'s `compare_results`). Nothing here measures or computes a statistic anew.
"""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.results.explain import ExplainRecord, read_explain
from infermeter.results.schema import CaseResult, ResultsFile

if TYPE_CHECKING:
    from infermeter.compare.verdict import Comparison
    from infermeter.report.summary import Speedup

PANDAS_MISSING = (
    "Results.to_pandas() needs pandas, which is not installed here: pip install pandas "
    "(Results.rows() gives the same rows as plain records without it)"
)


@dataclass(frozen=True)
class CaseRow:
    """One case's headline figures, as the summary table shows them but as numbers: latencies in milliseconds,
    `throughput` in inferences per second, `peak_rss_mb` the worker's peak memory. Figures are None when the case
    did not run (`status` is not ok, `error` says why). `speedup` is over the first backend of the case's
    comparison group, None where the table refuses one (`speedup_note`: precision, parity or interference;
    mixed when shown across effective precisions); `speedup_low`/`speedup_high` bound its 95% interval when the
    group ran in interleaved rounds. `extra` holds the other metrics of the registry (`metrics.METRICS`:
    achieved GFLOP/s, fraction of peak, a soak's memory growth), by key; to_pandas gives each a column."""

    model: str
    backend: str
    _: KW_ONLY  # the rest by keyword
    precision: str
    batch: int
    p50_ms: float | None
    p99_ms: float | None
    throughput: float | None
    peak_rss_mb: float | None
    status: str
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    speedup_note: str
    precision_effective: str | None
    shape_mode: str
    streams: int
    threads: int
    load_s: float | None
    samples: int
    error: str | None
    id: str
    extra: dict[str, float | None] = dataclasses.field(default_factory=dict)


def _row(case: CaseResult, speedup: Speedup | None) -> CaseRow:
    """The case's row: every registry metric, the typed fields by name, the rest in `extra`."""
    from infermeter.figures.metric_registry import values_of

    values = values_of(case)
    stats = case.latency_ms
    paired = speedup.paired if speedup is not None else None
    return CaseRow(
        model=case.model,
        backend=case.backend,
        precision=case.precision,
        batch=case.batch,
        p50_ms=values.pop("p50_ms"),
        p99_ms=values.pop("p99_ms"),
        throughput=values.pop("throughput"),
        peak_rss_mb=values.pop("peak_rss_mb"),
        status=case.status,
        speedup=speedup.ratio if speedup is not None else None,
        speedup_low=paired.ci_low if paired is not None else None,
        speedup_high=paired.ci_high if paired is not None else None,
        speedup_note=speedup.mark if speedup is not None else "",
        precision_effective=case.precision_effective,
        shape_mode=case.shape_mode,
        streams=case.streams,
        threads=case.threads,
        load_s=values.pop("load_s"),
        samples=stats.count if stats else 0,
        error=case.error,
        id=case.id,
        extra=values,
    )


class Results:
    """The cases of one bench run or results file (`data`, the same ResultsFile the CLI reads and writes), with
    the CLI's table, rows for pandas, and the CLI's save, report and compare. `path` is where it was read from or
    last saved (None for a run kept in memory). `allow_mixed_precision` shows speedups across effective
    precisions (marked), as the CLI's --allow-mixed-precision."""

    def __init__(self, data: ResultsFile, path: Path | None = None, allow_mixed_precision: bool = False) -> None:
        self.data = data
        self.path = path
        self.allow_mixed_precision = allow_mixed_precision

    @property
    def cases(self) -> list[CaseResult]:
        """Every case, in the order it ran (the full record: samples, warnings, interference, ...)."""
        return self.data.cases

    def rows(self) -> list[CaseRow]:
        """One CaseRow per case: the summary table's figures as numbers."""
        from infermeter.report.summary import speedups

        ratios = speedups(self.cases, self.allow_mixed_precision)
        return [_row(case, ratios.get(case.id)) for case in self.cases]

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame, one row per case (columns: CaseRow's fields, then each key of its
        `extra`). ImportError naming the install line when pandas is missing."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(PANDAS_MISSING) from None
        from infermeter.figures.metric_registry import STORED

        rows = self.rows()
        columns = [f.name for f in dataclasses.fields(CaseRow) if f.name != "extra"]
        extra = [metric.key for metric in STORED if metric.key not in columns]  # what CaseRow.extra holds
        records = [[getattr(row, name) for name in columns] + [row.extra[key] for key in extra] for row in rows]
        return pd.DataFrame(records, columns=columns + extra)

    def table(self) -> str:
        """The summary table as `infermeter bench` prints it (constant columns in the caption), with its
        per-shape table, warnings and footnotes, as plain text."""
        from infermeter.report.summary import summary_table
        from infermeter.report.terminal import print_summary, render_text

        table = summary_table(self.cases, self.allow_mixed_precision)
        return render_text(lambda console: print_summary(table, self.cases, console))

    def save(self, path: str | Path) -> Path:
        """Write the results file (the CLI's JSON, readable by `infermeter report` and `compare`) atomically;
        it becomes `path`."""
        from infermeter.results.io import write_results

        target = Path(path)
        write_results(target, self.data)
        self.path = target
        return target

    def report(
        self, path: str | Path, format: str | None = None, explain: ExplainRecord | str | Path | None = None
    ) -> Path:
        """Write the report `infermeter report` writes: html, md or csv (default: from the suffix). `explain` (a
        record from `infermeter.explain(...)`, or its JSON file) adds the HTML report's Explain section."""
        from infermeter.core.errors import UsageError
        from infermeter.core.files import write_text_atomically
        from infermeter.report.merged import SourceFile, merge_results
        from infermeter.report.render import format_of, render

        target = Path(path)
        fmt = format or format_of(target)
        if fmt not in ("html", "md", "csv"):
            raise UsageError(f"report format {fmt!r} is not one of html, md, csv (for the console: table())")
        merged = merge_results([SourceFile(str(self.path or "infermeter.bench"), self.data)])
        if isinstance(explain, str | Path):
            explain = read_explain(Path(explain))
        write_text_atomically(target, render(merged, fmt, self.allow_mixed_precision, explain))
        return target

    def compare(
        self,
        new: Results | str | Path,
        metric: str = "p50",
        threshold: float | str = 0.05,
        alpha: float = 0.01,
    ) -> Comparison:
        """`infermeter compare` with these results as BASE and `new` (Results or a results file) as NEW: each
        paired case's new/base ratio, interval, p-value and verdict. `comparison.regressions` holds what would
        fail the CLI's gate (slower beyond `threshold`, e.g. 0.05 or "5%", and significant at `alpha`)."""
        from infermeter.compare.verdict import METRICS, compare_results
        from infermeter.core.errors import UsageError
        from infermeter.core.validation import check_gate

        if metric not in METRICS:
            raise UsageError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
        limit = check_gate(str(threshold), alpha, lambda key: key)
        other = new if isinstance(new, Results) else load_results(new)
        return compare_results(self.data, other.data, metric, limit, alpha, self.allow_mixed_precision)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        ok = sum(case.ok for case in self.cases)
        where = f" from {self.path}" if self.path is not None else ""
        return f"<Results: {len(self.cases)} case(s), {ok} ok{where}>"


def load_results(path: str | Path, allow_mixed_precision: bool = False) -> Results:
    """A results file (written by `infermeter bench`, `infermeter.bench` or Results.save) as Results;
    ResultsError when it cannot be read."""
    from infermeter.results.io import read_results

    return Results(read_results(Path(path)), Path(path), allow_mixed_precision)


def comparison_table(comparison: Comparison) -> str:
    """A comparison as `infermeter compare` prints it (table, caveats, unpaired cases, verdict), as plain text."""
    from infermeter.report.terminal import print_comparison, render_text

    return render_text(lambda console: print_comparison(comparison, console))
