"""`infermeter export`: PyTorch model -> verified ONNX file (+ `<file>.verify.json`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stderr, stdout

STATUS_STYLE = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "skip": "[yellow]skip[/]"}


@click.command("export")
@click.argument("source")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="ONNX file to write."
)
@click.option("--opset", type=click.IntRange(7, 30), default=None, help="ONNX opset (default 18).")
@click.option(
    "--dynamic",
    "dynamic",
    multiple=True,
    metavar="NAME:AXIS=label",
    help="Declare an input axis dynamic (repeatable), e.g. --dynamic input_ids:1=seq. The model's symbolic dims "
    "(batch, and seq for transformers) are always dynamic.",
)
@click.option(
    "--exporter",
    type=click.Choice(["auto", "dynamo", "torchscript"]),
    default="auto",
    show_default=True,
    help="auto: torch.export-based, falling back to TorchScript-based with the reason; or force one.",
)
@click.option("--simplify/--no-simplify", default=True, show_default=True, help="Simplify the graph with onnxslim.")
@click.option("--atol", type=float, default=1e-5, show_default=True, help="Absolute tolerance of the output check.")
@click.option("--rtol", type=float, default=1e-4, show_default=True, help="Relative tolerance of the output check.")
@click.option(
    "--samples", type=click.IntRange(1, 100), default=3, show_default=True, help="Random input sets compared."
)
def export(
    source: str,
    output: Path,
    opset: int | None,
    dynamic: tuple[str, ...],
    exporter: str,
    simplify: bool,
    atol: float,
    rtol: float,
    samples: int,
) -> None:
    """Export SOURCE (zoo name, file.py:factory, package.module:factory or .pt2) to ONNX and verify it.

    Verification: ONNX checker (full), strict shape inference, outputs vs PyTorch within atol + rtol*|ref| on
    several inputs, and every dynamic axis run at two more sizes. Exit 0 when every check passes, 1 when one
    fails (the table says which and why), 2 for bad input.
    """
    from infermeter.core.errors import UsageError
    from infermeter.export.torch_export import DEFAULT_OPSET, export_model, parse_dynamic, report_path
    from infermeter.models.resolve import resolve_model

    if atol < 0 or rtol < 0:
        raise UsageError("--atol and --rtol must be zero or more")
    if output.suffix.lower() != ".onnx":
        raise UsageError(f"-o {str(output)!r}: the output must be an .onnx file")
    spec = resolve_model(source)
    axes = parse_dynamic(dynamic, spec)
    with stderr.status(f"exporting {escape(source)} and verifying it…"):
        report = export_model(
            spec, output, opset or DEFAULT_OPSET, axes, simplify, atol, rtol, samples, exporter=exporter
        )
    table = Table(header_style="bold", title=f"export {escape(source)} -> {escape(str(output))}")
    for column in ("check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        table.add_row(check.name, STATUS_STYLE[check.status], escape(check.detail))
    stdout.print(table)
    stdout.print(f"verification report: {escape(str(report_path(output)))}")
    if not report.ok:
        failed = ", ".join(c.name for c in report.checks if c.status == "fail")
        stderr.print(f"[red]verification failed[/]: {escape(failed)}")
        sys.exit(1)
