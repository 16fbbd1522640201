"""The console form of an explain record: the top blocks by difference (the rest summed in one row), each
engine's P50 / attributed / data movement / unattributed row, then the findings and notes."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infermeter.report.explain_section import ENGINE_COLUMNS, engine_cells, microseconds
from infermeter.results.explain import Block, ExplainRecord

KERNEL_CHARS = 48


def _cell(block: Block, engine: str) -> str:
    if engine not in block.time_us:
        return "—"
    share = block.share.get(engine)
    return f"{block.time_us[engine]:,.1f}" + (f" ({share:.0%})" if share is not None else "")


def blocks_table(record: ExplainRecord, top: int) -> Table:
    """The blocks table: one row per top block, one summing the rest."""
    engines = record.profiled_engines()
    table = Table(
        title=f"blocks by difference (top {top} of {len(record.blocks)})", header_style="bold", title_justify="left"
    )
    for column in ("block", "ops", *(f"{e} µs (share)" for e in engines), "diff µs", "diff share", "kernels"):
        table.add_column(column, justify="left" if column in ("block", "ops", "kernels") else "right")
    for block in record.blocks[:top]:
        kernels = " | ".join(f"{e}: {block.kernels[e][:KERNEL_CHARS]}" for e in engines if block.kernels.get(e))
        table.add_row(
            escape(block.label),
            escape("+".join(block.op_types)),
            *(_cell(block, e) for e in engines),
            microseconds(block.difference_us),
            f"{block.difference_share:.0%}",
            escape(kernels),
        )
    rest = record.blocks[top:]
    if rest:
        sums = [sum(b.time_us.get(e, 0.0) for b in rest) for e in engines]
        table.add_row(
            f"({len(rest)} more blocks)",
            "",
            *(microseconds(s) for s in sums),
            microseconds(sum(b.difference_us for b in rest)),
            f"{sum(b.difference_share for b in rest):.0%}",
            "",
        )
    return table


def engines_table(record: ExplainRecord) -> Table:
    """One row per engine: its P50 and what its profile accounts for."""
    table = Table(title="engines", header_style="bold", title_justify="left")
    for column in ENGINE_COLUMNS:
        table.add_column(column, justify="left" if column in ("engine", "precision") else "right")
    for engine in record.engines:
        table.add_row(*(escape(cell) for cell in engine_cells(engine)))
    return table


def print_record(record: ExplainRecord, console: Console, top: int = 10) -> None:
    """The whole record on `console`."""
    console.print(
        f"[bold]{escape(record.model)}[/]  batch {record.batch}  ·  {record.threads} thread(s)  ·  "
        f"{record.precision}  ·  {record.node_count} nodes  ·  {record.iterations} iterations per run"
    )
    if record.profiled_engines():
        console.print(blocks_table(record, top))
    console.print(engines_table(record))
    for e in record.engines:
        if e.error:
            console.print(f"[red]{escape(e.engine)}[/]: {escape(e.error)}", soft_wrap=True)
        for note in e.notes:
            console.print(f"[dim]{escape(e.engine)}: {escape(note)}[/]", soft_wrap=True)
        if e.folded_nodes:
            console.print(
                f"[dim]{escape(e.engine)}: {len(e.folded_nodes)} shape computation node(s) folded at load, "
                "in no unit[/]",
                soft_wrap=True,
            )
        if e.uncovered_nodes:
            listed = ", ".join(e.uncovered_nodes[:8]) + (" …" if len(e.uncovered_nodes) > 8 else "")
            console.print(f"[dim]{escape(e.engine)}: not aligned: {escape(listed)}[/]", soft_wrap=True)
    _print_rates(record, console, top)
    if record.findings:
        console.print("[bold]findings[/] (by the time each explains)")
        for finding in record.findings:
            where = f" (block {escape(finding.block)})" if finding.block else ""
            console.print(f"  {escape(finding.code)}{where}: {escape(finding.text)}", soft_wrap=True)
    for note in record.notes:
        console.print(f"[dim]note: {escape(note)}[/]", soft_wrap=True)


def _print_rates(record: ExplainRecord, console: Console, top: int) -> None:
    """Achieved GFLOP/s of the top blocks that do arithmetic, per engine (and of the machine's cached peak)."""
    rows = [b for b in record.blocks[:top] if b.gflops_per_s]
    if not rows:
        return
    peak = f" (peak {record.peak_gflops:,.0f} GFLOP/s cached by `infermeter peak`)" if record.peak_gflops else ""
    console.print(f"[bold]achieved GFLOP/s[/]{peak}")
    for block in rows:
        rates = ", ".join(
            f"{e} {r:,.1f}" + (f" ({block.peak_fraction[e]:.0%} of peak)" if e in block.peak_fraction else "")
            for e, r in block.gflops_per_s.items()
        )
        console.print(f"  {escape(block.label)}: {escape(rates)}", soft_wrap=True)
