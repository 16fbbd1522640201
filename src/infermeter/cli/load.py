"""`infermeter load` (MLPerf-LoadGen-style scenarios against a served model) and `infermeter tune-batching`."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import parse_positive_ints, require_positive, split_values, stderr, stdout
from infermeter.cli.generate import reject_flags
from infermeter.cli.optimize_serve import joined
from infermeter.cli.serve import BACKEND_OPTION, serve_options
from infermeter.errors import UsageError
from infermeter.extras import SERVE_MODULES, require_extra
from infermeter.models.input_flags import parse_input_flags
from infermeter.results.schema import now_iso
from infermeter.serve import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_BATCHES,
    DEFAULT_MAX_DELAYS_MS,
    DEFAULT_POINT_DURATION_S,
    DEFAULT_WORKERS,
)

if TYPE_CHECKING:
    from infermeter.serve.driver import LoadTarget
    from infermeter.serve.summary import LoadSummary
    from infermeter.serve.tune import BatchPolicy

SCENARIOS = ("single-stream", "server", "offline", "sweep")


def _model_args(
    model: str,
    backend: str,
    precision: str,
    threads: int,
    inputs: tuple[str, ...],
    option: tuple[str, ...],
    buckets: tuple[str, ...],
    max_queue: int,
    data: str | None = None,
) -> list[str]:
    args = [model, "--backend", backend, "--precision", precision, "--max-queue", str(max_queue)]
    if threads:
        args += ["--threads", str(threads)]
    if data:
        from infermeter.models.feeds_data import absolute_data_ref

        args += ["--data", absolute_data_ref(data)]
    for flag, values in (("--input", inputs), ("--option", option), ("--buckets", buckets)):
        for value in values:
            args += [flag, value]
    return args


@contextlib.contextmanager
def _served(target: str, backend: str | None, serve_args: list[str], protocol: str = "http") -> Iterator[str]:
    """The URL to load: TARGET itself, or a server this command starts for MODEL (stopped afterwards); with
    --protocol grpc, that server's gRPC address as grpc://HOST:PORT."""
    if target.startswith(("http://", "https://", "grpc://")):
        if backend:
            raise UsageError("--backend is for a MODEL target; a URL target is already served")
        if protocol == "grpc" and not target.startswith("grpc://"):
            raise UsageError(f"--protocol grpc: give the gRPC address as grpc://HOST:PORT, not {target}")
        yield target
        return
    if not backend:
        raise UsageError(f"TARGET {target!r} is not a URL: give --backend to serve it here (e.g. -b onnxruntime)")
    require_extra("serve", SERVE_MODULES, f"serving {target} here (a MODEL target; a URL target needs nothing)")
    from infermeter.serve.server import spawn_server

    with stderr.status(f"serving {escape(target)} with {escape(backend)} on 127.0.0.1 …"):
        server = spawn_server(serve_args, grpc=protocol == "grpc")
    try:
        yield f"grpc://{server.grpc_address}" if protocol == "grpc" else server.url
    finally:
        server.stop()


def _row(summary: LoadSummary) -> list[str]:
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
        f"{summary.throughput:.1f}",
        ms(stats.p50 if stats else None),
        ms(stats.p90 if stats else None),
        ms(stats.p99 if stats else None),
        ms(stats.p999 if stats else None),
        str(errors),
        ms(summary.lag_p99_ms),
        verdict,
    ]


def _print_summaries(summaries: list[LoadSummary], title: str) -> None:
    table = Table(title=escape(title), header_style="bold", title_justify="left")
    headers = ["run", "target QPS", "QPS", "samples/s", "P50 ms", "P90 ms", "P99 ms", "P99.9 ms"]
    headers += ["errors", "lag P99 ms", "result"]
    for header in headers:
        table.add_column(header, justify="left" if header in ("run", "result") else "right", no_wrap=True)
    for summary in summaries:
        cells = _row(summary)
        colour = "green" if summary.valid else "red"
        table.add_row(*(escape(c) for c in cells[:-1]), f"[{colour}]{cells[-1]}[/]")
    stdout.print(table)
    for summary in summaries:
        for reason in summary.reasons:
            stdout.print(f"[red]INVALID[/] {escape(summary.label())}: {escape(reason)}", soft_wrap=True)
        for warning in summary.warnings:
            stdout.print(f"[yellow]warning[/] {escape(summary.label())}: {escape(warning.message)}", soft_wrap=True)


