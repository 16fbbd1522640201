"""`bench --resume FILE`: which flags may go with it. (The new or resumed sweep itself is made in
`infermeter.measure.benchrun`.)

`--resume FILE` alone replays the plan stored in FILE (its remaining cases, in order); flags that would change the
plan are refused, unless `--resume-extend` says to add their cases to it. Every check runs before the first write,
so a file that cannot be resumed is left untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
from click.core import ParameterSource

from infermeter.core.errors import UsageError

# The bench parameters that decide which cases run and how they are measured: the plan stored in the file.
PLAN_PARAMS = (
    "models", "backend", "fallback", "batch", "precision", "shape_mode", "dynamic", "buckets", "seq_len",
    "streams", "threads", "warmup", "iterations", "target_ci", "rounds", "no_interleave", "min_time", "max_time",
    "case_timeout", "build_timeout", "input_sets", "inputs", "data", "option", "compile_mode", "ort_opt_level",
    "ov_hint",
    "check_parity", "seed", "scenario", "no_isolation", "machines", "reshape",
    "soak", "soak_minutes", "soak_lengths", "soak_sample_every", "soak_recycle", "memory_limit",
    "allocator", "repeat",
)  # fmt: skip


def given_plan_flags(ctx: click.Context) -> list[str]:
    """The plan flags typed on the command line (or set from the environment), as the user wrote them."""
    given = []
    for param in ctx.command.params:
        if param.name not in PLAN_PARAMS:
            continue
        source = ctx.get_parameter_source(param.name)
        value = ctx.params.get(param.name)
        if source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT) and value not in ((), None):
            given.append(param.human_readable_name if isinstance(param, click.Argument) else param.opts[0])
    return given


def check_resume_flags(resume: Path | None, extend: bool, given: Sequence[str]) -> None:
    """Refuse flags given with a bare `--resume` that would change the plan, and `--resume-extend` without use."""
    if extend and resume is None:
        raise UsageError("--resume-extend goes with --resume FILE: it adds cases to that file's plan")
    if extend and not given:
        raise UsageError("--resume-extend needs the matrix flags of the cases to add (e.g. MODEL, -b, --batch)")
    if resume is not None and not extend and given:
        raise UsageError(
            f"--resume replays the plan stored in {resume}; {', '.join(given)} would change it: drop "
            f"{'it' if len(given) == 1 else 'them'}, or add --resume-extend to add their cases to the plan"
        )
