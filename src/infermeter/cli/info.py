"""`infermeter backends`, `infermeter env` and `infermeter models`: what this machine has."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stderr, stdout

if TYPE_CHECKING:
    from infermeter.backends.listing import OptionRow


@click.command("backends")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--options", "show_options", is_flag=True, help="List every backend option (-O KEY=VALUE) instead.")
def backends(as_json: bool, show_options: bool) -> None:
    """List every known backend, inference and generation: available or not, version, and why not with the
    install hint. With --options: every option a backend reads, its values, default and help."""
    from infermeter.backends.listing import backend_rows, option_rows

    if show_options:
        _print_options(option_rows(), as_json)
        return
    rows = backend_rows()
    if as_json:
        stdout.print_json(json.dumps([row.to_dict() for row in rows]))
        return
    table = Table(header_style="bold")
    for column in ("backend", "task", "status", "version", "device", "precisions", "notes"):
        table.add_column(column)
    for row in rows:
        status = "[green]available[/]" if row.available else "[red]unavailable[/]"
        precisions = ", ".join(row.precisions) or "—"
        notes = escape(row.reason or row.description)
        table.add_row(row.name, row.task, status, row.version or "—", row.device, precisions, notes)
    stdout.print(table)
    stdout.print("options: infermeter backends --options")


def _print_options(rows: list[OptionRow], as_json: bool) -> None:
    if as_json:
        stdout.print_json(json.dumps([row.to_dict() for row in rows]))
        return
    table = Table(header_style="bold")
    for column in ("option", "values", "default", "backends", "what it does"):
        table.add_column(column, overflow="fold")
    for row in rows:
        default = "—" if row.default is None else row.default
        table.add_row(row.key, escape(row.accepts), escape(default), ", ".join(row.backends), escape(row.help))
    stdout.print(table)


@click.command("env")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def env(as_json: bool) -> None:
    """Show the machine metadata recorded with every results file."""
    from infermeter.machine.environment import collect_environment
    from infermeter.results.env import default_threads

    data = collect_environment()
    data["default_threads"] = default_threads()
    if as_json:
        stdout.print_json(json.dumps(data))
        return
    table = Table(show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in data.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "—"
        elif isinstance(value, list):
            value = ", ".join(str(v) for v in value) or "—"
        table.add_row(key, escape(str(value)))
    stdout.print(table)


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--no-cost", is_flag=True, help="Skip parameters and FLOPs (they build every model once, then are cached)."
)
def models(as_json: bool, no_cost: bool) -> None:
    """List the built-in models: inputs, parameters, FLOPs (batch 1), task. Also accepted as MODEL: an .onnx or
    .pt2 file, path/to/file.py:factory or package.module:factory (see `infermeter export --help`)."""
    from infermeter.models.zoo import DEFAULT_MODEL, ZOO

    costs = {}
    if not no_cost:
        from infermeter.models.zoo_costs import model_costs

        with stderr.status("counting parameters and FLOPs (cached after the first run)…"):
            costs = {cost.name: cost for cost in model_costs()}
    rows: list[dict[str, Any]] = []
    for entry in ZOO.values():
        cost = costs.get(entry.name)
        rows.append(
            {
                "name": entry.name,
                "default": entry.name == DEFAULT_MODEL,
                "inputs": [i.describe() for i in entry.inputs],
                "default_dims": dict(entry.default_dims),
                "outputs": list(entry.output_names),
                "task": entry.task,
                "description": entry.description,
                "parameters": cost.parameters if cost else None,
                "flops": cost.flops if cost else None,
                "flops_shapes": cost.shapes if cost else None,
                "flops_method": cost.method if cost else None,
                "cost_error": cost.error if cost else None,
            }
        )
    if as_json:
        stdout.print_json(json.dumps(rows))
        return
    table = Table(header_style="bold")
    for column in ("model", "inputs", "params", "GFLOPs", "task", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        name = row["name"] + (" (default)" if row["default"] else "")
        inputs = "; ".join(row["inputs"])
        if row["default_dims"]:
            inputs += " (" + ", ".join(f"{k}={v}" for k, v in row["default_dims"].items()) + " by default)"
        params = f"{row['parameters'] / 1e6:.2f} M" if row["parameters"] is not None else "—"
        flops = f"{row['flops'] / 1e9:.3f}" if row["flops"] is not None else "—"
        description = row["description"] + (f" [cost unavailable: {row['cost_error']}]" if row["cost_error"] else "")
        table.add_row(name, escape(inputs), params, flops, row["task"], escape(description))
    stdout.print(table)
    if costs:
        from infermeter.models.zoo_costs import FLOP_METHOD

        stdout.print(f"GFLOPs: {FLOP_METHOD}, default sequence length for text models.")
