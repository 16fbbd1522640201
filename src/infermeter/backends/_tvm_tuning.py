"""MetaSchedule auto-tuning for the tvm backend: the tuning loop with a trial budget and a time bound, the tuning
database kept for resumption, and the summary `inspect` reads (trials and latencies per task).

How the budget is spent. The model's fused kernels (MetaSchedule "tasks") are ordered heaviest first (FLOPs x
occurrences); `trials` measured candidates are spread evenly over them, one batch per task per round, so a budget
smaller than the task count tunes the heaviest kernels and leaves the light ones (reshapes, pools) at TVM's default.
The task scheduler is our own round robin (`_DeadlineScheduler`): it stops handing out batches once the time bound
has passed, which MetaSchedule's own schedulers cannot do; the batch in flight finishes.

Why not MetaSchedule's `LocalBuilder`: it starts fresh worker processes for every batch and each imports every
tensor intrinsic TVM has (CUDA, ROCm, Hexagon...), about 24 s on two cores, longer than its default timeout. The
builder here keeps one pool for the whole tuning and registers only the host CPU's intrinsics
(`register_cpu_intrinsics`), in its workers and in this process.

Resumption. The JSON database is written record by record into `work_dir` while tuning runs. The backend keeps
that folder beside the build cache under the artifact's key, so an interrupted tuning (Ctrl-C, a build timeout)
leaves its measured records there; the next build of the same key reads them back (a truncated last line is
dropped), counts them against the trial budget and seeds the search with them (MetaSchedule's evolutionary search
starts from the best measured schedules in the database). `progress.json` there carries the seconds already spent.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import platform
import shutil
import signal
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Any

from infermeter.core.files import write_text_atomically

# Files of the tuning database (MetaSchedule's JSONDatabase names) and of our own records in an artifact folder.
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
PROGRESS_FILE = "progress.json"
SUMMARY_FILE = "tuning.json"
DATABASE_DIR = "database"
# With only a time bound, the trial budget per task (the time bound stops tuning long before on most models).
TRIALS_PER_TASK_TIME_BOUND = 1000
# MetaSchedule's batch size: candidates generated and measured together for one task.
MAX_BATCH = 64
# Records of failed candidates carry a run time of 1e10 s in the database.
FAILED_RUN_S = 1e9
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 60
# The intrinsics module of each CPU architecture (tvm.s_tir.tensor_intrin.<module>).
CPU_INTRINSICS = {"x86_64": "x86", "amd64": "x86", "aarch64": "arm_cpu", "arm64": "arm_cpu", "riscv64": "riscv_cpu"}


@dataclass(frozen=True)
class TuningPlan:
    """What to tune: `trials` measured candidates in all (0 with `minutes`: bounded by time only), `minutes` the
    time bound (0: none), `workers` the candidate builders run in parallel."""

    trials: int
    minutes: float
    workers: int = 1


@dataclass
class TaskSummary:
    """One tuned kernel: its name, FLOPs, how often the model calls it, the candidates measured (`trials`, of which
    `valid` ran), TVM's untuned code for it and the best candidate, in milliseconds (None: not measured), and
    whether the build uses that candidate (`applied`: only when it beats the untuned code)."""

    name: str
    flop: float
    _: KW_ONLY  # the rest by keyword
    weight: int
    trials: int
    valid: int
    untuned_ms: float | None
    best_ms: float | None
    applied: bool = False

    @property
    def speedup(self) -> float | None:
        """Untuned over the kernel the build uses: what tuning gained on it (1 when its candidate was not applied,
        None when a time is unknown)."""
        if self.untuned_ms is None or not self.best_ms:
            return None
        return self.untuned_ms / self.best_ms if self.applied else 1.0


@dataclass
class TuningSummary:
    """What a tuning did: the budget asked (`trials_asked`, `minutes_asked`), the candidates measured in all
    (`trials`, `resumed` of them from an interrupted tuning), whether the time bound stopped it, the seconds spent
    (`tune_s`, an interrupted tuning's included), the cost model, and each task heaviest first."""

    trials_asked: int
    minutes_asked: float
    _: KW_ONLY  # the rest by keyword
    trials: int
    resumed: int
    stopped_by_time: bool
    tune_s: float
    cost_model: str
    tasks: list[TaskSummary] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`tuning.json` in the artifact folder)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuningSummary:
        """Inverse of `to_dict`."""
        tasks = [TaskSummary(**task) for task in data.get("tasks", [])]
        fields = {k: v for k, v in data.items() if k != "tasks"}
        return cls(**fields, tasks=tasks)


def read_tuning_summary(artifact_path: str | Path) -> TuningSummary | None:
    """The tuning summary stored in a tvm artifact folder (None: an untuned build, or not a tvm artifact)."""
    path = Path(artifact_path) / SUMMARY_FILE
    if not path.is_file():
        return None
    return TuningSummary.from_dict(json.loads(path.read_text()))


