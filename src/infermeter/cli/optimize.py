"""`infermeter optimize`: baseline → verified ONNX → every backend at FP32 → reduced precision → shapes and
batching → the pick, with a live account of each step and a deployable output folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.advise import OBJECTIVES
from infermeter.cli.cluster import check_cluster_flags, cluster_connection
from infermeter.cli.common import (
    MEMORY_BUDGET,
    PRICE_PER_HOUR,
    RESHAPE_HELP,
    memory_budget_mb,
    parse_fraction,
    parse_options,
    parse_positive_ints,
    require_measure_flags,
    require_positive,
    split_values,
    stderr,
    stdout,
)
from infermeter.cli.optimize_serve import serve_flags, serving_request
from infermeter.optimize.request import (
    DEFAULT_BUDGET_MINUTES,
    DEFAULT_MAX_ACCURACY_DROP_PCT,
    DEFAULT_SETTINGS,
    DEVICES,
    THROUGHPUT_BATCHES,
)
from infermeter.results.records import Accuracy, ParityRecord, read_record

EXIT_NO_PICK = 3


class LiveView:
    """Prints each step, decision and result as it happens, with a spinner line for the case in flight."""

    def __init__(self) -> None:
        self.status = stderr.status("starting", spinner="dots")
        self.baseline_p50: dict[int, float] = {}

    def __call__(self, event: object) -> None:
        from infermeter.optimize.pipeline import OptimizeEvent

        assert isinstance(event, OptimizeEvent)
        kind, text, label = event.kind, escape(event.message), escape(event.label)
        if kind == "step":
            stderr.print(f"\n[bold]▶ {label}[/]\n  [dim]why: {text}[/]", soft_wrap=True)
        elif kind == "note":
            stderr.print(f"  · {text}", soft_wrap=True)
        elif kind == "skip":
            stderr.print(f"  [yellow]– skip {label}[/]: {text}", soft_wrap=True)
        elif kind == "warning":
            stderr.print(f"  [yellow]warning[/] {text}", soft_wrap=True)
        elif kind in ("case", "phase"):
            self.status.update(f"{label}: {text or 'starting'}")
        elif kind == "done" and event.result is not None:
            self._done(event.step, label, event.result, text)

    def _done(self, step: str, label: str, result: object, text: str) -> None:
        from infermeter.results.schema import CaseResult

        assert isinstance(result, CaseResult)
        self.status.update("")
        if not result.ok:
            stderr.print(f"  [red]✗ {label}: {result.status}[/]: {escape(result.error or '')}", soft_wrap=True)
            return
        assert result.latency_ms is not None
        p50 = result.latency_ms.p50
        if step == "baseline":
            self.baseline_p50[result.batch] = p50
        parts = [f"P50 {p50:.3f} ms", f"P99 {result.latency_ms.p99:.3f} ms", f"{result.throughput or 0:,.1f}/s"]
        base = self.baseline_p50.get(result.batch)
        if base and step != "baseline":
            parts.append(f"[bold]{base / p50:.2f}x[/] vs baseline")
        parity = read_record(result, ParityRecord)
        if parity is not None:
            parts.append("parity [green]pass[/]" if parity.passed else "parity [red]FAIL[/]")
        if text:
            parts.append(f"[dim]{text}[/]")
        stderr.print(f"  [green]✓[/] {label}: " + ", ".join(parts), soft_wrap=True)


def _default_batches(model: str, objective: str, reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> list[int]:
    """The batches without --batch: 1 (1, 8, 32 for throughput), or the batch the model fixes, said in a note."""
    from infermeter.measure.request import default_batches
    from infermeter.models.spec import resolve_model

    defaults = THROUGHPUT_BATCHES if objective == "throughput" else (1,)

    def note(text: str) -> None:
        stderr.print(escape(f"note: {text}"), soft_wrap=True)

    return list(default_batches([resolve_model(model, reshape)], note, defaults=defaults))


def _print_outcome(outcome: object) -> None:
    from infermeter.advise import describe
    from infermeter.optimize.finish import Outcome
    from infermeter.report.summary import case_label
    from infermeter.tradeoff import cost_note, format_cost

    assert isinstance(outcome, Outcome)
    advice = outcome.advice
    priced = advice.price_per_hour is not None
    if advice.ranked:
        table = Table(header_style="bold", title="candidates meeting the constraints (best first)")
        cost_column = (f"cost per million ({advice.price_per_hour:g}/h)",) if priced else ()
        for column in ("#", "configuration", "measured", "accuracy", *cost_column):
            table.add_column(column)
        for rank, case in enumerate(advice.ranked[:8], 1):
            acc = read_record(case, Accuracy)
            acc_text = f"drop {acc.drop_pct:.2f}" if acc else "—"
            cost = (format_cost(advice.cost_of(case)),) if priced else ()
            table.add_row(str(rank), escape(case_label(case)), escape(describe(case)), acc_text, *cost)
        stdout.print(table)
    for line in outcome.explanation:
        stdout.print(escape(line), soft_wrap=True)
    for exclusion in advice.excluded:
        reasons = "; ".join(exclusion.reasons) + cost_note(advice.cost_of(exclusion.case))
        text = f"excluded {case_label(exclusion.case)}: {reasons}"
        stdout.print(escape(text), soft_wrap=True)
    if outcome.serving is not None:
        stdout.print(f"serving: {escape(outcome.serving.summary())}", soft_wrap=True)
    if outcome.fallback is not None:
        stdout.print(f"Fallback: {escape(case_label(outcome.fallback))}: {escape(describe(outcome.fallback))}.")
    stdout.print(f"report: {escape(str(outcome.report))}")
    if outcome.deploy_md is not None:
        stdout.print(
            f"deploy: {escape(str(outcome.deploy_md))}; serve with `infermeter serve {escape(str(outcome.folder))}`"
        )


@click.command("optimize")
@click.argument("model")
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True, help="Target device.")
@click.option("--batch", multiple=True, help="Batch sizes; the first is the main comparison (default 1; 1,8,32 for "
              "--objective throughput).")  # fmt: skip
@click.option("--max-accuracy-drop", type=float, default=DEFAULT_MAX_ACCURACY_DROP_PCT, show_default=True,
              help="Accuracy budget in points (top-1 with labelled --eval, else agreement with FP32).")  # fmt: skip
@click.option("--calib", help="Calibration data for INT8: image folder, .npz/.npy, or file.py:function.")
@click.option("--eval", "eval_data", help="Evaluation data (with `labels`: task metric; without: FP32 agreement).")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    help="A model input's shape, NAME:1x128 (a symbolic dim), or a constant, NAME=VALUE, as bench takes it.",
)
@click.option("--reshape", multiple=True, metavar="NAME:DIMS", help=RESHAPE_HELP)
@click.option("--max-p99-ms", type=float, help="Largest acceptable P99 latency (ms).")
@click.option("--max-memory-mb", type=float, help="Largest acceptable peak memory (MB).")
@MEMORY_BUDGET
@click.option("--max-load-s", type=float, help="Largest acceptable load time (s).")
@PRICE_PER_HOUR
@click.option("--objective", type=click.Choice(OBJECTIVES), default="latency", show_default=True)
@click.option("--budget-minutes", type=float, default=DEFAULT_BUDGET_MINUTES, show_default=True,
              help="Time this invocation may spend; dominated configurations are pruned to fit.")  # fmt: skip
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Output folder (default optimize-<model>).")
@click.option("--backends", "-b", multiple=True, help="Only these backends (default: every one of the device).")
@click.option("--option", "-O", multiple=True, help="Backend option KEY=VALUE (prefixed keys go to that backend).")
@click.option("--threads", type=int, default=0, help="Intra-op threads (0: physical cores).")
@click.option("--warmup", type=int, default=DEFAULT_SETTINGS.warmup_iterations, show_default=True)
@click.option("--iterations", type=int, default=DEFAULT_SETTINGS.min_iterations, show_default=True,
              help="Minimum timed iterations per case.")  # fmt: skip
@click.option("--min-time", type=float, default=DEFAULT_SETTINGS.min_time_s, show_default=True)
@click.option("--max-time", type=float, default=DEFAULT_SETTINGS.max_time_s, show_default=True)
@click.option("--target-ci", default="1%", show_default=True,
              help="Stop a case once its P50's 95% interval is within ± this; 0: no precision target.")  # fmt: skip
@click.option("--case-timeout", type=float, default=DEFAULT_SETTINGS.case_timeout_s, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--cluster", envvar="RAY_ADDRESS", help="Measure every case as a task on a Ray cluster node: its address "
              "(HEAD:6379), or `local`; also RAY_ADDRESS. Needs infermeter[cluster] (docs/cluster.md).")  # fmt: skip
@click.option("--machine", help="With --cluster: the class of node (label infermeter.io/machine) to optimize for.")
@serve_flags
def optimize(
    model: str,
    device: str,
    batch: tuple[str, ...],
    max_accuracy_drop: float,
    calib: str | None,
    eval_data: str | None,
    inputs: tuple[str, ...],
    reshape: tuple[str, ...],
    max_p99_ms: float | None,
    max_memory_mb: float | None,
    memory_budget: str | None,
    max_load_s: float | None,
    price_per_hour: float | None,
    objective: str,
    budget_minutes: float,
    output: Path | None,
    backends: tuple[str, ...],
    option: tuple[str, ...],
    threads: int,
    warmup: int,
    iterations: int,
    min_time: float,
    max_time: float,
    target_ci: str,
    case_timeout: float,
    seed: int,
    cluster: str | None,
    machine: str | None,
    **serve: Any,
) -> None:
    """Find the fastest configuration of MODEL that meets the constraints, and leave it ready to serve.

    Steps: 1 baseline (PyTorch eager FP32, or ONNX Runtime FP32 for an .onnx), 2 ONNX export verified,
    3 every backend at FP32 with parity, 4 INT8 (calibrated; mixed precision when it breaks the accuracy budget)
    and BF16/FP16 where the CPU has them, each accuracy-checked, 5 static vs dynamic shapes and batching,
    6 the pick with its runner-up and the ONNX Runtime FP32 fallback, 7 with --serve, the batching policy for a
    server (tune-batching's search on the pick). Rerun with the same -o to resume.
    Exit 0: a pick was made; 3: nothing meets the constraints; 2: bad input.
    """
    from dataclasses import replace

    from infermeter.backends.registry import backend_names
    from infermeter.errors import UsageError
    from infermeter.models.input_flags import parse_input_flags
    from infermeter.models.reshape import parse_reshape
    from infermeter.optimize.main import run_optimize
    from infermeter.optimize.request import OptimizeRequest
    from infermeter.results.env import default_threads

    shapes, values = parse_input_flags(inputs)
    require_positive(threads, "--threads", allow_zero=True)
    if machine and not cluster:
        raise UsageError("--machine picks a class of cluster node: it goes with --cluster ADDRESS")
    check_cluster_flags(cluster, (), threads)
    require_measure_flags(warmup, iterations, min_time, max_time, case_timeout)
    require_positive(budget_minutes, "--budget-minutes")
    reshaped = parse_reshape(reshape)
    batches = parse_positive_ints(batch, "--batch") or _default_batches(model, objective, reshaped)
    chosen = split_values(backends)
    unknown = [name for name in chosen if name not in backend_names()]
    if unknown:
        raise UsageError(f"unknown backend(s) {', '.join(unknown)}; known: {', '.join(backend_names())}")
    folder = output or Path(f"optimize-{Path(model).stem.replace(':', '-')}")
    request = OptimizeRequest(
        model=model,
        output=folder.resolve(),
        device=device,
        batches=tuple(batches),
        max_accuracy_drop_pct=max_accuracy_drop,
        calib=calib,
        eval=eval_data,
        max_p99_ms=max_p99_ms,
        max_memory_mb=memory_budget_mb(max_memory_mb, memory_budget),
        max_load_s=max_load_s,
        objective=objective,
        budget_s=budget_minutes * 60,
        backends=tuple(chosen),
        options=parse_options(option),
        threads=threads or default_threads(),
        settings=replace(
            DEFAULT_SETTINGS,
            warmup_iterations=warmup,
            min_iterations=iterations,
            min_time_s=min_time,
            max_time_s=max_time,
            case_timeout_s=case_timeout,
            target_ci=parse_fraction(target_ci, "--target-ci"),
        ),
        seed=seed,
        cluster=cluster,
        machine=machine,
        input_shapes=shapes,
        input_values=values,
        reshape=reshaped,
        price_per_hour=price_per_hour,
        serving=serving_request(**serve),
    )
    view = LiveView()
    try:
        with cluster_connection(cluster), view.status:
            if machine:
                from infermeter.cluster.session import resolve_machines

                resolve_machines([machine])
            outcome = run_optimize(request, view)
    except KeyboardInterrupt:
        stderr.print(f"interrupted: finished steps and cases are saved in {escape(str(folder))}; rerun the same "
                     "command to resume", soft_wrap=True)  # fmt: skip
        raise SystemExit(130) from None
    _print_outcome(outcome)
    if outcome.advice.pick is None:
        raise SystemExit(EXIT_NO_PICK)
