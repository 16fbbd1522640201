"""`infermeter llm load URL`: a serving sweep against an OpenAI-compatible server (concurrency levels, or Poisson
request rates), saved after every level, printed as a table per sweep with the knee and the max level under the
SLO."""

from __future__ import annotations

import os
import sys
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from infermeter.cli.common import parse_positive_ints, require_positive, split_values, stderr, stdout
from infermeter.cli.generate import make_slo
from infermeter.cli.serving_options import FIND_PEAK_HELP, arrivals_option, openai_options, slo_option
from infermeter.core.errors import UsageError
from infermeter.llm.generation_metrics import SLO

if TYPE_CHECKING:
    from infermeter.llm.openai_bench import EndpointSettings
    from infermeter.llm.serving_run import LevelDone
    from infermeter.llm.serving_sweep import SweepSettings


@dataclass(frozen=True)
class SweepFlags:
    """The sweep's own flags of `llm load` (the request shape comes in EndpointSettings)."""

    concurrency: str | None
    scenario_sweep: bool
    _: KW_ONLY  # the rest by keyword
    rates: str | None
    server_metrics: bool
    metrics_interval_s: float
    slo_attainment: float
    seed: int
    series: str | None = None
    arrivals: str = "poisson"


def sweep_levels(flags: SweepFlags) -> tuple[str, tuple[float, ...]]:
    """(mode, levels) from the flags: --rates gives a Poisson rate sweep; --scenario sweep with --concurrency N
    gives 1, 2, 4 … N; --concurrency 1,4,16 gives those levels."""
    from infermeter.load.levels import doubling_levels

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


def sweep_settings(endpoint: EndpointSettings, flags: SweepFlags) -> SweepSettings:
    """The sweep of the flags, each checked (UsageError) before anything is sent."""
    from infermeter.llm.serving_sweep import SweepSettings

    require_positive(flags.metrics_interval_s, "--metrics-interval")
    if not 0 < flags.slo_attainment <= 1:
        raise UsageError(f"--slo-attainment {flags.slo_attainment:g} must be a fraction in (0, 1], e.g. 0.9")
    mode, levels = sweep_levels(flags)
    if flags.server_metrics:
        from infermeter.core.extras import require_extra

        require_extra("serve", ["prometheus_client"], "--server-metrics (its Prometheus text parser)")
    return SweepSettings(
        endpoint=endpoint,
        mode=mode,
        levels=levels,
        series=flags.series or "",
        slo_target=flags.slo_attainment,
        server_metrics=flags.server_metrics,
        metrics_interval_s=flags.metrics_interval_s,
        seed=flags.seed,
        arrivals=flags.arrivals,
    )


def run_openai_sweep(settings: SweepSettings, output: Path | None, find_peak: bool = False) -> None:
    """Run the sweep (or, with `find_peak`, the peak search from its one rate), saving after each level; print
    the tables, the knee and the SLO verdict (and the peak with its interval); exit 1 when no level had a
    successful request."""
    from infermeter.llm.serving_run import run_serving
    from infermeter.llm.serving_verdict import verdicts
    from infermeter.report.serving import failure_notes
    from infermeter.report.terminal import serving_tables

    run = run_serving(settings, output, ["infermeter", *sys.argv[1:]], find_peak, _progress)
    endpoint = settings.endpoint
    endpoint_desc = f"{endpoint.url}: prompt {endpoint.prompt_len} words, max {endpoint.gen_len} tokens"
    for table in serving_tables(run.results.cases, endpoint_desc):
        stdout.print(table)
    for verdict in verdicts(run.results.cases):
        for line in verdict.lines() + failure_notes(verdict):
            stdout.print(escape(line), soft_wrap=True)
    if run.search is not None:
        stdout.print(escape(f"{settings.name()}: {run.search.line('requests/s')}"), soft_wrap=True)
    if output:
        stdout.print(f"results: {escape(str(output))}")
    if not run.any_ok:
        sys.exit(1)


