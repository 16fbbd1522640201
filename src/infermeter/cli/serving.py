"""`infermeter load URL --api openai`: a serving sweep against an OpenAI-compatible server (concurrency levels,
or Poisson request rates), saved after every level, printed as a table per sweep with the knee and the max level
under the SLO."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import parse_positive_ints, require_positive, split_values, stderr, stdout
from infermeter.errors import UsageError
from infermeter.generate.metrics import SLO
from infermeter.results.schema import CaseResult, ResultsFile, now_iso

if TYPE_CHECKING:
    from infermeter.generate.openai_bench import EndpointSettings


@dataclass(frozen=True)
class SweepFlags:
    """The sweep's own flags of `load --api openai` (the request shape comes in EndpointSettings)."""

    concurrency: str | None
    scenario_sweep: bool
    rates: str | None
    server_metrics: bool
    metrics_interval_s: float
    slo_attainment: float
    seed: int
    series: str | None = None


def sweep_levels(flags: SweepFlags) -> tuple[str, tuple[float, ...]]:
    """(mode, levels) from the flags: --rates gives a Poisson rate sweep; --scenario sweep with --concurrency N
    gives 1, 2, 4 … N; --concurrency 1,4,16 gives those levels."""
    from infermeter.generate.serving_sweep import doubling_levels

    if flags.rates is not None:
        if flags.concurrency is not None or flags.scenario_sweep:
            raise UsageError("--rates is a Poisson rate sweep: give it without --concurrency or --scenario sweep")
        rates = []
        for item in split_values([flags.rates]):
            try:
                rates.append(float(item))
            except ValueError:
                raise UsageError(f"--rates {item!r} is not a number; write e.g. --rates 0.5,1,2") from None
            require_positive(rates[-1], "--rates")
        if not rates:
            raise UsageError("--rates needs at least one rate, e.g. --rates 0.5,1,2")
        return "rate", tuple(sorted(rates))
    if flags.scenario_sweep:
        top = parse_positive_ints([flags.concurrency or "16"], "--concurrency")
        if len(top) != 1:
            raise UsageError("--scenario sweep takes the top level alone, e.g. --concurrency 64 (1, 2, 4 … 64)")
        return "concurrency", tuple(float(level) for level in doubling_levels(top[0]))
    levels = parse_positive_ints([flags.concurrency or "1,4,16"], "--concurrency")
    if not levels:
        raise UsageError("--concurrency needs at least one level, e.g. --concurrency 1,4,16")
    return "concurrency", tuple(float(level) for level in levels)


def level_table(cases: list[CaseResult], title: str) -> list[Table]:
    """One rich table per sweep in `cases` (the same rows as the markdown report)."""
    from infermeter.generate.serving_verdict import verdicts
    from infermeter.report.serving import SERVING_COLUMNS, level_row, sweep_title

    tables = []
    for verdict in verdicts(cases):
        table = Table(title=escape(f"{title}: {sweep_title(verdict)}"), title_justify="left", header_style="bold")
        for column in SERVING_COLUMNS:
            table.add_column(column, justify="left" if column in ("level", "status") else "right")
        for point in verdict.points:
            cells = level_row(point, verdict)
            cells[1] = cells[1][:160]
            table.add_row(*(escape(cell) for cell in cells))
        tables.append(table)
    return tables


def run_openai_sweep(endpoint: EndpointSettings, flags: SweepFlags, output: Path | None) -> None:
    """Run the sweep, saving after each level; print the tables, the knee and the SLO verdict; exit 1 when no
    level had a successful request."""
    from infermeter.generate.serving_sweep import SweepSettings, run_sweep
    from infermeter.generate.serving_verdict import verdicts
    from infermeter.report.serving import failure_notes
    from infermeter.results.env import collect_environment
    from infermeter.results.io import write_results

    require_positive(flags.metrics_interval_s, "--metrics-interval")
    if not 0 < flags.slo_attainment <= 1:
        raise UsageError(f"--slo-attainment {flags.slo_attainment:g} must be a fraction in (0, 1], e.g. 0.9")
    mode, levels = sweep_levels(flags)
    if flags.server_metrics:
        from infermeter.extras import require_extra

        require_extra("serve", ["prometheus_client"], "--server-metrics (its Prometheus text parser)")
    settings = SweepSettings(
        endpoint,
        mode,
        levels,
        flags.series or "",
        flags.slo_attainment,
        flags.server_metrics,
        flags.metrics_interval_s,
        flags.seed,
    )
    results = ResultsFile(created=now_iso(), environment=collect_environment(), command=["infermeter", *sys.argv[1:]])

    def on_level(result: CaseResult) -> None:
        results.cases.append(result)
        if output is not None:
            write_results(output, results)  # what was measured is on disk before the next level starts
        from infermeter.results.records import ServingLevel, read_record

        level = read_record(result, ServingLevel)
        name = f"{mode} {level.level:g}" if level else mode
        if result.status != "ok":
            line = f"[red]{escape(result.error or '')}[/]"
        else:
            line = f"done; [yellow]{escape(level.failure)}[/]" if level and level.failure else "done"
        stderr.print(f"  {escape(name)}: {line}", soft_wrap=True)

    run_sweep(settings, on_level)
    endpoint_desc = f"{endpoint.url}: prompt {endpoint.prompt_len} words, max {endpoint.gen_len} tokens"
    for table in level_table(results.cases, endpoint_desc):
        stdout.print(table)
    for verdict in verdicts(results.cases):
        for line in verdict.lines() + failure_notes(verdict):
            stdout.print(escape(line), soft_wrap=True)
    if output:
        stdout.print(f"results: {escape(str(output))}")
    if not any(r.status == "ok" for r in results.cases):
        sys.exit(1)


def endpoint_settings(
    url: str,
    model_name: str | None,
    chat: bool,
    prompt_len: int,
    gen_len: int,
    requests: int | None,
    request_timeout_s: float,
    ignore_eos: bool,
    api_key: str | None,
    slo: SLO,
) -> EndpointSettings:
    """The EndpointSettings of the flags, each checked."""
    from infermeter.generate.openai_bench import EndpointSettings

    for value, flag in ((prompt_len, "--prompt-len"), (gen_len, "--gen-len"), (request_timeout_s, "--timeout")):
        require_positive(value, flag)
    if requests is not None:
        require_positive(requests, "--requests")
    return EndpointSettings(
        url=url,
        model=model_name or "default",
        api="chat" if chat else "completions",
        prompt_len=prompt_len,
        gen_len=gen_len,
        requests=requests,
        request_timeout_s=request_timeout_s,
        ignore_eos=ignore_eos,
        api_key=api_key,
        slo=slo,
    )
