"""The table of `load`'s runs (and `tune-batching`'s check): rates, goodput, percentiles, errors, the generator's
lag and VALID/INVALID, then each run's reasons and warnings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stdout

if TYPE_CHECKING:
    from infermeter.load.verdict import LoadSummary


def _row(summary: LoadSummary, goodput: bool) -> list[str]:
    stats = summary.stats
    run = summary.run

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    target = "-" if run.target_qps is None else f"{run.target_qps:.1f}"
    errors = sum(run.errors.values())
    verdict = "VALID" if summary.valid else "INVALID"
    return [
        summary.label(),
        target,
        f"{run.achieved_qps:.1f}",
        *(["-" if summary.goodput_qps is None else f"{summary.goodput_qps:.1f}"] if goodput else []),
        f"{summary.throughput:.1f}",
        ms(stats.p50 if stats else None),
        ms(stats.p90 if stats else None),
        ms(stats.p99 if stats else None),
        ms(stats.p999 if stats else None),
        str(errors),
        ms(summary.lag_p99_ms),
        verdict,
    ]


def print_summaries(summaries: list[LoadSummary], title: str) -> None:
    """The runs' table (QPS, goodput under --slo, samples/s, percentiles, errors, VALID/INVALID), then each run's
    reasons and warnings."""
    slo = next((s.slo_latency_ms for s in summaries if s.slo_latency_ms is not None), None)
    title += f"; goodput: requests per second within {slo:g} ms" if slo is not None else ""
    table = Table(title=escape(title), header_style="bold", title_justify="left")
    headers = ["run", "target QPS", "QPS", *(["goodput QPS"] if slo is not None else []), "samples/s"]
    headers += ["P50 ms", "P90 ms", "P99 ms", "P99.9 ms"]
    headers += ["errors", "lag P99 ms", "result"]
    for header in headers:
        table.add_column(header, justify="left" if header in ("run", "result") else "right", no_wrap=True)
    for summary in summaries:
        cells = _row(summary, slo is not None)
        colour = "green" if summary.valid else "red"
        table.add_row(*(escape(c) for c in cells[:-1]), f"[{colour}]{cells[-1]}[/]")
    stdout.print(table)
    for summary in summaries:
        for reason in summary.reasons:
            stdout.print(f"[red]INVALID[/] {escape(summary.label())}: {escape(reason)}", soft_wrap=True)
        for warning in summary.warnings:
            stdout.print(f"[yellow]warning[/] {escape(summary.label())}: {escape(warning.message)}", soft_wrap=True)
        if summary.run.server is not None:  # the server's own account, beside the client's figures
            stdout.print(f"{escape(summary.label())}: {escape(summary.run.server.line())}", soft_wrap=True)