def _write(path: Path | None, summaries: list[LoadSummary], target: LoadTarget, started: str, url: str) -> None:
    if path is None:
        return
    from infermeter.backends.registry import backend_names, get_backend
    from infermeter.results.env import collect_environment
    from infermeter.results.io import write_results
    from infermeter.results.schema import ResultsFile
    from infermeter.serve.summary import case_result

    backend = target.backend
    version = get_backend(backend).version() if backend in backend_names() else None
    options = {"serve." + k: str(v) for k, v in (target.metadata.get("parameters") or {}).items() if k != "backend"}
    if target.data is not None:  # what the requests carried: part of the run's identity
        options["load.data"] = target.data.describe()
    cases = [
        case_result(s, target.model_name, backend, version, target.precision, target.precision_effective, options,
                    started, url)
        for s in summaries
    ]  # fmt: skip
    results = ResultsFile(created=started, environment=collect_environment(), cases=cases)
    results.command = ["infermeter", *sys.argv[1:]]
    write_results(path, results)
    stdout.print(f"results: {escape(str(path))}")


def _one_int(text: str, flag: str) -> int:
    """The single positive integer of a flag that takes a list only with --api openai."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not an integer (a list such as 1,4,16 needs --api openai)") from None
    require_positive(value, flag)
    return value


def _load_openai(ctx: click.Context, url: str, chat: bool) -> None:
    """`load URL --api openai`: refuse the KServe-only flags, then run the serving sweep."""
    from infermeter.cli.generate import make_slo
    from infermeter.cli.serving import SweepFlags, endpoint_settings, run_openai_sweep

    params = ctx.params
    kserve_only = [p.name for p in ctx.command.params if p.name and p.name not in {*OPENAI_PARAMS, *OPENAI_ONLY}]
    reject_flags(ctx, kserve_only, "to --api kserve, not --api openai")
    scenario_given = ctx.get_parameter_source("scenario") not in (None, click.core.ParameterSource.DEFAULT)
    if scenario_given and params["scenario"] != "sweep":
        raise UsageError(
            f"--api openai takes --scenario sweep only (1, 2, 4 … --concurrency), not {params['scenario']}"
        )
    timeout_given = ctx.get_parameter_source("timeout") not in (None, click.core.ParameterSource.DEFAULT)
    endpoint = endpoint_settings(
        url,
        params["model_name"],
        chat,
        params["prompt_len"],
        params["gen_len"],
        params["requests"],
        params["timeout"] if timeout_given else 60.0,
        params["ignore_eos"],
        # An OpenAI-compatible server's key is conventionally in $OPENAI_API_KEY.
        params["api_key"] or os.environ.get("OPENAI_API_KEY") or None,
        make_slo(params["slo_ttft_ms"], params["slo_tpot_ms"]),
    )
    flags = SweepFlags(
        params["concurrency"],
        scenario_given,
        params["rates"],
        params["server_metrics"],
        params["metrics_interval"],
        params["slo_attainment"],
        params["seed"],
        params["series"],
    )
    run_openai_sweep(endpoint, flags, params["output"])


# With --api openai, load takes these parameters (the others drive the KServe load generator and are refused).
OPENAI_PARAMS = {"target", "api", "concurrency", "model_name", "api_key", "timeout", "output", "scenario", "seed"}
OPENAI_ONLY = (
    "prompt_len",
    "gen_len",
    "requests",
    "slo_ttft_ms",
    "slo_tpot_ms",
    "ignore_eos",
    "rates",
    "server_metrics",
    "metrics_interval",
    "slo_attainment",
    "series",
)


@click.command("load")
@click.argument("target")
@click.option(
    "--api",
    type=click.Choice(["kserve", "openai", "openai-chat"]),
    default="kserve",
    show_default=True,
    help="kserve: the Open Inference Protocol (v2); openai / openai-chat: an OpenAI-compatible LLM server, "
    "streaming /v1/completions or /v1/chat/completions.",
)
@click.option("--backend", "-b", help="Serve TARGET (a model) with this backend first; omit for a URL.")
@click.option(
    "--protocol",
    type=click.Choice(["http", "grpc"]),
    default="http",
    show_default=True,
    help="--api kserve: KServe v2 over HTTP or gRPC (a grpc://HOST:PORT target is gRPC already).",
)
@click.option("--scenario", type=click.Choice(SCENARIOS), default="server", show_default=True)
@click.option("--qps", type=float, help="Target queries per second (server scenario; top of a QPS sweep).")
@click.option(
    "--concurrency",
    help="Requests in flight (offline, sweep; default 16); --api openai: levels, e.g. 1,4,16 (the default).",
)
@click.option("--duration", type=float, default=10.0, show_default=True, help="Seconds per run.")
@click.option("--slo-p99-ms", type=float, help="Latency SLO: a run is VALID only when its P99 is within it.")
@click.option("--find-peak", is_flag=True, help="Search the highest QPS whose P99 meets --slo-p99-ms.")
@click.option("--steps", type=int, default=5, show_default=True, help="QPS steps of a sweep with --qps.")
@click.option("--batch", type=int, default=1, show_default=True, help="Rows per request.")
@click.option("--model-name", help="The model's protocol name on a URL target (default: from the URL or /v2).")
@click.option("--json", "use_json", is_flag=True, help="Send JSON tensors instead of the binary extension.")
@click.option("--api-key", help="API key of the target (default: $INFERMETER_API_KEY; --api openai: $OPENAI_API_KEY).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the arrivals and inputs.")
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds to wait for stragglers (--api openai: seconds per request, default 60).",
)
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Results file for report/compare.")
@serve_options
@click.option("--prompt-len", type=int, default=64, show_default=True, help="--api openai: prompt words.")
@click.option("--gen-len", type=int, default=32, show_default=True, help="--api openai: max_tokens per request.")
@click.option("--requests", type=int, help="--api openai: requests per level (default: max(8, 2 × concurrency)).")
@click.option("--slo-ttft-ms", type=float, help="--api openai: goodput SLO, time to first token at most this.")
@click.option("--slo-tpot-ms", type=float, help="--api openai: goodput SLO, time per output token at most this.")
@click.option("--ignore-eos", is_flag=True, help="--api openai: send ignore_eos (vLLM, llama.cpp) for exact lengths.")
@click.option("--rates", help="--api openai: a Poisson rate sweep instead, requests/s per level, e.g. 0.5,1,2.")
@click.option(
    "--server-metrics", is_flag=True, help="--api openai: read the server's /metrics and /slots while each level runs."
)
@click.option("--metrics-interval", type=float, default=0.5, show_default=True, help="--server-metrics: seconds.")
@click.option(
    "--slo-attainment",
    type=float,
    default=0.9,
    show_default=True,
    help="--api openai: the SLO holds at a level when this fraction of its requests meet it.",
)
@click.option("--series", help="--api openai: the sweep's name in tables and charts (default: the URL).")
@click.pass_context
def load(
    ctx: click.Context,
    target: str,
    api: str,
    backend: str | None,
    protocol: str,
    scenario: str,
    qps: float | None,
    concurrency: str | None,
    duration: float,
    slo_p99_ms: float | None,
    find_peak: bool,
    steps: int,
    batch: int,
    model_name: str | None,
    use_json: bool,
    api_key: str | None,
    seed: int,
    timeout: float,
    output: Path | None,
    precision: str,
    threads: int,
    inputs: tuple[str, ...],
    data: str | None,
    option: tuple[str, ...],
    buckets: tuple[str, ...],
    max_queue: int,
    prompt_len: int,
    gen_len: int,
    requests: int | None,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    ignore_eos: bool,
    rates: str | None,
    server_metrics: bool,
    metrics_interval: float,
    slo_attainment: float,
    series: str | None,
) -> None:
    """Put TARGET under load, MLPerf-LoadGen style; TARGET is a served URL (http://HOST:PORT[/v2/models/NAME], or
    grpc://HOST:PORT for KServe v2 gRPC) or a MODEL served here with --backend (over gRPC with --protocol grpc).

    With --api openai, TARGET is the URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp server): streamed
    completions at each --concurrency level (or each Poisson --rates level) give TTFT, TPOT, tokens/s, requests/s,
    goodput under the SLO, errors, the knee and the highest level where the SLO held (docs/llm-serving.md).

    Scenarios: server (Poisson arrivals at --qps; latency from each request's scheduled time), single-stream
    (one request in flight), offline (--concurrency requests in flight), sweep (QPS steps up to --qps, or
    concurrency 1, 2, 4 … --concurrency). Each run is VALID or INVALID against --slo-p99-ms, with the reason.
    """
    if api != "kserve":
        _load_openai(ctx, target, api == "openai-chat")
        return
    from infermeter.serve.driver import find_peak as search_peak
    from infermeter.serve.driver import prepare_target, run_once, sweep_steps
    from infermeter.serve.protocol import API_KEY_VARIABLE
    from infermeter.serve.summary import summarize

    reject_flags(ctx, OPENAI_ONLY, "to --api openai (add --api openai)")
    concurrency_n = _one_int(concurrency or "16", "--concurrency")
    require_positive(duration, "--duration")
    require_positive(batch, "--batch")
    require_positive(steps, "--steps")
    require_positive(timeout, "--timeout")
    if qps is not None:
        require_positive(qps, "--qps")
    if slo_p99_ms is not None:
        require_positive(slo_p99_ms, "--slo-p99-ms")
    if find_peak and slo_p99_ms is None:
        raise UsageError("--find-peak needs --slo-p99-ms: the peak is the highest QPS whose P99 meets it")
    if scenario == "server" and not qps and not find_peak:
        raise UsageError("the server scenario needs --qps (or --find-peak with --slo-p99-ms)")
    key = api_key or os.environ.get(API_KEY_VARIABLE) or None
    overrides, values = parse_input_flags(inputs)
    serve_args = _model_args(target, backend or "", precision, threads, inputs, option, buckets, max_queue, data)
    started = now_iso()
    with _served(target, backend, [*serve_args, "--max-batch", str(max(8, batch))], protocol) as url:
        prepared = prepare_target(
            url, model_name, batch, overrides, use_json, key, seed, input_values=values, data=data
        )
        for note in prepared.notes:
            stderr.print(f"note: {escape(note)}", soft_wrap=True)
        label = f"{prepared.model_name} at {url} ({prepared.backend})"
        summaries: list[LoadSummary] = []

        def progress(summary: LoadSummary) -> None:
            stats = summary.stats
            p99 = f"P99 {stats.p99:.2f} ms" if stats else "no answers"
            verdict = "VALID" if summary.valid else "INVALID"
            stderr.print(f"  {escape(summary.label())}: {summary.run.achieved_qps:.1f} QPS, {p99}, {verdict}")

        if find_peak:
            assert slo_p99_ms is not None
            best, probes = search_peak(prepared, slo_p99_ms, duration, seed, concurrency_n, on_probe=progress)
            summaries = probes
            _print_summaries(probes, f"peak search: {label}, SLO P99 ≤ {slo_p99_ms:g} ms")
            if best is None:
                stdout.print(f"[red]no QPS met the SLO[/] of {slo_p99_ms:g} ms (lowest probe still INVALID)")
            else:
                stdout.print(
                    f"peak: [bold]{best.run.target_qps:.1f} QPS[/] with P99 "
                    f"{best.stats.p99 if best.stats else float('nan'):.2f} ms ≤ {slo_p99_ms:g} ms (VALID)"
                )
        elif scenario == "sweep":
            for kind, value in sweep_steps(qps, concurrency_n, steps):
                run = run_once(
                    prepared, kind, duration, qps=value, concurrency=int(value), seed=seed, timeout_s=timeout
                )
                summaries.append(summarize(run, slo_p99_ms, batch, seed))
                progress(summaries[-1])
            _print_summaries(summaries, f"sweep: {label}")
        else:
            run = run_once(
                prepared, scenario, duration, qps=qps, concurrency=concurrency_n, seed=seed, timeout_s=timeout
            )
            summaries.append(summarize(run, slo_p99_ms, batch, seed))
            _print_summaries(summaries, f"{scenario}: {label}")
        _write(output, summaries, prepared, started, url)


@click.command("tune-batching")
@click.argument("model")
@BACKEND_OPTION
@serve_options
@click.option("--slo-p99-ms", type=float, required=True, help="Latency SLO the recommendation must meet.")
@click.option("--max-batch", "max_batches", multiple=True, default=[joined(DEFAULT_MAX_BATCHES)], show_default=True)
@click.option("--max-delay-ms", "max_delays", multiple=True, default=[joined(DEFAULT_MAX_DELAYS_MS)], show_default=True)
@click.option("--workers", "workers_list", multiple=True, default=[joined(DEFAULT_WORKERS)], show_default=True)
@click.option("--duration", type=float, default=DEFAULT_POINT_DURATION_S, show_default=True,
              help="Seconds per load point.")  # fmt: skip
@click.option("--concurrency", type=int, default=DEFAULT_CONCURRENCY, show_default=True,
              help="Most requests in flight.")  # fmt: skip
@click.option("--no-check", is_flag=True, help="Skip the Poisson check of the recommendation.")
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), help="Results file of every point (for deploy --load)."
)
def tune_batching(
    model: str,
    backend: str,
    precision: str,
    threads: int,
    inputs: tuple[str, ...],
    data: str | None,
    option: tuple[str, ...],
    buckets: tuple[str, ...],
    max_queue: int,
    slo_p99_ms: float,
    max_batches: tuple[str, ...],
    max_delays: tuple[str, ...],
    workers_list: tuple[str, ...],
    duration: float,
    concurrency: int,
    no_check: bool,
    output: Path | None,
) -> None:
    """Find the batching policy (max-batch × max-delay × workers) with the highest throughput whose P99 meets
    --slo-p99-ms: each policy is served on 127.0.0.1 and measured at rising concurrency; the pick is then
    checked under Poisson arrivals."""
    require_extra("serve", SERVE_MODULES, "`infermeter tune-batching`")
    from infermeter.serve.tune import CHECK_MIN_DURATION_S, check_pick, measure_policy, policies, recommend

    require_positive(slo_p99_ms, "--slo-p99-ms")
    require_positive(duration, "--duration")
    require_positive(concurrency, "--concurrency")
    delays = []
    for item in split_values(max_delays):
        try:
            delays.append(float(item))
        except ValueError:
            raise UsageError(f"--max-delay-ms {item!r} is not a number") from None
        require_positive(delays[-1], "--max-delay-ms", allow_zero=True)
    grid = policies(
        parse_positive_ints(max_batches, "--max-batch"), delays, parse_positive_ints(workers_list, "--workers")
    )
    model_args = _model_args(model, backend, precision, threads, inputs, option, buckets, max_queue, data)

    def on_point(policy: BatchPolicy, summary: LoadSummary) -> None:
        stats = summary.stats
        p99 = f"P99 {stats.p99:.2f} ms" if stats else "no answers"
        stderr.print(f"  {policy.label()} x{summary.run.concurrency}: {summary.throughput:.1f}/s, {p99}")

    results = []
    started = now_iso()
    for policy in grid:
        stderr.print(f"policy {policy.label()}")
        results.append(measure_policy(policy, model_args, slo_p99_ms, duration, concurrency, on_point))
    table = Table(title=f"tune-batching {escape(model)} ({escape(backend)}), SLO P99 ≤ {slo_p99_ms:g} ms",
                  header_style="bold", title_justify="left")  # fmt: skip
    for header in ("policy", "curve (concurrency: samples/s @ P99 ms)", "best samples/s", "P50 ms", "P99 ms"):
        table.add_column(header, justify="left" if header.startswith(("policy", "curve")) else "right")
    pick = recommend(results)
    if output is not None:
        from infermeter.results.io import write_results
        from infermeter.serve.tune import tuning_results

        write_results(output, tuning_results(results, pick, model, backend, precision, started))
        stdout.print(f"results: {escape(str(output))} (the pick is marked for `infermeter deploy --load`)")
    for result in results:
        curve = ", ".join(
            f"{s.run.concurrency}: {s.throughput:.0f} @ {s.stats.p99:.1f}" if s.stats else f"{s.run.concurrency}: -"
            for s in result.curve
        )
        best = result.best
        cells = [
            result.policy.label() + (" ← pick" if result is pick else ""),
            curve,
            f"{best.throughput:.1f}" if best else "-",
            f"{best.stats.p50:.2f}" if best and best.stats else "-",
            f"{best.stats.p99:.2f}" if best and best.stats else "-",
        ]
        table.add_row(*(escape(c) for c in cells))
    stdout.print(table)
    if pick is None or pick.best is None:
        stdout.print(f"[red]no policy met the SLO[/] of {slo_p99_ms:g} ms even at concurrency 1; relax the SLO")
        raise SystemExit(1)
    best = pick.best
    assert best.stats is not None
    stdout.print(
        f"recommendation: [bold]{escape(' '.join(pick.policy.serve_args()))}[/] — {best.throughput:.1f} samples/s "
        f"at concurrency {best.run.concurrency}, P50 {best.stats.p50:.2f} ms, P99 {best.stats.p99:.2f} ms"
    )
    if not no_check:
        check = check_pick(pick, model_args, slo_p99_ms, max(duration, CHECK_MIN_DURATION_S))
        _print_summaries([check], "check of the pick under Poisson arrivals (90% of its throughput)")
