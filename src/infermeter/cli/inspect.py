"""`infermeter inspect MODEL`: where the work, the memory and the fusion opportunities are in a model's graph."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stderr, stdout
from infermeter.cli.options import INPUT, RESHAPE
from infermeter.core.errors import UsageError
from infermeter.graph.ov_inspect import IrReport
from infermeter.models.input_flags import parse_input_flags


def _mb(value: float) -> str:
    return f"{value / 1e6:,.2f}"


def _count(value: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {suffix}"
    return f"{value:,.0f}"


def _print_report(report: dict[str, Any], top: int) -> None:
    shapes = "; ".join(f"{k} {'x'.join(map(str, v))}" for k, v in report["input_shapes"].items())
    stdout.print(f"[bold]{escape(report['model'])}[/]  inputs {escape(shapes)}  ·  {report['node_count']} nodes")
    totals, params = report["totals"], report["parameters"]
    at_least = "≥ " if totals["lower_bound"] else ""  # uncounted nodes: the totals are lower bounds
    stdout.print(
        f"parameters {_count(params['count'])} ({_mb(params['bytes'])} MB)  ·  MACs {at_least}{_count(totals['macs'])}"
        f"  ·  FLOPs {at_least}{_count(totals['flops'])}  ·  bytes moved {at_least}{_mb(totals['bytes_moved'])} MB  ·  "
        f"arithmetic intensity {totals['arithmetic_intensity']:.1f} FLOP/byte"
    )
    uncounted = report["uncounted"]
    if uncounted["nodes"]:
        listed = ", ".join(f"{op} ×{n}" for op, n in uncounted["ops"].items())
        stdout.print(f"[bold]uncounted[/]: {uncounted['nodes']} nodes whose shapes stay unknown ({escape(listed)})")
    ops = Table(title="operators", header_style="bold", title_justify="left")
    for column in ("op", "count", "MACs", "FLOPs", "share", "MB moved", "FLOP/byte"):
        ops.add_column(column, justify="left" if column == "op" else "right")
    for op, row in report["by_op"].items():
        share = row["flops"] / totals["flops"] if totals["flops"] else 0.0
        intensity = row["flops"] / row["bytes_moved"] if row["bytes_moved"] else 0.0
        ops.add_row(
            escape(op),
            str(row["count"]),
            _count(row["macs"]),
            _count(row["flops"]),
            f"{share:.1%}",
            _mb(row["bytes_moved"]),
            f"{intensity:.1f}",
        )
    stdout.print(ops)
    heaviest = sorted(report["nodes"], key=lambda n: -n["flops"])[:top]
    nodes = Table(title=f"heaviest {len(heaviest)} nodes", header_style="bold", title_justify="left")
    for column in ("node", "op", "FLOPs", "MB moved", "FLOP/byte"):
        nodes.add_column(column, justify="left" if column in ("node", "op") else "right")
    for node in heaviest:
        nodes.add_row(
            escape(node["name"]),
            escape(node["op"]),
            _count(node["flops"]),
            _mb(node["bytes_moved"]),
            f"{node['arithmetic_intensity']:.1f}",
        )
    stdout.print(nodes)
    _print_memory_and_fusion(report)


def _print_memory_and_fusion(report: dict[str, Any]) -> None:
    """The report's activation memory, fusion opportunities, ONNX Runtime optimizer counts and notes."""
    memory = report["memory"]
    peak = memory["peak_node"] or {"name": "—", "op": "—"}
    live = ", ".join(f"{t['name']} {_mb(t['bytes'])} MB" for t in memory["live_at_peak"][:4])
    stdout.print(
        f"[bold]activation memory[/]: naive {_mb(memory['naive_bytes'])} MB (every tensor kept)  ·  planned "
        f"{_mb(memory['planned_bytes'])} MB (liveness + greedy offsets, {memory['saving']:.0%} less)  ·  "
        f"lower bound {_mb(memory['live_peak_bytes'])} MB"
    )
    stdout.print(f"  peak at {escape(peak['name'])} ({escape(peak['op'])}); alive there: {escape(live)}")
    fusion = report["fusion"]
    stdout.print(f"[bold]fusion opportunities[/]: {fusion['nodes_saved']} nodes could be fused away")
    for row in fusion["patterns"].values():
        chains = ", ".join(f"{chain} ×{n}" for chain, n in row["chains"].items())
        stdout.print(f"  {escape(row['title'])}: {row['count']} ({escape(chains)})")
    ort = report.get("onnxruntime_optimizer")
    if ort:
        levels = ", ".join(f"{lv['level']} {lv['node_count']}" for lv in ort["levels"])
        stdout.print(f"[bold]ONNX Runtime optimizer[/]: {ort['nodes_before']} nodes before; after: {levels}")
        for level in ort["levels"]:
            if level["new_ops"]:
                stdout.print(f"  {level['level']} adds ORT-specific ops: {escape(', '.join(level['new_ops']))}")
    for note in report["notes"]:
        stdout.print(f"[dim]note: {escape(note)}[/]")


