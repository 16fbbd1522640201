"""`infermeter quantize`: INT8 with calibration, accuracy against FP32, per-layer sensitivity, mixed precision
under an accuracy budget, QAT; prints one table of accuracy next to latency."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import RESHAPE_HELP, require_positive, stderr, stdout
from infermeter.cli.quantize_flags import COMMON_PARAMS, TO_ONLY, Int8Flags, StudyFlags
from infermeter.core.errors import UsageError
from infermeter.figures.number_format import format_number

if TYPE_CHECKING:
    from infermeter.quantize.request import QuantizeOutcome, QuantizeRequest


@click.command("quantize")
@click.argument("model")
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Quantized model (.onnx / .xml).")
@click.option("--engine", default="onnxruntime", show_default=True, help="onnxruntime (QDQ) or openvino (NNCF, IR).")
@click.option("--mode", default="static", show_default=True, help="static (calibrated) or dynamic.")
@click.option("--calib", help="Calibration data: image folder, .npz/.npy, or file.py:function.")
@click.option("--data", help="Real inputs, as bench takes them (image folder, .npz/.npy, file.py:function): INT8's "
              "calibration data when --calib is not given; --to's samples (default generated).")  # fmt: skip
@click.option(
    "--input",
    "inputs",
    multiple=True,
    help="A model input's shape, NAME:1x128 (sizes symbolic dims of generated samples), or a constant, NAME=VALUE.",
)
@click.option("--reshape", multiple=True, metavar="NAME:DIMS", help=RESHAPE_HELP)
@click.option("--calib-size", type=int, default=300, show_default=True, help="Calibration samples used at most.")
@click.option("--eval-size", type=int, default=1000, show_default=True, help="Evaluation samples used at most.")
@click.option("--method", default="minmax", show_default=True, help="Calibration: minmax, entropy, percentile.")
@click.option("--activations", default="u8", show_default=True, help="Static activations: u8 (fast on x86) or s8.")
@click.option("--per-channel", is_flag=True, help="Per-output-channel weight scales.")
@click.option("--exclude", multiple=True, help="Node names to keep in float (repeat or comma-separate).")
@click.option("--eval", "eval_data", help="Evaluation data (with `labels`: task metric; without: FP32 agreement).")
@click.option("--sensitivity", is_flag=True, help="Rank layers by how much accuracy keeping each in float recovers.")
@click.option("--max-drop", type=float, help="Accuracy budget in points: keep sensitive layers in float until met.")
@click.option("--finetune", help="Labelled training data for quantization-aware fine-tuning (PyTorch models).")
@click.option("--finetune-epochs", type=int, default=3, show_default=True, help="QAT epochs.")
@click.option("--no-latency", is_flag=True, help="Skip timing the variants.")
@click.option("--results", type=click.Path(path_type=Path), help="Also write the variants as a results file.")
@click.option("--threads", type=int, default=0, help="Intra-op threads (0: physical cores).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of generated data.")
@click.option(
    "--to",
    type=click.Choice(["fp16", "bf16"]),
    help="Reduced-precision study instead of INT8: decisions changed vs FP32, layers kept in FP32.",
)
@click.option(
    "-b", "--backends", multiple=True, help="--to: engines, comma-separated (default: each with a path here)."
)
@click.option("--threshold", type=float, help="--to: decision threshold on a probability output (e.g. 0.5).")
@click.option("--max-changed", type=int, default=0, show_default=True, help="--to: decisions allowed to change.")
@click.option("--min-cosine", type=float, help="--to: budget as a mean cosine with FP32 instead of decisions.")
@click.option("--max-evals", type=int, default=64, show_default=True, help="--to: cap on the search's evaluations.")
@click.option("--samples", type=int, default=64, show_default=True, help="--to: samples judged.")
@click.pass_context
def quantize(ctx: click.Context, model: str, **flags: Any) -> None:
    """Quantize MODEL to INT8 and show accuracy against FP32 next to latency.

    With --to fp16|bf16, a reduced-precision study instead: on each engine of -b, the decisions FP16/BF16 changes
    against FP32, the few layers that must stay in FP32 (range pre-pass, operator types, bisection), the mixed
    model written to the -o folder, and FP32, full and mixed precision timed interleaved.

    llama.cpp (GGUF) levels of an LLM are `infermeter llm quantize`.
    """
    from infermeter.cli.generate import reject_flags

    params = [p.name for p in ctx.command.params if p.name]
    if flags["to"] is not None:
        reject_flags(ctx, [p for p in params if p not in COMMON_PARAMS | StudyFlags.names()], "without --to")
        from infermeter.cli.quantize_fallback import run_fallback_study

        return run_fallback_study(model, StudyFlags.of(flags))
    reject_flags(ctx, TO_ONLY, "with --to fp16|bf16")
    _run_int8(model, Int8Flags.of(flags))


def int8_request(model: str, flags: Int8Flags) -> QuantizeRequest:
    """The library request of the INT8 flags, checked (UsageError before any slow step)."""
    from infermeter.build.int8.ort_quant import QuantConfig
    from infermeter.cli.common import split_values
    from infermeter.models.input_flags import parse_input_flags
    from infermeter.models.reshape import parse_reshape
    from infermeter.quantize.request import QuantizeRequest, check_request
    from infermeter.results.env import default_threads

    if flags.output is None:
        raise UsageError("missing -o/--output: the path of the quantized model (.onnx / .xml)")
    require_positive(flags.threads, "--threads", allow_zero=True)
    require_positive(flags.finetune_epochs, "--finetune-epochs")
    if flags.data and flags.calib:
        raise UsageError("--data and --calib both name calibration data: give one")
    shapes, values = parse_input_flags(flags.inputs)
    config = QuantConfig(flags.mode, flags.method, flags.per_channel, tuple(split_values(flags.exclude)),
                         flags.activations)  # fmt: skip
    request = QuantizeRequest(
        model=model,
        output=flags.output,
        engine=flags.engine,
        config=config,
        calib=flags.calib or flags.data,
        calib_size=flags.calib_size,
        eval=flags.eval_data,
        eval_size=flags.eval_size,
        sensitivity=flags.sensitivity,
        max_drop_pct=flags.max_drop,
        finetune=flags.finetune,
        finetune_epochs=flags.finetune_epochs,
        latency=not flags.no_latency,
        threads=flags.threads or default_threads(),
        seed=flags.seed,
        input_shapes=shapes,
        input_values=values,
        reshape=parse_reshape(flags.reshape),
    )
    check_request(request)
    return request


def _run_int8(model: str, flags: Int8Flags) -> None:
    """INT8: quantize, print the tables and notes, write the results file when asked."""
    from infermeter.quantize.pipeline import quantize_model

    request = int8_request(model, flags)
    with stderr.status("quantizing") as status:
        outcome = quantize_model(request, lambda msg: status.update(escape(msg)))
    for warning in outcome.warnings:
        stderr.print(f"[yellow]warning[/] {escape(f'{warning.code}: {warning.message}')}", soft_wrap=True)
    stdout.print(variants_table(outcome))
    if outcome.sensitivity:
        stdout.print(sensitivity_table(outcome))
    if outcome.frontier and request.max_drop_pct is not None:
        stdout.print(frontier_table(outcome, request.max_drop_pct))
        stdout.print(f"budget {request.max_drop_pct:g} points: {'met' if outcome.budget_met else 'NOT met'}")
    for note in outcome.notes:
        stdout.print(f"[dim]{escape(note)}[/]", soft_wrap=True)
    if flags.results is not None:
        _write_results(outcome, model, flags.results)
        stdout.print(f"results: {escape(str(flags.results))}")
    stdout.print(f"quantized model: {escape(str(outcome.output))}")


def variants_table(outcome: QuantizeOutcome) -> Table:
    """Accuracy against FP32 and latency of every variant."""
    table = Table(header_style="bold", title="accuracy vs FP32 and latency (batch 1)")
    for column in ("variant", "precision", "metric", "value", "drop (points)", "cosine", "SQNR dB", "P50 ms", "file"):
        table.add_column(column, justify="left" if column in ("variant", "metric", "file", "precision") else "right")
    for row in outcome.rows:
        acc, timing = row.accuracy, row.timing
        p50 = timing.latency_ms.p50 if timing is not None and timing.latency_ms is not None else None
        table.add_row(
            escape(row.label),
            row.precision,
            acc.metric if acc else "—",
            format_number(acc.value, ".4f") if acc else "—",
            format_number(acc.drop_pct, ".2f") if acc else "—",
            format_number(acc.details.get("cosine_mean"), ".5f") if acc else "—",
            format_number(acc.details.get("sqnr_db"), ".1f") if acc else "—",
            format_number(p50, ".3f"),
            escape(str(row.path)),
        )
    return table


def sensitivity_table(outcome: QuantizeOutcome) -> Table:
    """The per-layer sensitivity ranking, most sensitive first."""
    table = Table(header_style="bold", title="per-layer sensitivity (most sensitive first)")
    for column in ("layer", "op", "drop if kept float", "recovered", "output SQNR gain dB", "activation SQNR dB"):
        table.add_column(column, justify="left" if column in ("layer", "op") else "right")
    for item in outcome.sensitivity:
        table.add_row(
            escape(item.node),
            item.op_type,
            format_number(item.drop_pct_kept_float, ".2f"),
            format_number(item.recovered_pct, ".2f"),
            format_number(item.output_sqnr_gain_db, ".1f"),
            format_number(item.activation_sqnr_db, ".1f"),
        )
    return table


def frontier_table(outcome: QuantizeOutcome, max_drop_pct: float) -> Table:
    """Every mixed-precision candidate the search tried."""
    table = Table(header_style="bold", title=f"mixed-precision frontier (budget {max_drop_pct:g} points)")
    for column in ("layers in float", "metric", "drop (points)", "P50 ms", "float layers"):
        table.add_column(column, justify="left" if column == "float layers" else "right")
    for point in outcome.frontier:
        table.add_row(
            str(len(point.float_nodes)),
            format_number(point.accuracy.value, ".4f"),
            format_number(point.accuracy.drop_pct, ".2f"),
            format_number(point.latency_p50_ms, ".3f"),
            escape(", ".join(point.float_nodes) or "(all int8)"),
        )
    return table


def _write_results(outcome: QuantizeOutcome, model: str, path: Path) -> None:
    """The timed variants as a results file, each case carrying the study's warnings."""
    from infermeter.quantize.pipeline import outcome_results_file
    from infermeter.results.io import write_results

    write_results(path, outcome_results_file(outcome, model, ["infermeter", *sys.argv[1:]]))
