"""What `infermeter optimize` was asked to do, checked before anything slow runs."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from infermeter.advise.pick import OBJECTIVES, Constraints
from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.core.validation import check_price_per_hour, require_positive
from infermeter.quantize.study_data import CALIB_SAMPLES, EVAL_SAMPLES
from infermeter.serve import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_BATCHES,
    DEFAULT_MAX_DELAYS_MS,
    DEFAULT_POINT_DURATION_S,
    DEFAULT_WORKERS,
)

DEVICES = ("cpu", "cuda")
# Enough for a stable median and a P99 with a confidence interval on small models, short enough that a whole
# optimize run of a mid-size CNN fits in minutes. `bench` is there for longer measurements of the pick.
DEFAULT_SETTINGS = MeasureSettings(
    warmup_iterations=10, min_iterations=50, min_time_s=1.0, max_time_s=10.0, input_sets=4, case_timeout_s=600.0
)
DEFAULT_MAX_ACCURACY_DROP_PCT = 1.0
DEFAULT_BUDGET_MINUTES = 8.0
DEFAULT_FINALISTS = 3  # the finalists' step: the best three re-measured together
# Batch sizes tried by the batching step when the objective is throughput and no --batch was given.
THROUGHPUT_BATCHES = (1, 8, 32)


@dataclass(frozen=True)
class ServingRequest:
    """`optimize --serve`: run tune-batching's search on the pick (each policy served from the optimize folder,
    closed-loop load at rising concurrency for `duration_s` per point) and keep the policy with the highest
    throughput whose P99 meets `slo_p99_ms`."""

    slo_p99_ms: float
    max_batches: tuple[int, ...] = DEFAULT_MAX_BATCHES
    max_delays_ms: tuple[float, ...] = DEFAULT_MAX_DELAYS_MS
    workers: tuple[int, ...] = DEFAULT_WORKERS
    duration_s: float = DEFAULT_POINT_DURATION_S
    concurrency: int = DEFAULT_CONCURRENCY

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for the journal's request."""
        return {
            "slo_p99_ms": self.slo_p99_ms,
            "max_batches": list(self.max_batches),
            "max_delays_ms": list(self.max_delays_ms),
            "workers": list(self.workers),
            "duration_s": self.duration_s,
            "concurrency": self.concurrency,
        }


