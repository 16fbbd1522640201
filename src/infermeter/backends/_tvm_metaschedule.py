"""The MetaSchedule side of the tvm backend's tuning (the plan, the database and the summary: `_tvm_tuning`):
`tune_model` runs the tuning of a Relax module into a JSON database and returns its summary.

The pieces MetaSchedule lets us replace, and why: a builder that keeps one worker pool for the whole tuning and
registers only the host's intrinsics (`_PoolBuilder`); a round-robin task scheduler that stops handing out batches
once the time bound has passed (`_DeadlineScheduler`); a measure callback that records the seconds spent after
every batch (`_Progress`), for a resumed tuning to add to. Their classes subclass TVM's and are made on first use,
so that importing this module imports no TVM.
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from infermeter.backends._tvm_tuning import (
    BUILD_TIMEOUT_S,
    MAX_BATCH,
    RUN_TIMEOUT_S,
    TaskSummary,
    TuningPlan,
    TuningSummary,
    build_candidate,
    cost_model_name,
    interrupt_as_flag,
    median_ms,
    register_cpu_intrinsics,
    sanitize_database,
    spent_s,
    trial_split,
    write_progress,
)

# The tasks' logger: MetaSchedule reports each trial to it at INFO (kept quiet unless a caller lowers its level).
_LOGGER = logging.getLogger("infermeter.tvm.tuning")
_LOGGER.setLevel(logging.WARNING)


@functools.cache
def _classes() -> tuple[type, type, type]:
    """(_PoolBuilder, _DeadlineScheduler, _Progress), defined once TVM is imported."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback
    from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class _PoolBuilder(PyBuilder):  # type: ignore[misc]
        """Builds candidates in one long-lived pool of `workers` processes (recycled every 256 builds, against the
        leak MetaSchedule's LocalBuilder restarts its pool for)."""

        def __init__(self, workers: int) -> None:
            super().__init__()
            self.pool = PopenPoolExecutor(max_workers=workers, timeout=BUILD_TIMEOUT_S,
                                          initializer=register_cpu_intrinsics, maximum_process_uses=256)  # fmt: skip

        def build(self, build_inputs: list[Any]) -> list[Any]:
            results = []
            jobs = [(item.mod, item.target) for item in build_inputs]
            for outcome in self.pool.map_with_error_catching(build_candidate, jobs):
                if outcome.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(outcome.value, None))
                elif outcome.status == StatusKind.TIMEOUT:
                    results.append(BuilderResult(None, f"build timed out after {BUILD_TIMEOUT_S} s"))
                else:
                    results.append(BuilderResult(None, f"build failed: {outcome.value}"))
            return results

        def shutdown(self) -> None:
            self.pool.shutdown()

    @derived_object
    class _DeadlineScheduler(PyTaskScheduler):  # type: ignore[misc]
        """Round robin over the tasks in the order given, ending the tuning once `deadline` (perf_counter) passed
        or `interrupted` is set (a Ctrl-C)."""

        def __init__(self, deadline: float, interrupted: threading.Event) -> None:
            super().__init__()
            self.deadline, self.interrupted = deadline, interrupted
            self.stopped_by_time = False
            self.last = -1

        def next_task_id(self) -> int:
            outer = self._outer()
            count = len(outer.tasks_)
            for index in range(count):
                outer.touch_task(index)
            if self.interrupted.is_set():
                return -1
            if time.perf_counter() >= self.deadline:
                self.stopped_by_time = True
                return -1
            for _ in range(count):
                self.last = (self.last + 1) % count
                task = outer.tasks_[self.last]
                if not task.is_terminated:
                    if task.runner_futures is not None:
                        outer.join_running_task(self.last)
                    return int(self.last)
            return -1

    @derived_object
    class _Progress(PyMeasureCallback):  # type: ignore[misc]
        """Writes the seconds spent so far into the work folder after every measured batch."""

        def __init__(self, work_dir: Path, started: float, earlier_s: float) -> None:
            super().__init__()
            self.work_dir, self.started, self.earlier_s = work_dir, started, earlier_s

        def apply(self, *_args: Any) -> None:
            write_progress(self.work_dir, self.earlier_s + time.perf_counter() - self.started)

    return _PoolBuilder, _DeadlineScheduler, _Progress


