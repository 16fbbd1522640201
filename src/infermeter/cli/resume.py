"""`bench --resume FILE`: open the results file a sweep writes to, new or resumed, with the plan it runs.

A new file gets the plan before its first case. `--resume FILE` alone replays the plan stored in FILE (its
remaining cases, in order); flags that would change the plan are refused, unless `--resume-extend` says to add
their cases to it. Every check runs before the first write, so a file that cannot be resumed is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from infermeter.errors import ResultsError, UsageError
from infermeter.measure.plan import Matrix, PlanItem
from infermeter.measure.planfile import StoredPlan, record_resumption, remaining, store_plan, stored_plan
from infermeter.models.spec import ModelSpec
from infermeter.results.schema import ResultsFile, now_iso

# The bench parameters that decide which cases run and how they are measured: the plan stored in the file.
PLAN_PARAMS = (
    "models", "backend", "fallback", "batch", "precision", "shape_mode", "dynamic", "buckets", "seq_len",
    "streams", "threads", "warmup", "iterations", "target_ci", "rounds", "no_interleave", "min_time", "max_time",
    "case_timeout", "input_sets", "inputs", "option", "compile_mode", "ort_opt_level", "ov_hint", "check_parity",
    "seed", "cold_start", "no_isolation",
)  # fmt: skip


@dataclass
class Sweep:
    """The results file a bench run writes (`path`), its content so far, the whole plan and what is left of it."""

    results: ResultsFile
    path: Path
    plan: StoredPlan
    items: list[PlanItem]
    todo: list[PlanItem]


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


def new_sweep(
    path: Path, matrix: Matrix, cold_start: bool, isolate: bool, command: Sequence[str], environment: dict[str, Any]
) -> Sweep:
    """A fresh results file for `matrix`, its plan stored in it."""
    plan = StoredPlan((matrix,), tuple(command), cold_start, isolate)
    items = plan.items()  # a bad shape fails here, before anything is written
    results = ResultsFile(created=now_iso(), environment=environment, command=list(command))
    store_plan(results, plan)
    return Sweep(results, path, plan, items, items)


def resumed_sweep(
    resume: Path,
    output: Path | None,
    matrix: Matrix | None,
    cold_start: bool,
    isolate: bool,
    command: Sequence[str],
    resolve: Callable[[str], ModelSpec],
) -> Sweep:
    """The sweep of a results file to resume: its stored plan (extended by `matrix` with --resume-extend), the
    original command kept and this resumption appended to `resumed`. ResultsError before any write when the file
    or its plan cannot be read."""
    from infermeter.results.io import read_results

    results = read_results(resume)
    stored = stored_plan(results, resume, resolve)
    if matrix is None:
        if stored is None:
            raise ResultsError(
                f"{resume} holds no plan (written by an older infermeter), so there is nothing to replay: give the "
                f"original command's flags with --resume {resume} --resume-extend"
            )
        plan = stored
    elif stored is None:
        plan = StoredPlan((matrix,), tuple(results.command or command), cold_start, isolate)
    elif (stored.cold_start, stored.isolate) != (cold_start, isolate):
        raise UsageError(f"--resume-extend keeps {resume}'s --cold-start and --no-isolation as they were")
    else:
        plan = stored.extended(matrix)
    items = plan.items()
    todo = remaining(items, results)
    if not results.command:
        results.command = list(plan.command)
    store_plan(results, plan)
    record_resumption(results, command, len(todo), extended=matrix is not None)
    return Sweep(results, output or resume, plan, items, todo)