@dataclass(frozen=True)
class OptimizeRequest:
    """Everything `optimize` needs. `batches[0]` is the batch of the main comparison (steps 1-5); the others are
    tried by the batching step. `backends` empty means every backend of `device`; `options` are backend options
    (`KEY=VALUE`, as `bench -O`): a key prefixed with a backend's name goes to that backend's cases only."""

    model: str
    output: Path
    _: KW_ONLY  # the rest by keyword
    device: str = "cpu"
    batches: tuple[int, ...] = (1,)
    max_accuracy_drop_pct: float = DEFAULT_MAX_ACCURACY_DROP_PCT
    calib: str | None = None
    eval: str | None = None
    max_p99_ms: float | None = None
    max_memory_mb: float | None = None
    max_load_s: float | None = None
    objective: str = "latency"
    budget_s: float = DEFAULT_BUDGET_MINUTES * 60
    backends: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    threads: int = 1
    settings: MeasureSettings = field(default_factory=lambda: DEFAULT_SETTINGS)
    calib_size: int = CALIB_SAMPLES  # the INT8 study's bounds, the same as quantize's (`quantize.study_data`)
    eval_size: int = EVAL_SAMPLES
    seed: int = 0
    # `optimize --cluster`: every case measured as a Ray task on a node of class `machine` (None: any node with a
    # slot); the export, quantization and accuracy scoring stay in this process.
    cluster: str | None = None
    machine: str | None = None
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()  # `--input NAME:DIMS`, as bench takes it
    input_values: tuple[tuple[str, str], ...] = ()  # `--input NAME=VALUE`: constant inputs
    reshape: tuple[tuple[str, tuple[int, ...]], ...] = ()  # `--reshape NAME:DIMS`: declared dims rewritten
    price_per_hour: float | None = None  # the machine's price (user's currency per hour): costs per million
    serving: ServingRequest | None = None  # `--serve`: the batching step on the pick
    # False (`--no-prune`): no candidate is skipped or left unrepaired for being unable to beat the best so far
    prune: bool = True
    # The best this many admissible candidates are measured again together, interleaved, before the pick (fewer
    # than 2: the pick is the first measurement's best); see optimize.steps_finalists.
    finalists: int = DEFAULT_FINALISTS
    command: tuple[str, ...] = ()  # the command line that asked for it, for the results file (the CLI hands it in)

    @property
    def batch(self) -> int:
        """The batch of the main comparison."""
        return self.batches[0]

    def constraints(self) -> Constraints:
        """The limits the pick must meet, as `advise` takes them."""
        return Constraints(
            max_p99_ms=self.max_p99_ms,
            max_memory_mb=self.max_memory_mb,
            max_load_s=self.max_load_s,
            max_accuracy_drop_pct=self.max_accuracy_drop_pct,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary kept in the results file (what a resumed run must agree with)."""
        return {
            "model": self.model,
            "device": self.device,
            "batches": list(self.batches),
            "max_accuracy_drop_pct": self.max_accuracy_drop_pct,
            "calib": self.calib,
            "eval": self.eval,
            "max_p99_ms": self.max_p99_ms,
            "max_memory_mb": self.max_memory_mb,
            "max_load_s": self.max_load_s,
            "objective": self.objective,
            "budget_s": self.budget_s,
            "backends": list(self.backends),
            "options": dict(self.options),
            "threads": self.threads,
            "machine": self.machine,
        } | self._inputs_dict()

    def _inputs_dict(self) -> dict[str, Any]:
        # Only when given: a run without them reads the same as before they existed.
        inputs = {
            "input_shapes": {name: list(dims) for name, dims in self.input_shapes},
            "input_values": dict(self.input_values),
            "reshape": {name: list(dims) for name, dims in self.reshape},
            "price_per_hour": self.price_per_hour,
            "serving": self.serving.to_dict() if self.serving else None,
            "no_prune": not self.prune,
            "finalists": self.finalists,
        }
        return {key: value for key, value in inputs.items() if value}


def check_request(request: OptimizeRequest) -> None:
    """UsageError for values that cannot work, before any slow step."""
    if request.device not in DEVICES:
        raise UsageError(f"--device {request.device!r} is not one of {', '.join(DEVICES)}")
    if request.objective not in OBJECTIVES:
        raise UsageError(f"--objective {request.objective!r} is not one of {', '.join(OBJECTIVES)}")
    if not request.batches or any(b <= 0 for b in request.batches):
        raise UsageError("--batch needs positive batch sizes, e.g. --batch 1 or --batch 1,8")
    if request.max_accuracy_drop_pct < 0:
        raise UsageError(f"--max-accuracy-drop {request.max_accuracy_drop_pct:g} must be zero or more (points)")
    for value, flag in (
        (request.max_p99_ms, "--max-p99-ms"),
        (request.max_memory_mb, "--max-memory-mb"),
        (request.max_load_s, "--max-load-s"),
    ):
        if value is not None and value <= 0:
            raise UsageError(f"{flag} {value:g} must be positive")
    if request.budget_s <= 0:
        raise UsageError("--budget-minutes must be positive")
    if request.threads <= 0:
        raise UsageError(f"--threads {request.threads} must be positive")
    if request.finalists < 0:
        raise UsageError(f"--finalists {request.finalists} must be 0 (off) or more")
    check_price_per_hour(request.price_per_hour)
    if request.serving is not None:
        _check_serving(request.serving)
    if request.output.exists() and not request.output.is_dir():
        raise UsageError(f"-o {str(request.output)!r} is a file; give a folder (it is created when missing)")
    for ref, flag in ((request.calib, "--calib"), (request.eval, "--eval")):
        if ref is not None and ".py:" not in ref and not Path(ref).exists():
            raise UsageError(f"{flag} {ref!r} does not exist (a folder of images, an .npz/.npy, or file.py:function)")
    from infermeter.backends.options import check_options

    check_options(request.options)


def _check_serving(serving: ServingRequest) -> None:
    require_positive(serving.slo_p99_ms, "--slo-p99-ms")
    require_positive(serving.duration_s, "--serve-duration")
    require_positive(serving.concurrency, "--serve-concurrency")
    for values, flag in ((serving.max_batches, "--serve-max-batch"), (serving.workers, "--serve-workers")):
        if not values or any(v <= 0 for v in values):
            raise UsageError(f"{flag} needs positive integers, e.g. {flag} 1,4")
    if not serving.max_delays_ms or any(v < 0 for v in serving.max_delays_ms):
        raise UsageError("--serve-max-delay-ms needs delays of zero or more, e.g. --serve-max-delay-ms 1,4")
