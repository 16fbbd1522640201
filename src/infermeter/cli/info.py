"""`infermeter backends`, `infermeter env` and `infermeter models`: what this machine has."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stdout


@click.command("backends")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def backends(as_json: bool) -> None:
    """List every known backend: available or not, version, and why not with the install hint."""
    from infermeter.backends.registry import backend_names, get_backend

    rows: list[dict[str, Any]] = []
    for name in backend_names():
        cls = get_backend(name)
        reason = cls.available()
        rows.append(
            {
                "name": name,
                "available": reason is None,
                "version": cls.version(),
                "device": cls.device,
                "precisions": list(cls.precisions),
                "description": cls.description,
                "reason": reason,
            }
        )
    if as_json:
        stdout.print_json(json.dumps(rows))
        return
    table = Table(header_style="bold")
    for column in ("backend", "status", "version", "device", "precisions", "notes"):
        table.add_column(column)
    for row in rows:
        status = "[green]available[/]" if row["available"] else "[red]unavailable[/]"
        table.add_row(
            row["name"],
            status,
            row["version"] or "—",
            row["device"],
            ", ".join(row["precisions"]),
            escape(row["reason"] or row["description"]),
        )
    stdout.print(table)


@click.command("env")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def env(as_json: bool) -> None:
    """Show the machine metadata recorded with every results file."""
    from infermeter.results.env import collect_environment, default_threads

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
def models() -> None:
    """List the built-in models with their inputs."""
    from infermeter.models.zoo import DEFAULT_MODEL, ZOO

    table = Table(header_style="bold")
    for column in ("model", "inputs", "task", "description"):
        table.add_column(column)
    for entry in ZOO.values():
        name = entry.name + (" (default)" if entry.name == DEFAULT_MODEL else "")
        table.add_row(name, escape("; ".join(i.describe() for i in entry.inputs)), entry.task, entry.description)
    stdout.print(table)
