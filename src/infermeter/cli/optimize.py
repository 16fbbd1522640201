"""`infermeter optimize`: baseline → verified ONNX → every backend at FP32 → reduced precision → shapes and
batching → the pick, with a live account of each step and a deployable output folder."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.advise.pick import OBJECTIVES
from infermeter.cli.cluster import check_cluster_flags, cluster_connection
from infermeter.cli.common import (
    MEMORY_BUDGET,
    PRICE_PER_HOUR,
    memory_budget_mb,
    parse_options,
    parse_positive_ints,
    require_positive,
    split_values,
    stderr,
    stdout,
)
from infermeter.cli.optimize_serve import serve_flags, serving_request
from infermeter.cli.options import (
    BACKEND,
    CLUSTER,
    INPUT,
    OPTION,
    RESHAPE,
    THREADS,
    MeasureFlags,
    measure_options,
    option_group,
)
from infermeter.optimize.request import (
    DEFAULT_BUDGET_MINUTES,
    DEFAULT_FINALISTS,
    DEFAULT_MAX_ACCURACY_DROP_PCT,
    DEFAULT_SETTINGS,
    DEVICES,
    THROUGHPUT_BATCHES,
)
from infermeter.results.records import Accuracy, ParityRecord, read_record

if TYPE_CHECKING:
    from infermeter.core.case import MeasureSettings
    from infermeter.optimize.request import OptimizeRequest

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
        parts = [f"P50 {p50:.3f} ms", f"P99 {result.latency_ms.p99:.3f} ms", f"{result.timing.throughput or 0:,.1f}/s"]
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
    from infermeter.models.resolve import resolve_model

    defaults = THROUGHPUT_BATCHES if objective == "throughput" else (1,)

    def note(text: str) -> None:
        stderr.print(escape(f"note: {text}"), soft_wrap=True)

    return list(default_batches([resolve_model(model, reshape)], note, defaults=defaults))


def _print_outcome(outcome: object) -> None:
    from infermeter.advise.pick import describe
    from infermeter.advise.tradeoff import cost_note, format_cost
    from infermeter.optimize.finish import Outcome
    from infermeter.report.summary import case_label

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


@dataclass(frozen=True, kw_only=True)
class ConstraintFlags:
    """What the pick must meet and what it is chosen for: accuracy, latency, memory, load time, price, budget."""

    max_accuracy_drop: float
    max_p99_ms: float | None
    max_memory_mb: float | None
    memory_budget: str | None
    max_load_s: float | None
    price_per_hour: float | None
    objective: str
    budget_minutes: float
    no_prune: bool
    finalists: int

    def request_fields(self) -> dict[str, Any]:
        """These flags as `OptimizeRequest` fields, checked (UsageError for a budget or limit that cannot work)."""
        require_positive(self.budget_minutes, "--budget-minutes")
        return {
            "max_accuracy_drop_pct": self.max_accuracy_drop,
            "max_p99_ms": self.max_p99_ms,
            "max_memory_mb": memory_budget_mb(self.max_memory_mb, self.memory_budget),
            "max_load_s": self.max_load_s,
            "objective": self.objective,
            "budget_s": self.budget_minutes * 60,
            "price_per_hour": self.price_per_hour,
            "prune": not self.no_prune,
            "finalists": self.finalists,
        }


constraint_options = option_group(
    "constraints",
    ConstraintFlags,
    click.option(
        "--max-accuracy-drop",
        type=float,
        default=DEFAULT_MAX_ACCURACY_DROP_PCT,
        show_default=True,
        help="Accuracy budget in points (top-1 with labelled --eval, else agreement with FP32).",
    ),
    click.option("--max-p99-ms", type=float, help="Largest acceptable P99 latency (ms)."),
    click.option("--max-memory-mb", type=float, help="Largest acceptable peak memory (MB)."),
    MEMORY_BUDGET,
    click.option("--max-load-s", type=float, help="Largest acceptable load time (s)."),
    PRICE_PER_HOUR,
    click.option(
        "--objective", type=click.Choice(OBJECTIVES), default="latency", show_default=True, help="What to optimize."
    ),
    click.option(
        "--budget-minutes",
        type=float,
        default=DEFAULT_BUDGET_MINUTES,
        show_default=True,
        help="Time this invocation may spend; dominated configurations are pruned to fit.",
    ),
    click.option(
        "--no-prune",
        is_flag=True,
        help="Measure every candidate and repair every reduced precision that misses the accuracy budget, even "
        "those that cannot beat the best so far (slower; to check what the pruning skips).",
    ),
    click.option(
        "--finalists",
        type=int,
        default=DEFAULT_FINALISTS,
        show_default=True,
        help="Before the pick, measure the best N admissible candidates again together in interleaved rounds, so "
        "that the machine's drift between their first measurements cannot decide it (0: off).",
    ),
)


@click.command("optimize")
@click.argument("model")
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True, help="Target device.")
@click.option("--batch", multiple=True, help="Batch sizes; the first is the main comparison (default 1; 1,8,32 for "
              "--objective throughput).")  # fmt: skip
@click.option("--calib", help="Calibration data: image folder, .npz/.npy, or file.py:function.")
@click.option("--eval", "eval_data", help="Evaluation data (with `labels`: task metric; without: FP32 agreement).")
@INPUT
@RESHAPE
@constraint_options
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Output folder (default optimize-<model>).")
@BACKEND
@OPTION
@THREADS
@measure_options(DEFAULT_SETTINGS)
@CLUSTER
@click.option("--machine", help="With --cluster: the class of node (label infermeter.io/machine) to optimize for.")
@serve_flags
def optimize(
    model: str,
    device: str,
    batch: tuple[str, ...],
    calib: str | None,
    eval_data: str | None,
    inputs: tuple[str, ...],
    reshape: tuple[str, ...],
    constraints: ConstraintFlags,
    output: Path | None,
    backend: tuple[str, ...],
    option: tuple[str, ...],
    threads: int,
    measure: MeasureFlags,
    cluster: str | None,
    machine: str | None,
    **serve: Any,
) -> None:
    """Find the fastest configuration of MODEL that meets the constraints, and leave it ready to serve.

    Steps: 1 baseline (PyTorch eager FP32, or ONNX Runtime FP32 for an .onnx), 2 ONNX export verified, 3 every
    backend at FP32 with parity, 4 INT8 (calibrated; mixed precision when it breaks the accuracy budget) and
    BF16/FP16 where the CPU has them, each accuracy-checked, 5 static vs dynamic shapes and batching, 5c the best
    --finalists measured again together in interleaved rounds, 6 the pick with its runner-up and the ONNX Runtime
    FP32 fallback, 7 with --serve, the batching policy for a server (tune-batching's search on the pick). Rerun
    with the same -o to resume. Exit 0: a pick was made; 3: nothing meets the constraints; 2: bad input.
    """
    from infermeter.models.input_flags import parse_input_flags
    from infermeter.models.reshape import parse_reshape
    from infermeter.optimize.request import OptimizeRequest
    from infermeter.results.env import default_threads

    chosen = _backends(backend)
    settings = _checked_settings(measure, threads, cluster, machine)
    shapes, values = parse_input_flags(inputs)
    reshaped = parse_reshape(reshape)
    batches = parse_positive_ints(batch, "--batch") or _default_batches(model, constraints.objective, reshaped)
    folder = output or Path(f"optimize-{Path(model).stem.replace(':', '-')}")
    request = OptimizeRequest(
        command=("infermeter", *sys.argv[1:]),
        model=model,
        output=folder.resolve(),
        device=device,
        batches=tuple(batches),
        calib=calib,
        eval=eval_data,
        backends=tuple(chosen),
        options=parse_options(option),
        threads=threads or default_threads(),
        settings=settings,
        seed=measure.seed,
        cluster=cluster,
        machine=machine,
        input_shapes=shapes,
        input_values=values,
        reshape=reshaped,
        serving=serving_request(**serve),
        **constraints.request_fields(),
    )
    _run(request, folder)


def _backends(backend: tuple[str, ...]) -> list[str]:
    """-b/--backend's names, each a known backend (UsageError otherwise)."""
    from infermeter.backends.registry import require_known_backends

    chosen = split_values(backend)
    require_known_backends(chosen)
    return chosen


def _checked_settings(measure: MeasureFlags, threads: int, cluster: str | None, machine: str | None) -> MeasureSettings:
    """The measurement group's settings; UsageError for those, a thread count or cluster flags that cannot work."""
    from infermeter.core.errors import UsageError

    require_positive(threads, "--threads", allow_zero=True)
    if machine and not cluster:
        raise UsageError("--machine picks a class of cluster node: it goes with --cluster ADDRESS")
    check_cluster_flags(cluster, (), threads)
    return measure.settings()


def _run(request: OptimizeRequest, folder: Path) -> None:
    """The optimize run with its live view (Ctrl-C: saved, resumable), its outcome printed, exit 3 without a pick."""
    from infermeter.optimize.main import run_optimize

    view = LiveView()
    try:
        with cluster_connection(request.cluster), view.status:
            if request.machine:
                from infermeter.cluster.session import resolve_machines

                resolve_machines([request.machine])
            outcome = run_optimize(request, view)
    except KeyboardInterrupt:
        stderr.print(f"interrupted: finished steps and cases are saved in {escape(str(folder))}; rerun the same "
                     "command to resume", soft_wrap=True)  # fmt: skip
        raise SystemExit(130) from None
    _print_outcome(outcome)
    if outcome.advice.pick is None:
        raise SystemExit(EXIT_NO_PICK)
