"""`infermeter check`: a model's CI in one command (export, parity, the latency gate), with a markdown summary and
JUnit XML. Exit 0 when every check passes, 1 when one fails, 2 for a usage error."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stderr, stdout

if TYPE_CHECKING:
    from infermeter.modelci.run import CheckReport

_STYLE = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "skip": "[yellow]skip[/]"}


@click.command("check")
@click.argument("model", required=False)
@click.option(
    "--baseline",
    help="What to compare latency with: a model (file.py:factory, module:factory, folder, .onnx) or git:REV, the "
    "model's own source at a git revision (checked out into a temporary worktree).",
)
@click.option("--backend", "-b", "backends", multiple=True, help="Engines to check parity on (default onnxruntime).")
@click.option("--latency-backend", help="The engine the latency gate measures on (default: the first -b).")
@click.option("--threshold", help="Smallest slowdown that fails the gate (default 5%).")
@click.option("--alpha", type=float, help="False-alarm rate of the sequential decision (default 0.01).")
@click.option("--beta", type=float, help="Miss rate at --threshold of the sequential decision (default 0.05).")
@click.option("--same-within", help="A change within this counts as none, e.g. 1% (default: 0.2 × --threshold).")
@click.option("--budget-rounds", type=int, help="At most this many rounds; undecided then fails (default 60).")
@click.option("--batch", type=int, help="Batch size of every check (default 1).")
@click.option("--threads", type=int, help="Intra-op threads (default: one per physical core).")
@click.option("--min-time", type=float, help="Timed seconds per side (default 2).")
@click.option("--max-time", type=float, help="At most these timed seconds per side (default 30).")
@click.option("--rounds", type=int, help="At least this many interleaved rounds (default 6).")
@click.option("--samples", type=int, help="Random input sets for the output checks (default 3).")
@click.option(
    "--same-outputs/--any-outputs",
    default=None,
    help="Also require the model's PyTorch outputs to match the baseline's (a refactoring must not change them).",
)
@click.option("--summary", type=click.Path(dir_okay=False, path_type=Path), help="Write the markdown summary here.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Write JUnit XML here.")
@click.option(
    "--export-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the exported ONNX file (and its .verify.json) in this folder.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="pyproject.toml to read [tool.infermeter.check] from (default: the nearest one above the current folder).",
)
def check(
    model: str | None,
    summary: Path | None,
    junit: Path | None,
    export_dir: Path | None,
    config: Path | None,
    **flags: Any,
) -> None:
    """Check MODEL for CI: export it to ONNX with its dynamic axes (an unsupported operator is named with the module
    that calls it), check parity on each engine, and compare its latency with --baseline, both measured in the same
    interleaved rounds. Settings not given come from [tool.infermeter.check] in pyproject.toml.

    Writes a markdown summary (appended to $GITHUB_STEP_SUMMARY when set, and to --summary) and --junit XML.
    Exit 0 when every check passes, 1 when one fails (the latency gate fails on a slowdown of --threshold decided
    by a sequential test, or when its --budget-rounds end undecided: docs/regression-gate.md), 2 for a usage error.
    """
    from infermeter.core.errors import UsageError
    from infermeter.core.interrupts import terminate_as_interrupt
    from infermeter.modelci.config import apply_settings, config_from_pyproject, find_pyproject
    from infermeter.modelci.run import run_check

    if config is not None and not config.is_file():
        raise UsageError(f"--config {config}: no such file")
    settings = config_from_pyproject(config or find_pyproject(Path.cwd()))
    given = {key: value for key, value in flags.items() if value not in (None, ())}
    settings = apply_settings(settings, {"model": model, **given}, "the command line")
    with terminate_as_interrupt():  # a cancelled CI job (SIGTERM) still removes the baseline's worktree
        report = run_check(settings, export_dir, lambda text: stderr.print(f"[dim]{escape(text)}…[/]"))
    _print(report)
    _write_outputs(report, summary, junit)
    if not report.ok:
        stderr.print(f"[red]check failed[/]: {escape(', '.join(o.name for o in report.failures))}")
        sys.exit(1)


def _print(report: CheckReport) -> None:
    table = Table(header_style="bold", title=f"check {escape(report.config.model)}")
    for column in ("check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for outcome in report.outcomes:
        table.add_row(escape(outcome.name), _STYLE[outcome.status], escape(outcome.reason))
    stdout.print(table)


def _write_outputs(report: CheckReport, summary: Path | None, junit: Path | None) -> None:
    from infermeter.modelci.summary import render_junit, render_markdown, step_summary_path, write_text

    markdown = render_markdown(report)
    github = step_summary_path()
    if github is not None:
        write_text(github, markdown, append=True)
        stdout.print(f"step summary: {escape(str(github))}")
    if summary is not None:
        write_text(summary, markdown)
        stdout.print(f"summary: {escape(str(summary))}")
    if junit is not None:
        write_text(junit, render_junit(report))
        stdout.print(f"junit: {escape(str(junit))}")