def _heaviest_first(mod: Any, target: Any) -> list[Any]:
    """The tuning tasks of `mod` (a Relax module before legalization), heaviest (FLOPs x calls) first."""
    import tvm
    from tvm import relax
    from tvm.s_tir.analysis import estimate_tir_flops
    from tvm.s_tir.meta_schedule import relax_integration

    # The fused kernels as `compile_relax` makes them, so that the database's workloads are the ones it looks up.
    with target:
        fused = tvm.transform.Sequential([
            *relax.pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(), relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ])(mod)  # fmt: skip
    tasks = relax_integration.extract_tasks(fused, target)
    return sorted(tasks, key=lambda task: -float(estimate_tir_flops(task.dispatched[0])) * int(task.weight))


def _contexts(tasks: list[Any], threads: int, batch: int) -> tuple[list[Any], list[float]]:
    """MetaSchedule contexts for `tasks`, with their weights. The evolutionary search's population is sized to the
    batch: its default 512 costs about a minute of candidate generation per task on two loaded cores, spent on
    ranking candidates only `batch` of which are measured. Made here rather than by `relax_integration`, whose
    per-task loggers reconfigure Python logging (and fail on a handler without a name)."""
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.search_strategy import EvolutionarySearch

    population = min(512, max(32, 8 * batch))
    strategy = EvolutionarySearch(population_size=population, init_min_unmeasured=min(50, population))
    contexts = [
        TuneContext(
            mod=task.dispatched[0],
            target=task.target,
            space_generator="post-order-apply",
            search_strategy=strategy,
            task_name=task.task_name,
            logger=_LOGGER,
            num_threads=threads,
        ).clone()
        for task in tasks
    ]
    return contexts, [float(task.weight) for task in tasks]


def _records_by_task(database: Any, contexts: list[Any]) -> list[list[tuple[float | None, Any]]]:
    """Per task, each candidate the database holds for it: (median run time in ms or None if it failed, record)."""
    workloads = [database.commit_workload(context.mod) for context in contexts]
    found: list[list[tuple[float | None, Any]]] = [[] for _ in contexts]
    for record in database.get_all_tuning_records():
        for index, workload in enumerate(workloads):
            if record.workload.same_as(workload):
                found[index].append((median_ms(record.run_secs), record))
                break
    return found


def _applied(contexts: list[Any], records: list[list[tuple[float | None, Any]]], untuned: list[float | None]) -> Any:
    """The database the build compiles with: each task's best candidate where it beats TVM's untuned code for the
    task (or where that could not be measured). A few trials can find only candidates slower than the default, and
    MetaSchedule would apply the best of them anyway."""
    from tvm.s_tir.meta_schedule.database import MemoryDatabase, TuningRecord

    applied = MemoryDatabase()
    for context, candidates, base in zip(contexts, records, untuned, strict=True):
        valid = [(ms, record) for ms, record in candidates if ms is not None]
        if not valid:
            continue
        best_ms, best = min(valid, key=lambda pair: pair[0])
        if base is None or best_ms < base:
            workload = applied.commit_workload(context.mod)
            applied.commit_tuning_record(TuningRecord(best.trace, workload, best.run_secs, best.target, best.args_info))
    return applied


