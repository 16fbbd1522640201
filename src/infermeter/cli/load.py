"""`infermeter load`: MLPerf-LoadGen-style scenarios against a served model (KServe v2, over HTTP or gRPC)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from infermeter.cli.common import RESHAPE_HELP, require_positive, stderr, stdout
from infermeter.cli.load_table import print_summaries
from infermeter.cli.serve_group import ServedModel, serving_options
from infermeter.cli.serving_options import FIND_PEAK_HELP, arrivals_option, slo_option
from infermeter.core.errors import BackendError, UsageError
from infermeter.core.extras import SERVE_MODULES, require_extra
from infermeter.models.input_flags import parse_input_flags
from infermeter.results.schema import now_iso
from infermeter.serve import SCENARIOS

if TYPE_CHECKING:
    from infermeter.load.driver import RunSettings
    from infermeter.load.target import LoadTarget
    from infermeter.load.verdict import LoadSummary


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


def _write(path: Path | None, summaries: list[LoadSummary], target: LoadTarget, started: str, url: str) -> None:
    if path is None:
        return
    from infermeter.load.verdict import load_results
    from infermeter.results.io import write_results

    write_results(path, load_results(summaries, target, started, url, ["infermeter", *sys.argv[1:]]))
    stdout.print(f"results: {escape(str(path))}")


@dataclass(frozen=True)
class KServeLoad:
    """What `load` runs against a KServe v2 target: the scenario and its flags, checked."""

    protocol: str
    scenario: str
    _: KW_ONLY  # the rest by keyword
    qps: float | None
    concurrency: int
    duration_s: float
    slo_p99_ms: float | None
    find_peak: bool
    steps: int
    batch: int
    model_name: str | None
    use_json: bool
    api_key: str | None
    seed: int
    timeout_s: float
    output: Path | None
    arrivals: str = "poisson"
    slo_latency_ms: float | None = None  # --slo latency_ms=MS: the goodput bound
    reshape: tuple[str, ...] = ()  # --reshape NAME:DIMS for a MODEL served here (as `serve --reshape`)

    def run(self, scenario: str, qps: float | None, concurrency: int) -> RunSettings:
        """One run of the scenario at a rate or a concurrency."""
        from infermeter.load.driver import RunSettings

        return RunSettings(
            scenario,
            self.duration_s,
            qps=qps,
            concurrency=concurrency,
            seed=self.seed,
            timeout_s=self.timeout_s,
            arrivals=self.arrivals,
        )


def kserve_load(flags: dict[str, Any]) -> KServeLoad:
    """The KServe load of `load`'s flags; UsageError for a bad value or a scenario without what it needs."""
    from infermeter.load.slo import parse_slo
    from infermeter.models.reshape import parse_reshape
    from infermeter.serve.protocol import API_KEY_VARIABLE

    slo = parse_slo(flags["slo"], stream=False)
    parse_reshape(flags["reshape"])  # a malformed --reshape is a usage error before a server starts
    for name in ("concurrency", "duration", "batch", "steps", "timeout", "qps", "slo_p99_ms"):
        if flags[name] is not None:
            require_positive(flags[name], "--" + name.replace("_", "-"))
    if flags["find_peak"] and flags["slo_p99_ms"] is None:
        raise UsageError("--find-peak needs --slo-p99-ms: the peak is the highest QPS whose P99 meets it")
    if flags["scenario"] == "server" and not flags["qps"] and not flags["find_peak"]:
        raise UsageError("the server scenario needs --qps (or --find-peak with --slo-p99-ms)")
    return KServeLoad(
        protocol=flags["protocol"],
        scenario=flags["scenario"],
        qps=flags["qps"],
        concurrency=flags["concurrency"],
        duration_s=flags["duration"],
        slo_p99_ms=flags["slo_p99_ms"],
        find_peak=flags["find_peak"],
        steps=flags["steps"],
        batch=flags["batch"],
        model_name=flags["model_name"],
        use_json=flags["use_json"],
        api_key=flags["api_key"] or os.environ.get(API_KEY_VARIABLE) or None,
        seed=flags["seed"],
        timeout_s=flags["timeout"],
        output=flags["output"],
        arrivals=flags["arrivals"],
        slo_latency_ms=slo.latency_ms,
        reshape=tuple(flags["reshape"]),
    )


