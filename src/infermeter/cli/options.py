"""Flags shared by the commands, each declared once: the measurement group of bench, optimize and `compare --rerun`
(it builds `MeasureSettings` by keyword), and single flags several commands take (-b/--backend, --threads, -O...).

A command's defaults may differ where its purpose needs it (optimize measures many candidates within a budget, so
its cases are shorter); the names and the help are the same everywhere, and `tests/test_cli_flags.py` checks that
every flag of the same name agrees across commands.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from infermeter.cli.common import RESHAPE_HELP
from infermeter.core.case import MeasureSettings
from infermeter.core.validation import check_settings, parse_fraction

if TYPE_CHECKING:
    from infermeter.compare.decision import DecisionParams

Command = Callable[..., Any]
Decorator = Callable[[Command], Command]  # what click.option returns; the option groups are the same


def apply(*options: Decorator) -> Decorator:
    """One decorator of several click options, shown in `--help` in the order given."""

    def decorate(func: Command) -> Command:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def option_group(name: str, group: type[Any], *options: Decorator) -> Decorator:
    """Adds `options` to a command and hands the command one `group` instance (a dataclass whose fields are the
    options' parameter names) as keyword `name`, instead of one parameter per flag. `ctx.params` keeps the flags
    one by one, for the checks that ask which flags were typed."""
    names = [field.name for field in dataclasses.fields(group)]

    def decorate(func: Command) -> Command:
        @functools.wraps(func)
        def grouped(*args: Any, **kwargs: Any) -> Any:
            values = {key: kwargs.pop(key) for key in names}
            return func(*args, **{name: group(**values)}, **kwargs)

        return apply(*options)(grouped)

    return decorate


# Single shared flags.
BACKEND = click.option(
    "--backend",
    "-b",
    multiple=True,
    help="Backends (repeat or comma-separate). Default: every available backend of the target device "
    "(--device, else CPU).",
)
THREADS = click.option("--threads", type=int, default=0, help="Intra-op threads for every backend (0: physical cores).")
OPTION = click.option(
    "--option",
    "-O",
    multiple=True,
    help="Backend option KEY=VALUE, e.g. onnxruntime.opt_level=basic (a prefixed key goes to that backend only).",
)
INPUT = click.option(
    "--input",
    "inputs",
    multiple=True,
    help="A model input's shape, NAME:1x3x224x224 (batch follows --batch; sizes a symbolic dim; a name may hold "
    "colons: in:0:1x16), or a constant, NAME=VALUE (sr=16000).",
)
RESHAPE = click.option("--reshape", multiple=True, metavar="NAME:DIMS", help=RESHAPE_HELP)
SEED = click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs.")
CLUSTER = click.option(
    "--cluster",
    envvar="RAY_ADDRESS",
    help="Measure the cases on a Ray cluster, one case per node at a time: its address (HEAD:6379), or `local` to "
    "start one here; also RAY_ADDRESS. Needs infermeter[cluster] (docs/cluster.md).",
)
ALLOW_MIXED_PRECISION = click.option(
    "--allow-mixed-precision",
    is_flag=True,
    help="Also compare cases whose effective precisions differ (their speedups are marked).",
)


@dataclass(frozen=True, kw_only=True)
class MeasureFlags:
    """The measurement group's flags as typed (`--target-ci` still text: `1%`)."""

    warmup: int
    iterations: int
    min_time: float
    max_time: float
    target_ci: str
    rounds: int
    case_timeout: float
    seed: int

    def settings(self, **more: Any) -> MeasureSettings:
        """The flags as `MeasureSettings`, by keyword (`more`: other fields, e.g. bench's `repeat`), checked:
        UsageError naming the flag for a value that cannot work."""
        settings = MeasureSettings(
            warmup_iterations=self.warmup,
            min_iterations=self.iterations,
            min_time_s=self.min_time,
            max_time_s=self.max_time,
            target_ci=parse_fraction(self.target_ci, "--target-ci"),
            rounds=self.rounds,
            case_timeout_s=self.case_timeout,
            seed=self.seed,
            **more,
        )
        check_settings(settings)
        return settings


def measure_options(defaults: MeasureSettings = MeasureSettings()) -> Decorator:
    """The measurement group (warm-up, counts, times, precision target, rounds, timeout, seed) with the command's
    `defaults`; the command gets one `measure: MeasureFlags`."""
    return option_group(
        "measure",
        MeasureFlags,
        click.option(
            "--warmup",
            type=int,
            default=defaults.warmup_iterations,
            show_default=True,
            help="Untimed warm-up iterations after the first inference (a generation case: requests, default 1).",
        ),
        click.option(
            "--iterations",
            type=int,
            default=defaults.min_iterations,
            show_default=True,
            help="Minimum timed iterations per case.",
        ),
        click.option(
            "--min-time",
            type=float,
            default=defaults.min_time_s,
            show_default=True,
            help="Minimum seconds of timed loop per case.",
        ),
        click.option(
            "--max-time",
            type=float,
            default=defaults.max_time_s,
            show_default=True,
            help="Maximum seconds of timed loop per case (wins over --iterations).",
        ),
        click.option(
            "--target-ci",
            default=f"{defaults.target_ci * 100:g}%",
            show_default=True,
            help="Stop a case once its P50's 95% interval (in rounds: the ratio's) is within ± this (e.g. 1%, 0.5%); "
            "0: no precision target.",
        ),
        click.option(
            "--rounds",
            type=int,
            default=defaults.rounds,
            show_default=True,
            help="Interleaved comparisons: at least this many rounds (each case runs once per round, order varied).",
        ),
        click.option(
            "--case-timeout",
            type=float,
            default=defaults.case_timeout_s,
            show_default=True,
            help="Seconds before a case's worker is killed (a soak's: seconds without progress).",
        ),
        SEED,
    )


@dataclass(frozen=True, kw_only=True)
class DecisionFlags:
    """The sequential decision's own flags (`infermeter.compare.decision`); α and δ are the command's --alpha and
    --threshold. `same_within` still text (`1%`), None: a fifth of --threshold."""

    beta: float
    same_within: str | None
    budget_rounds: int

    def params(self, alpha: float, threshold: float, min_rounds: int) -> DecisionParams:
        """The flags with --alpha, --threshold and --rounds (the fewest rounds before a stop) as `DecisionParams`,
        checked: UsageError naming the flag and its accepted range."""
        from infermeter.compare.decision import DecisionParams

        same = None if self.same_within is None else parse_fraction(self.same_within, "--same-within")
        return DecisionParams(alpha, self.beta, threshold, same, min_rounds, self.budget_rounds).checked()


def decision_options() -> Decorator:
    """The sequential decision's group (--beta, --same-within, --budget-rounds); the command gets one
    `decision: DecisionFlags`."""
    from infermeter.compare.decision import DEFAULT_BETA, DEFAULT_BUDGET_ROUNDS, SAME_SHARE

    return option_group(
        "decision",
        DecisionFlags,
        click.option(
            "--beta",
            type=float,
            default=DEFAULT_BETA,
            show_default=True,
            help="Miss rate of the sequential decision: a slowdown of --threshold is let through at most this often.",
        ),
        click.option(
            "--same-within",
            default=None,
            help=f"A change within this counts as none, e.g. 1% (default: {SAME_SHARE:g} × --threshold).",
        ),
        click.option(
            "--budget-rounds",
            type=int,
            default=DEFAULT_BUDGET_ROUNDS,
            show_default=True,
            help="At most this many interleaved rounds; undecided then: unknown, which fails the gate.",
        ),
    )