def _untuned_ms(contexts: list[Any], builder: Any, runner: Any) -> list[float | None]:
    """Each task's time as TVM compiles it without tuning (its unscheduled TIR), measured like the candidates."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    built = builder.build([BuilderInput(context.mod, context.target) for context in contexts])
    ready = [i for i, result in enumerate(built) if result.error_msg is None]
    inputs = [
        RunnerInput(built[i].artifact_path, "cpu", ArgInfo.from_prim_func(contexts[i].mod["main"])) for i in ready
    ]
    untuned: list[float | None] = [None] * len(contexts)
    for index, future in zip(ready, runner.run(inputs), strict=True):
        result = future.result()
        untuned[index] = median_ms(result.run_secs) if result.error_msg is None else None
    for index in ready:
        shutil.rmtree(Path(built[index].artifact_path).parent, ignore_errors=True)
    return untuned


def _summary(plan: TuningPlan, contexts: list[Any], weights: list[float],
             records: list[list[tuple[float | None, Any]]], untuned: list[float | None], applied: Any, resumed: int,
             stopped: bool, tune_s: float) -> TuningSummary:  # fmt: skip
    from tvm.s_tir.analysis import estimate_tir_flops

    tasks = []
    for context, weight, candidates, base in zip(contexts, weights, records, untuned, strict=True):
        valid = [ms for ms, _record in candidates if ms is not None]
        tasks.append(TaskSummary(name=str(context.task_name), flop=float(estimate_tir_flops(context.mod)),
                                 weight=int(weight), trials=len(candidates), valid=len(valid), untuned_ms=base,
                                 best_ms=min(valid) if valid else None,
                                 applied=bool(applied.has_workload(context.mod))))  # fmt: skip
    tasks.sort(key=lambda task: -task.flop * task.weight)
    return TuningSummary(trials_asked=plan.trials, minutes_asked=plan.minutes, trials=sum(len(r) for r in records),
                         resumed=resumed, stopped_by_time=stopped, tune_s=tune_s, cost_model=cost_model_name(),
                         tasks=tasks)  # fmt: skip


def _resume_order(database: Any, contexts: list[Any], weights: list[float]) -> tuple[list[Any], list[float]]:
    """Tasks with the fewest records first (a stable sort: heaviest first among equals), so that a resumed tuning
    picks up where the interrupted one stopped."""
    done = [len(found) for found in _records_by_task(database, contexts)]
    order = sorted(range(len(contexts)), key=lambda i: done[i])
    return [contexts[i] for i in order], [weights[i] for i in order]


def _measure_and_tune(ms: Any, database: Any, contexts: list[Any], weights: list[float], scheduler: Any,
                      progress: Any, trials: int, per_task: int, workers: int) -> list[float | None]:  # fmt: skip
    """Measure each task's untuned code, then run `trials` candidates through MetaSchedule (records into
    `database`); the untuned times. The worker pools are shut down whatever happens."""
    if not contexts:
        return []
    builder = _classes()[0](workers)
    runner = ms.runner.LocalRunner(timeout_sec=RUN_TIMEOUT_S)
    try:
        untuned = _untuned_ms(contexts, builder, runner)
        if trials > 0:
            # work_dir is unused: the database is given.
            ms.tune.tune_tasks(tasks=contexts, task_weights=weights, work_dir=".", max_trials_global=trials,
                               max_trials_per_task=per_task, num_trials_per_iter=min(MAX_BATCH, per_task),
                               builder=builder, runner=runner, database=database, cost_model=cost_model_name(),
                               measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), progress],
                               task_scheduler=scheduler)  # fmt: skip
        return untuned
    finally:
        builder.shutdown()
        runner.pool.shutdown()


def tune_model(mod: Any, target: Any, plan: TuningPlan, work_dir: Path) -> tuple[TuningSummary, Any]:
    """Tune `mod` (a Relax module at static shapes) for `target` into the JSON database in `work_dir`, resuming
    from the records an interrupted tuning left there: the summary (its `tune_s` includes their time) and the
    database to compile with (`_applied`). KeyboardInterrupt after the batch in flight when Ctrl-C was pressed."""
    register_cpu_intrinsics()
    from tvm.s_tir import meta_schedule as ms

    # MetaSchedule logs every trial and a table of all tasks after each batch at INFO: the summary replaces them.
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    resumed, earlier_s = sanitize_database(work_dir), spent_s(work_dir)
    started = time.perf_counter()
    database = ms.database.JSONDatabase(work_dir=str(work_dir))
    tasks = _heaviest_first(mod, target)
    total, per_task = trial_split(plan.trials, plan.minutes, max(1, len(tasks)))
    contexts, weights = _resume_order(database, *_contexts(tasks, plan.workers, min(MAX_BATCH, per_task)))
    deadline = started + plan.minutes * 60 - earlier_s if plan.minutes else float("inf")
    _builder, scheduler_cls, progress_cls = _classes()
    with interrupt_as_flag() as interrupted:
        scheduler = scheduler_cls(deadline, interrupted)
        progress = progress_cls(work_dir, started, earlier_s)
        untuned = _measure_and_tune(ms, database, contexts, weights, scheduler, progress, total - resumed, per_task,
                                    plan.workers)  # fmt: skip
    if interrupted.is_set():
        raise KeyboardInterrupt  # the records measured so far stay in work_dir, for the next build to resume
    tune_s = earlier_s + time.perf_counter() - started
    records = _records_by_task(database, contexts)
    applied = _applied(contexts, records, untuned)
    stopped = bool(scheduler.stopped_by_time)
    return _summary(plan, contexts, weights, records, untuned, applied, resumed, stopped, tune_s), applied
