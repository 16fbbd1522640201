"""A generation sweep from its results file to the finished cases: the plan stored in the file before the first
case (`plan` block, `task: generate`), each case appended as it is measured (`measure.sweep.run_sweep`), and
`llm bench --resume FILE` replaying the stored plan, as for an inference sweep (`measure.benchrun`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.core.errors import ResultsError
from infermeter.llm.plan import GenerationItem, GenerationMatrix, generation_plan, matrix_from_dict, matrix_to_dict
from infermeter.machine.environment import new_results_file
from infermeter.measure.benchrun import BenchDisplay
from infermeter.measure.planfile import PLAN_KEY, PLAN_VERSION, record_resumption
from infermeter.results.schema import CaseResult, ResultsFile

TASK = "generate"


@dataclass(frozen=True)
class GenerationPlan:
    """What decides a generation sweep's cases: the matrix, the original command and whether cases are isolated."""

    matrix: GenerationMatrix
    command: tuple[str, ...]
    isolate: bool = True

    def items(self) -> list[GenerationItem]:
        """The plan in the order it runs."""
        return generation_plan(self.matrix)


def plan_task(results: ResultsFile) -> str:
    """The task of the plan stored in `results` (`infer` when it has none, or an inference plan)."""
    block = results.extra.get(PLAN_KEY)
    return str(block.get("task", "infer")) if isinstance(block, dict) else "infer"


def store_generation_plan(results: ResultsFile, plan: GenerationPlan) -> None:
    """Put `plan` into `results` (written with the file's next write, before the first case)."""
    results.extra[PLAN_KEY] = {
        "version": PLAN_VERSION,
        "task": TASK,
        "command": list(plan.command),
        "isolate": plan.isolate,
        "matrix": matrix_to_dict(plan.matrix),
    }


def read_generation_plan(results: ResultsFile, where: Path) -> GenerationPlan:
    """The generation plan stored in `results`; ResultsError naming `where` when it is not a readable one."""
    block: Any = results.extra.get(PLAN_KEY)
    try:
        if int(block.get("version", PLAN_VERSION)) > PLAN_VERSION:
            raise ResultsError(f"{where}: its plan is from a newer infermeter (version {block['version']}); upgrade")
        return GenerationPlan(
            matrix_from_dict(block["matrix"]),
            tuple(str(word) for word in block.get("command", [])),
            bool(block.get("isolate", True)),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(
            f"{where} holds a plan that cannot be read ({type(exc).__name__}: {exc}); the file was left as it is"
        ) from exc


@dataclass
class GenerationSweep:
    """The results file a generation sweep writes (`path`, None to keep it in memory), its content so far, the
    plan and what is left of it."""

    results: ResultsFile
    path: Path | None
    plan: GenerationPlan
    items: list[GenerationItem]
    todo: list[GenerationItem]

    @property
    def cases(self) -> list[CaseResult]:
        """The results of this plan, in the order they ran."""
        planned = {item.case.id for item in self.items}
        return [case for case in self.results.cases if case.id in planned]


def new_generation_sweep(
    path: Path | None, matrix: GenerationMatrix, isolate: bool, command: Sequence[str], environment: dict[str, Any]
) -> GenerationSweep:
    """A fresh results file for `matrix`, its plan stored in it."""
    plan = GenerationPlan(matrix, tuple(command), isolate)
    items = plan.items()
    results = new_results_file(command, environment)
    store_generation_plan(results, plan)
    return GenerationSweep(results, path, plan, items, items)


def resumed_generation_sweep(resume: Path, output: Path | None, command: Sequence[str]) -> GenerationSweep:
    """The sweep of a generation results file to resume: its stored plan, the cases without a result yet, this
    resumption appended to `resumed`. ResultsError before any write when the file or its plan cannot be read."""
    from infermeter.results.io import read_results

    results = read_results(resume)
    plan = read_generation_plan(results, resume)
    items = plan.items()
    done = {case.id for case in results.cases}
    todo = [item for item in items if item.case.id not in done]
    record_resumption(results, command, len(todo), extended=False)
    return GenerationSweep(results, output or resume, plan, items, todo)


def run_generation_sweep(sweep: GenerationSweep, display: BenchDisplay) -> list[CaseResult]:
    """Run what is left of `sweep`'s plan through the one sweep (`measure.sweep.run_sweep`: interleaved groups,
    stop rules, isolated workers), saving the file after every case; an interrupt reaches the display (which says
    how to resume), then the caller."""
    from infermeter.core.interrupts import terminate_as_interrupt
    from infermeter.measure.sweep import run_sweep
    from infermeter.results.io import write_results

    results, path = sweep.results, sweep.path
    if path is not None:
        write_results(path, results)
    try:
        with terminate_as_interrupt(), display.progress(len(sweep.items)) as on_event:
            run_sweep(sweep.items, results, path, sweep.plan.isolate, on_event, build_first=False)
    except KeyboardInterrupt as exc:
        display.interrupted(exc, len(results.cases), path)
        raise
    return sweep.cases
