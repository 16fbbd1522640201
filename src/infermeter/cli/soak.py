"""`bench --soak N`: the soak's flags (memory under a long variable-shape stream), the per-case memory limit and
allocator, and the soak table printed after the summary."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import click

from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.core.validation import parse_memory_mb, split_values
from infermeter.measure.scenarios import scenario_of
from infermeter.results.schema import CaseResult

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--soak",
        type=int,
        default=0,
        help="Soak: feed N requests whose --dynamic sizes follow --soak-lengths (seeded, the same for every case): "
        "warm-up, exploration until every size is seen, then a replay; memory sampled throughout.",
    ),
    click.option(
        "--soak-minutes",
        type=float,
        default=0.0,
        help="Soak for this many minutes (with --soak: whichever ends first).",
    ),
    click.option(
        "--soak-lengths",
        default="uniform",
        show_default=True,
        help="Distribution of the soak's sizes: uniform, zipf (short ones common), lognormal, or data (--data's).",
    ),
    click.option(
        "--soak-sample-every",
        type=int,
        default=100,
        show_default=True,
        help="Sample RSS/USS every N requests (and at least every 2 s).",
    ),
    click.option(
        "--soak-recycle",
        type=int,
        default=0,
        help="Soak: reload the session after every N requests, as `serve --recycle-after N` does (0: never).",
    ),
    click.option(
        "--memory-limit",
        help="Run each case under this much memory (e.g. 512MB): cgroup v2 memory.max where writable, else "
        "RLIMIT_AS (address space). A case past it is recorded as `oom` with the peak it reached.",
    ),
    click.option(
        "--allocator",
        multiple=True,
        help="Each case under each malloc: glibc (default), arenas=N (MALLOC_ARENA_MAX), jemalloc, tcmalloc.",
    ),
)


def soak_options(command: F) -> F:
    """The soak, memory-limit and allocator flags, added to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def soak_settings(settings: MeasureSettings, flags: dict[str, Any], isolated: bool) -> MeasureSettings:
    """`settings` with the soak and memory-limit flags applied. A memory limit or a soak runs each case on its own
    (not interleaved), in its own worker."""
    limit = parse_memory_mb(flags["memory_limit"], "--memory-limit") if flags.get("memory_limit") else 0.0
    settings = replace(
        settings,
        soak_requests=flags["soak"],
        soak_minutes=flags["soak_minutes"],
        soak_lengths=flags["soak_lengths"],
        soak_sample_every=flags["soak_sample_every"],
        soak_recycle_after=flags["soak_recycle"],
        memory_limit_mb=limit,
    )
    alone = scenario_of(settings).isolated_only or limit > 0
    if alone and not isolated:
        raise UsageError("--soak and --memory-limit run each case in a worker of its own; drop --no-isolation")
    if alone:
        settings = replace(settings, interleave=False)
    return settings


def allocators(flags: dict[str, Any]) -> tuple[str, ...]:
    """The --allocator values (none: the default malloc only)."""
    return tuple(split_values(flags.get("allocator") or ()))


def print_soak(cases: Sequence[CaseResult]) -> None:
    """The soak table (slope, plateau, peak, latency drift per case) and each growing case's remedy."""
    from infermeter.cli.common import stdout
    from infermeter.report.soak import soak_remedies, soak_table
    from infermeter.report.terminal import print_table

    table = soak_table(cases)
    if table is None:
        return
    print_table(table, title="soak: memory over the replay of shapes already seen")
    for line in soak_remedies(cases):
        stdout.print(line, soft_wrap=True)