def _progress(summary: LoadSummary) -> None:
    from infermeter.load.verdict import refusal_line

    stats = summary.stats
    p99 = f"P99 {stats.p99:.2f} ms" if stats else "no answers"
    good = "" if summary.goodput_qps is None else f", goodput {summary.goodput_qps:.1f} QPS"
    verdict = "VALID" if summary.valid else "INVALID"
    refused = f"; [red]{escape(refusal_line(summary.run))}[/]" if summary.run.errors else ""
    line = f"  {escape(summary.label())}: {summary.run.achieved_qps:.1f} QPS{good}, {p99}, {verdict}{refused}"
    stderr.print(line, soft_wrap=True)


def _peak(target: LoadTarget, load: KServeLoad, label: str) -> list[LoadSummary]:
    """--find-peak: the probes, printed, and the peak QPS whose P99 met the SLO."""
    from infermeter.load.driver import find_peak

    slo = load.slo_p99_ms
    assert slo is not None
    best, probes, search = find_peak(
        target,
        slo,
        load.duration_s,
        load.seed,
        load.concurrency,
        on_probe=_progress,
        slo_latency_ms=load.slo_latency_ms,
    )
    print_summaries(probes, f"peak search: {label}, SLO P99 ≤ {slo:g} ms")
    if best is None:
        stdout.print(f"[red]no QPS met the SLO[/] of {slo:g} ms (lowest probe still INVALID)")
    else:
        stdout.print(
            f"peak: [bold]{best.run.target_qps:.1f} QPS[/] with P99 "
            f"{best.stats.p99 if best.stats else float('nan'):.2f} ms ≤ {slo:g} ms (VALID)"
        )
    stdout.print(escape(search.line("QPS")), soft_wrap=True)
    return probes


def _scenario(target: LoadTarget, load: KServeLoad, label: str) -> list[LoadSummary]:
    """The scenario's run (or the sweep's runs), printed."""
    from infermeter.load.driver import run_once, sweep_steps
    from infermeter.load.levels import step_levels
    from infermeter.load.verdict import summarize

    if load.scenario != "sweep":
        run = run_once(target, load.run(load.scenario, load.qps, load.concurrency))
        summaries = [summarize(run, load.slo_p99_ms, load.batch, load.seed, load.slo_latency_ms)]
        print_summaries(summaries, f"{load.scenario}: {label}")
        return summaries
    summaries = []

    def measure(step: tuple[str, float]) -> LoadSummary:
        run = run_once(target, load.run(step[0], step[1], int(step[1])))
        return summarize(run, load.slo_p99_ms, load.batch, load.seed, load.slo_latency_ms)

    def measured(summary: LoadSummary) -> None:
        summaries.append(summary)
        _progress(summary)

    try:
        step_levels(sweep_steps(load.qps, load.concurrency, load.steps), measure, measured)
    except BackendError as exc:  # the server stopped answering: keep the levels measured so far
        if not summaries:
            raise
        stderr.print(f"  [red]{escape(str(exc))}[/]; the sweep stops here", soft_wrap=True)
    print_summaries(summaries, f"sweep: {label}")
    return summaries