def register_cpu_intrinsics() -> None:
    """Register the host CPU's tensor intrinsics only, instead of every target's (importing the package
    `tvm.s_tir.tensor_intrin` registers CUDA, ROCm, Hexagon, Metal... and takes ~24 s). A CPU tuning needs its own
    architecture's; MetaSchedule imports the package itself, and finds this lean one in `sys.modules`.
    Also the initializer of the builder's worker processes."""
    name = "tvm.s_tir.tensor_intrin"
    own = CPU_INTRINSICS.get(platform.machine().lower())
    if name in sys.modules or own is None:
        return
    spec = importlib.util.find_spec(name)
    assert spec is not None
    sys.modules[name] = importlib.util.module_from_spec(spec)  # the package, without its __init__'s imports
    importlib.import_module(f"{name}.{own}")


def build_candidate(inputs: tuple[Any, Any]) -> str:
    """Compile one candidate (a scheduled TIR module for a target) in a builder worker; the path of its archive.
    What MetaSchedule's default builder does, less its import of every tensor intrinsic."""
    import tempfile

    from tvm.driver import build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    mod, target = inputs
    module = build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)
    path = os.path.join(tempfile.mkdtemp(prefix="infermeter-tvm-candidate-"), "candidate.tar")
    module.export_library(path, fcompile=tar)
    return path


def sanitize_database(work_dir: Path) -> int:
    """Drop what an interrupted tuning may have left half-written (a truncated last line, records of a workload
    whose line was lost); the number of tuning records kept."""
    workload_path, record_path = work_dir / WORKLOAD_FILE, work_dir / RECORD_FILE
    workloads = _json_lines(workload_path, stop_at_bad=True)
    records = [r for r in _json_lines(record_path) if isinstance(r, list) and r and 0 <= r[0] < len(workloads)]
    if workload_path.exists() or record_path.exists():
        workload_path.write_text("".join(json.dumps(w) + "\n" for w in workloads))
        record_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return len(records)


def _json_lines(path: Path, stop_at_bad: bool = False) -> list[Any]:
    kept: list[Any] = []
    if not path.is_file():
        return kept
    for line in path.read_text(errors="replace").splitlines():
        try:
            kept.append(json.loads(line))
        except ValueError:
            if stop_at_bad:
                break
    return kept


def spent_s(work_dir: Path) -> float:
    """Seconds an earlier, interrupted tuning spent in `work_dir` (0 when none)."""
    try:
        return float(json.loads((work_dir / PROGRESS_FILE).read_text())["tune_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def trial_split(trials: int, minutes: float, task_count: int) -> tuple[int, int]:
    """(trials in all, trials per task) for a plan over `task_count` tasks: an even split, at least one each for
    as many tasks as the budget reaches."""
    total = trials if trials > 0 else TRIALS_PER_TASK_TIME_BOUND * task_count
    per_task = max(1, math.ceil(total / task_count))
    return total, per_task


def cost_model_name() -> str:
    """MetaSchedule's XGBoost cost model when xgboost is installed, else random proposals (no learned model)."""
    return "xgb" if importlib.util.find_spec("xgboost") is not None else "random"


def copy_database(work_dir: Path, destination: Path) -> None:
    """The database files of `work_dir` copied into `destination` (the artifact's `database/` folder)."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE):
        if (work_dir / name).is_file():
            shutil.copyfile(work_dir / name, destination / name)


def median_ms(run_secs: Any) -> float | None:
    """The median of a record's run times in milliseconds, or None for a failed candidate."""
    values = [float(v) for v in (run_secs or [])]
    if not values or max(values) >= FAILED_RUN_S:
        return None
    return statistics.median(values) * 1e3


def write_progress(work_dir: Path, tune_s: float) -> None:
    """Record the seconds spent so far (read back by `spent_s` when the tuning is resumed)."""
    write_text_atomically(work_dir / PROGRESS_FILE, json.dumps({"tune_s": tune_s, "at": time.time()}))


@contextlib.contextmanager
def interrupt_as_flag() -> Iterator[threading.Event]:
    """While tuning runs, a Ctrl-C (SIGINT) sets the returned flag instead of raising: a KeyboardInterrupt raised
    inside one of MetaSchedule's Python callbacks crosses TVM's C++ and aborts the process (std::terminate). The
    tuning stops after the batch in flight and the caller raises KeyboardInterrupt; a second Ctrl-C acts as usual.
    Left alone where SIGINT is ignored (the build stage's workers: their parent owns Ctrl-C) or off the main thread."""
    flag = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield flag
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        if flag.is_set():
            previous(signum, frame)
        flag.set()

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
