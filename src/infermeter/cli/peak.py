"""`infermeter peak`: this machine's measured compute and bandwidth ceilings (cached per machine)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import stderr, stdout


def _print_peak(peak: dict[str, Any], cache_hit: bool, title: str) -> None:
    engines = peak.get("engines", {})
    table = Table(title=title, header_style="bold", title_justify="left")
    for column in ("ceiling", "value", "engine"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for label, key, unit, precision in (
        ("FP32", "fp32_gflops", "GFLOP/s", "fp32"),
        ("TF32", "tf32_gflops", "GFLOP/s", "tf32"),
        ("BF16", "bf16_gflops", "GFLOP/s", "bf16"),
        ("FP16", "fp16_gflops", "GFLOP/s", "fp16"),
        ("INT8", "int8_gops", "GOP/s", "int8"),
        ("memory bandwidth", "bandwidth_gbs", "GB/s", "bandwidth"),
    ):
        value = peak.get(key)
        if value is None and precision == "tf32":
            continue
        shown = f"{value:,.1f} {unit}" if value is not None else "—"
        table.add_row(label, shown, escape(engines.get(precision, "not measurable here")))
    stdout.print(table)
    probes = Table(header_style="bold", title="every probe (best / median of trials, spread)", title_justify="left")
    for column in ("engine", "precision", "best", "median", "spread", "note"):
        probes.add_column(column, justify="right" if column in ("best", "median", "spread") else "left")
    for probe in peak.get("probes", []):
        if "skipped" in probe:
            probes.add_row(escape(probe["engine"]), probe["precision"], "—", "—", "—", escape(probe["skipped"]))
        else:
            probes.add_row(
                escape(probe["engine"]),
                probe["precision"],
                f"{probe['best']:,.1f} {probe['unit']}",
                f"{probe['median']:,.1f}",
                f"{probe['spread']:.0%}",
                escape(probe.get("note", "")),
            )
    stdout.print(probes)


@click.command("peak")
@click.option("--refresh", is_flag=True, help="Measure again instead of using this machine's cached figures.")
@click.option("--threads", type=int, default=None, help="Threads for the CPU probes [default: one per core].")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def peak(refresh: bool, threads: int | None, as_json: bool) -> None:
    """Measure this machine's ceilings: FP32/BF16/FP16/INT8 compute with the fastest engine available
    (numpy, torch, ONNX Runtime, OpenVINO) and memory bandwidth; the same on a CUDA GPU when present.
    Cached per machine (CPU, ISA, cores, threads, framework versions); about 35-90 s when measured
    (longer on a machine whose speed moves: rounds go on until the ceilings settle)."""
    from infermeter.core.errors import UsageError
    from infermeter.machine.ceilings_cache import load_or_measure_peak

    if threads is not None and threads <= 0:
        raise UsageError(f"--threads {threads} must be positive")

    def progress(step: str) -> None:
        if not as_json:
            stderr.print(f"[dim]measuring {escape(step)}…[/]")

    result, cache_hit = load_or_measure_peak(refresh=refresh, threads=threads, progress=progress)
    if as_json:
        click.echo(json.dumps({**result, "cache_hit": cache_hit}, indent=2))
        return
    source = "cached" if cache_hit else f"measured in {result.get('duration_s', 0):.1f} s"
    _print_peak(result, cache_hit, f"CPU ceilings, {result.get('threads')} threads ({source})")
    if isinstance(result.get("gpu"), dict):
        _print_peak(result["gpu"], cache_hit, f"GPU ceilings: {result['gpu'].get('device', '')}")
    stdout.print(f"[dim]method: {escape(result.get('method', ''))}[/]")
    variation = result.get("speed_variation")
    if isinstance(variation, dict) and not variation.get("steady", True):
        stdout.print(
            f"[yellow]warning:[/] this machine's own speed moved {variation['ratio']:.2f}× between trials of the same "
            f"work ({escape(variation['engine'])} {variation['precision']}): a shared or virtual machine, or frequency "
            "scaling. Ceilings measured here can differ by that much run to run; compare fractions of peak with care."
        )
    if cache_hit:
        stdout.print("[dim]cached figures; `infermeter peak --refresh` measures again (on a quiet machine)[/]")