def run_kserve_load(served: ServedModel, load: KServeLoad) -> None:
    """Serve MODEL here when it is not a URL, load it as `load` says, print the runs and write the results."""
    from infermeter.load.target import prepare_target

    overrides, values = parse_input_flags(served.inputs)
    serve_args = [*served.serve_args(), "--max-batch", str(max(8, load.batch))]
    if load.reshape and served.model.startswith(("http://", "https://", "grpc://")):
        raise UsageError("--reshape rewrites a MODEL served here; a URL target is served already (reshape it there)")
    serve_args += [arg for dims in load.reshape for arg in ("--reshape", dims)]
    started = now_iso()
    with _served(served.model, served.backend, serve_args, load.protocol) as url:
        prepared = prepare_target(
            url, load.model_name, load.batch, overrides, load.use_json, load.api_key, load.seed,
            input_values=values, data=served.data,
        )  # fmt: skip
        for note in prepared.notes:
            stderr.print(f"note: {escape(note)}", soft_wrap=True)
        label = f"{prepared.model_name} at {url} ({prepared.backend})"
        run = _peak if load.find_peak else _scenario
        _write(load.output, run(prepared, load, label), prepared, started, url)


class _LoadCommand(click.Command):
    """`load`, whose unknown-option error for --api names `infermeter llm load`: --api chose KServe v2 or an
    OpenAI-compatible server until `llm load` took the latter, and `load` speaks KServe v2 alone."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            if exc.option_name != "--api":
                raise
            message = (
                "No such option '--api': `load` speaks KServe v2 alone; an OpenAI-compatible server is loaded with "
                "`infermeter llm load URL [--chat]`"
            )
            raise click.NoSuchOption("--api", message, ctx=ctx) from None


@click.command("load", cls=_LoadCommand)
@click.argument("target")
@serving_options("target", "Serve TARGET (a model) with this backend first; omit for a URL.")
@click.option(
    "--protocol",
    type=click.Choice(["http", "grpc"]),
    default="http",
    show_default=True,
    help="KServe v2 over HTTP or gRPC (a grpc://HOST:PORT target is gRPC already).",
)
@click.option("--scenario", type=click.Choice(SCENARIOS), default="server", show_default=True)
@click.option("--qps", type=float, help="Target queries per second (server scenario; top of a QPS sweep).")
@click.option(
    "--concurrency",
    type=int,
    default=16,
    show_default=True,
    help="Requests in flight (offline, sweep).",
)
@click.option("--duration", type=float, default=10.0, show_default=True, help="Seconds per run.")
@click.option("--slo-p99-ms", type=float, help="Latency SLO: a run is VALID only when its P99 is within it.")
@click.option("--find-peak", is_flag=True, help=FIND_PEAK_HELP)
@click.option("--steps", type=int, default=5, show_default=True, help="QPS steps of a sweep with --qps.")
@click.option("--batch", type=int, default=1, show_default=True, help="Rows per request.")
@click.option("--model-name", help="The model's protocol name on a URL target (default: from the URL or /v2).")
@click.option("--json", "use_json", is_flag=True, help="Send JSON tensors instead of the binary extension.")
@click.option("--api-key", help="API key of the target (default: $INFERMETER_API_KEY).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the arrivals and inputs.")
@arrivals_option()
@slo_option("")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for stragglers.")
@click.option("--reshape", multiple=True, metavar="NAME:DIMS", help=RESHAPE_HELP)
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Results file for report/compare.")
def load(served: ServedModel, **flags: Any) -> None:  # flags: read by kserve_load
    """Put TARGET under load, MLPerf-LoadGen style; TARGET is a served URL (http://HOST:PORT[/v2/models/NAME], or
    grpc://HOST:PORT for KServe v2 gRPC) or a MODEL served here with --backend (over gRPC with --protocol grpc).

    Scenarios: server (Poisson arrivals at --qps; latency from each request's scheduled time), single-stream
    (one request in flight), offline (--concurrency requests in flight), sweep (QPS steps up to --qps, or
    concurrency 1, 2, 4 … --concurrency). Each run is VALID or INVALID against --slo-p99-ms, with the reason.
    An OpenAI-compatible LLM server (Ollama, vLLM, llama.cpp server) is loaded with `infermeter llm load URL`.
    """
    run_kserve_load(served, kserve_load(flags))