def _progress(done: LevelDone) -> None:
    """One level measured, on stderr."""
    if done.error is not None:
        line = f"[red]{escape(done.error)}[/]"
    else:
        line = f"done; [yellow]{escape(done.failure)}[/]" if done.failure else "done"
    stderr.print(f"  {escape(done.name)}: {line}", soft_wrap=True)


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
    from infermeter.llm.openai_bench import EndpointSettings

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


def _llm_slo(params: dict[str, Any]) -> SLO:
    """The generation SLO of --slo-ttft-ms / --slo-tpot-ms and --slo NAME=MS (a bound given both ways: exit 2)."""
    from infermeter.load.slo import parse_slo

    bounds = parse_slo(params.get("slo") or ())
    for name, flag in (("ttft_ms", "slo_ttft_ms"), ("tpot_ms", "slo_tpot_ms")):
        if getattr(bounds, name) is not None and params[flag] is not None:
            raise UsageError(f"--slo {name} and --{flag.replace('_', '-')} set the same bound: give one")
    slo = make_slo(params["slo_ttft_ms"], params["slo_tpot_ms"])
    return SLO(slo.ttft_ms or bounds.ttft_ms, slo.tpot_ms or bounds.tpot_ms, bounds.latency_ms)


def _sweep_of(params: dict[str, Any], url: str, chat: bool, timeout_s: float, doubling: bool) -> SweepSettings:
    """The serving sweep of a command's flags (`params`, by name), each checked."""
    endpoint = endpoint_settings(
        url,
        params["model_name"],
        chat,
        params["prompt_len"],
        params["gen_len"],
        params["requests"],
        timeout_s,
        params["ignore_eos"],
        # An OpenAI-compatible server's key is conventionally in $OPENAI_API_KEY.
        params["api_key"] or os.environ.get("OPENAI_API_KEY") or None,
        _llm_slo(params),
    )
    flags = SweepFlags(
        concurrency=params["concurrency"],
        scenario_sweep=doubling,
        rates=params["rates"],
        server_metrics=params["server_metrics"],
        metrics_interval_s=params["metrics_interval"],
        slo_attainment=params["slo_attainment"],
        seed=params["seed"],
        series=params["series"],
        arrivals=params["arrivals"],
    )
    return sweep_settings(endpoint, flags)


@click.command("load")
@click.argument("url")
@click.option("--chat", is_flag=True, help="Stream /v1/chat/completions instead of /v1/completions.")
@click.option(
    "--scenario",
    type=click.Choice(["levels", "sweep"]),
    default="levels",
    show_default=True,
    help="levels: each --concurrency level; sweep: concurrency 1, 2, 4 … up to --concurrency N.",
)
@click.option("--concurrency", help="Requests in flight per level, e.g. 1,4,16 (the default; sweep: the top, 16).")
@click.option("--model-name", help="The model name sent in each request (default: `default`).")
@click.option("--api-key", help="API key of the server (default: $OPENAI_API_KEY).")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per request.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the prompts and arrivals.")
@arrivals_option()
@slo_option("")
@click.option("--find-peak", is_flag=True, help=FIND_PEAK_HELP)
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Results file for report/compare.")
@openai_options()
def llm_load(
    url: str, chat: bool, scenario: str, timeout: float, find_peak: bool, output: Path | None, **flags: Any
) -> None:
    """Load an OpenAI-compatible LLM server at URL (Ollama, vLLM, llama.cpp server) with streamed completions at
    each --concurrency level (or each Poisson --rates level): TTFT, TPOT, tokens/s, requests/s, goodput under the
    SLO, errors, the knee and the highest level where the SLO held (docs/llm-serving.md); --find-peak searches
    the highest rate where the SLO holds, from the one --rates rate down."""
    run_openai_sweep(_sweep_of(flags, url, chat, timeout, scenario == "sweep"), output, find_peak)
