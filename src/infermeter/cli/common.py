"""Helpers shared by the commands: consoles, matrix-flag parsing, value checks (the checks the Python API
shares are in `infermeter.core.validation`, re-exported here)."""

from __future__ import annotations

import click

from infermeter.core.errors import InfermeterError, UsageError
from infermeter.core.validation import check_price_per_hour as check_price_per_hour
from infermeter.core.validation import choose as choose
from infermeter.core.validation import parse_fraction as parse_fraction
from infermeter.core.validation import parse_options as parse_options
from infermeter.core.validation import parse_positive_ints as parse_positive_ints
from infermeter.core.validation import require_positive as require_positive
from infermeter.core.validation import split_values as split_values
from infermeter.report.terminal import stderr as stderr
from infermeter.report.terminal import stdout as stdout


def error_message(exc: InfermeterError) -> str:
    """The line the command line prints for `exc`: its message, and for a model with no PyTorch form the backends
    that read its file (`NoTorchForm` carries the suffix only: models sit below the backends)."""
    from infermeter.models.spec import NoTorchForm

    if isinstance(exc, NoTorchForm):
        from infermeter.backends.registry import readers_hint

        return f"{exc}; {readers_hint(exc.suffix)}"
    return str(exc)


RESHAPE_HELP = (
    "Rewrite dims the model file declares fixed, NAME:DIMS (e.g. images:1x3x480x640), before it is loaded: "
    "ONNX via onnx.tools.update_model_dims, OpenVINO IR via Model.reshape. --input sizes symbolic dims only."
)


PRICE_PER_HOUR = click.option(
    "--price-per-hour",
    type=float,
    help="The machine's price per hour (your currency): every candidate gets its cost per million inferences at its "
    "measured throughput.",
)

MEMORY_BUDGET = click.option(
    "--memory-budget",
    help="The target device's memory (e.g. 512MB, 2GB): candidates whose measured peak exceeds it are dropped, "
    "with the reason (the same as --max-memory-mb, with units).",
)


def memory_budget_mb(max_memory_mb: float | None, memory_budget: str | None) -> float | None:
    """The peak-memory limit of `--max-memory-mb` or `--memory-budget` (advise, optimize); UsageError when both
    are given and disagree."""
    from infermeter.core.validation import parse_memory_mb

    if memory_budget is None:
        return max_memory_mb
    budget = parse_memory_mb(memory_budget, "--memory-budget")
    if max_memory_mb is not None and abs(max_memory_mb - budget) > 1e-9:
        raise UsageError(f"--memory-budget {memory_budget} and --max-memory-mb {max_memory_mb:g} disagree: give one")
    return budget