def _print_ir_report(report: IrReport, top: int) -> None:
    shapes = "; ".join(f"{k} {'x'.join(map(str, v))}" for k, v in report.input_shapes.items())
    form = "read by OpenVINO" if report.model.lower().endswith(".tflite") else "OpenVINO IR"
    stdout.print(f"[bold]{escape(report.model)}[/] ({form})  inputs {escape(shapes)}  ·  {report.node_count} ops")
    weights = ", ".join(f"{t} {n} ({_mb(b)} MB)" for t, (n, b) in report.weights.items())
    stdout.print(f"weights: {escape(weights)}  ·  FakeQuantize operations: {report.fake_quantize}")
    ops = Table(title="operations in the IR", header_style="bold", title_justify="left")
    for column in ("op", "count"):
        ops.add_column(column, justify="left" if column == "op" else "right")
    for op, count in list(report.ops.items())[:top]:
        ops.add_row(escape(op), str(count))
    stdout.print(ops)
    layers = Table(title="layers the CPU plugin runs (runtime model)", header_style="bold", title_justify="left")
    for column in ("layer", "precision", "count"):
        layers.add_column(column, justify="right" if column == "count" else "left")
    for row in report.runtime_layers[:top]:
        layers.add_row(escape(row["layer"]), escape(row["precision"]), str(row["count"]))
    stdout.print(layers)
    mix = ", ".join(f"{n} {p}" for p, n in report.mix.items()) or "none"
    stdout.print(f"[bold]compute layers by runtime precision[/]: {escape(mix)}")
    if report.float_layers:
        stdout.print(f"  in float: {escape(', '.join(report.float_layers))}", soft_wrap=True)
    for note in report.notes:
        stdout.print(f"[dim]note: {escape(note)}[/]")


def _print_builds(path: Path) -> None:
    """`inspect RESULTS.json`: each case's built artifact (cache state, build phases) and what its backend can
    tell about it (the kernels auto-tuning worked on, and what each gained)."""
    from infermeter.backends.registry import backend_names, get_backend
    from infermeter.results.io import read_results

    cases = [case for case in read_results(path).cases if case.loading.build is not None]
    if not cases:
        stdout.print(f"{escape(str(path))}: no case loaded a built artifact (nothing was compiled, tuned or built)")
        return
    for case in cases:
        build = case.loading.build
        assert build is not None
        phases = ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in build.build_phases_s.items()) or "—"
        stdout.print(f"[bold]{escape(case.id)}[/]: artifact {build.cache} ({escape(phases)})  {escape(build.path)}")
        report = get_backend(case.backend).artifact_report(build) if case.backend in backend_names() else None
        if report is None:
            continue
        table = Table(title=report.title, header_style="bold", title_justify="left")
        for index, column in enumerate(report.columns):
            table.add_column(column, justify="left" if index == 0 else "right")
        for row in report.rows:
            table.add_row(*(escape(cell) for cell in row))
        stdout.print(table)
        for note in report.notes:
            stdout.print(f"[dim]note: {escape(note)}[/]")


@click.command("inspect")
@click.argument("model")
@click.option(
    "--batch", type=int, help="Batch size the shapes are fixed to (default: 1, or the batch the model fixes)."
)
@INPUT
@RESHAPE
@click.option("--top", type=int, default=10, show_default=True, help="How many of the heaviest nodes to list.")
@click.option("--no-ort", is_flag=True, help="Skip ONNX Runtime's optimizer node counts.")
@click.option("--json", "as_json", is_flag=True, help="The whole report as JSON (every node).")
def inspect_cmd(
    model: str,
    batch: int | None,
    inputs: tuple[str, ...],
    reshape: tuple[str, ...],
    top: int,
    no_ort: bool,
    as_json: bool,
) -> None:
    """Operators, FLOPs and bytes moved, activation memory (naive vs planned) and fusion opportunities of
    MODEL (a built-in model name or an .onnx file) at one batch size / input shape. For an OpenVINO IR (.xml):
    its operations and weights by type, and the layers OpenVINO's CPU plugin runs, with their precisions. For a
    results file (.json): each case's built artifact, and what auto-tuning did (the kernels tuned, and their gain)."""
    from infermeter.graph.analysis import inspect_loaded
    from infermeter.graph.loaded import load_graph
    from infermeter.models.inputs import fixed_batch
    from infermeter.models.reshape import parse_reshape, reshape_notes
    from infermeter.models.resolve import resolve_model

    if model.endswith(".json") and Path(model).is_file():
        _print_builds(Path(model))
        return
    spec = resolve_model(model, parse_reshape(reshape))
    for note in reshape_notes(spec):
        stderr.print(escape(f"warning: {note}"), soft_wrap=True)
    if batch is None:
        found = fixed_batch(spec.inputs)
        batch = found[1] if found else 1
    if batch <= 0:
        raise UsageError(f"--batch {batch} must be positive")
    from infermeter.models.feeds_data import check_input_values

    overrides, values = parse_input_flags(inputs)
    check_input_values(spec.inputs, values)  # a constant sets no shape here, but must name an input
    if spec.kind in ("openvino_ir", "tflite"):  # what OpenVINO reads (its TFLite frontend for .tflite)
        from infermeter.graph.ov_inspect import inspect_ir

        ir_report = inspect_ir(spec, batch, overrides)
        if as_json:
            click.echo(json.dumps(ir_report.to_dict(), indent=2))
        else:
            _print_ir_report(ir_report, max(top, 0))
        return
    report = inspect_loaded(load_graph(spec, batch, overrides), ort_levels=not no_ort)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    _print_report(report, max(top, 0))
