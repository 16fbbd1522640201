"""The benchmark matrix: which cases a sweep runs, in which order, with which fallbacks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from infermeter.core.case import Case, MeasureSettings
from infermeter.models.inputs import resolve_shapes
from infermeter.models.spec import ModelSpec

if TYPE_CHECKING:
    from infermeter.build.case_build import BuildOutcome
    from infermeter.core.case import DataSource
    from infermeter.measure.burstworker import BurstWorker
    from infermeter.results.schema import CaseResult

PhaseCallback = Callable[[str], None]


class SweepCase(Protocol):
    """What a sweep needs of any case it runs (an inference `Case`, a generation `GenerateCase`)."""

    @property
    def id(self) -> str:
        """The case id (`infermeter.core.case`): what `--resume` and `compare` pair by."""

    @property
    def backend(self) -> str:
        """The backend's name."""

    @property
    def settings(self) -> MeasureSettings:
        """How long and how often it is measured (the stop rule, the interleaved rounds, the case timeout)."""

    @property
    def group_key(self) -> tuple[object, ...]:
        """Its comparison group: consecutive plan items of one group are interleaved."""

    @property
    def label(self) -> str:
        """How a progress display names it."""


class SweepItem(Protocol):
    """One row of any sweep (`measure.sweep`, `measure.interleave`): a fallback chain of cases and how to run
    the chain's `index`-th case: `unrunnable` (its result when it cannot start), `worker` (it, loaded in a
    worker driven in bursts), `run_alone` (it until its own stop rule) and `recorded` (last words on its result)."""

    @property
    def chain(self) -> Sequence[SweepCase]:
        """The cases, tried in order until one runs."""

    @property
    def case(self) -> SweepCase:
        """The first (preferred) case of the chain."""

    def unrunnable(self, index: int, built: BuildOutcome | None) -> CaseResult | None:
        """The result of a case that cannot start here, else None."""

    def worker(self, index: int, on_phase: PhaseCallback, built: BuildOutcome | None) -> BurstWorker:
        """The case in a fresh worker, loading."""

    def run_alone(self, index: int, on_phase: PhaseCallback, built: BuildOutcome | None, isolate: bool) -> CaseResult:
        """The case run until its stop rule, in a worker of its own (`isolate`) or in this process."""

    def recorded(self, result: CaseResult) -> None:
        """Complete a result before it is saved (where the case's inputs came from)."""


@dataclass(frozen=True)
class PlanItem:
    """One row of the sweep: a model and its case, or a fallback chain of cases tried in order until one runs."""

    spec: ModelSpec
    chain: tuple[Case, ...]

    @property
    def case(self) -> Case:
        """The first (preferred) case of the chain."""
        return self.chain[0]

    def unrunnable(self, index: int, built: BuildOutcome | None) -> CaseResult | None:
        """The result of a case that cannot start (unavailable here, or its artifact's build failed), else None."""
        from infermeter.measure.worker import unrunnable_result

        return unrunnable_result(self.spec, self.chain[index], built)

    def worker(self, index: int, on_phase: PhaseCallback, built: BuildOutcome | None) -> BurstWorker:
        """The case in a fresh worker, loading from its built artifact."""
        from infermeter.measure.latency_worker import CaseWorker
        from infermeter.measure.worker import built_artifact

        return CaseWorker(self.spec, self.chain[index], on_phase, built_artifact(built))

    def run_alone(self, index: int, on_phase: PhaseCallback, built: BuildOutcome | None, isolate: bool) -> CaseResult:
        """The case until its stop rule (or its soak), isolated or in this process."""
        from infermeter.measure.worker import run_in_process, run_isolated

        return (run_isolated if isolate else run_in_process)(self.spec, self.chain[index], on_phase, built)

    def recorded(self, result: CaseResult) -> None:
        """Where the case's inputs came from (`--data`, `--input NAME=VALUE`), with the note on their use."""
        from infermeter.models.feeds_data import record_inputs

        record_inputs(self.case, result)


@dataclass(frozen=True)
class Matrix:
    """The user's matrix flags, already parsed and checked. A backend entry is a fallback chain (usually of one).
    `data` (`--data`) and `input_values` (`--input NAME=VALUE`) go to every case. `machines` (`bench --cluster
    --machines`) are classes of cluster node: every case runs on each (none: wherever the sweep runs).
    `allocators` (`--allocator`): every backend runs under each (none: the default malloc)."""

    models: tuple[ModelSpec, ...]
    backends: tuple[tuple[str, ...], ...]
    _: KW_ONLY  # the rest by keyword
    precisions: tuple[str, ...] = ("fp32",)  # empty: each model's own (`ModelSpec.default_precision`)
    batches: tuple[int, ...] = (1,)
    shape_modes: tuple[str, ...] = ("static",)
    streams: tuple[int, ...] = (1,)
    threads: int = 1
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    dynamic: tuple[tuple[str, tuple[int, ...]], ...] = ()
    buckets: tuple[tuple[str, tuple[int, ...]], ...] = ()
    seq_len: int | None = None
    settings: MeasureSettings = field(default_factory=MeasureSettings)
    data: DataSource | None = None
    input_values: tuple[tuple[str, str], ...] = ()
    machines: tuple[str, ...] = ()
    allocators: tuple[str, ...] = ()


def seq_overrides(spec: ModelSpec, batch: int, seq_len: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """`--seq-len N` as input overrides: every input with a symbolic `seq` dim gets size N there."""
    overrides = []
    for item in spec.inputs:
        if "seq" not in item.shape:
            continue
        shape = tuple(seq_len if dim == "seq" else dim for dim in item.shape)
        # Other symbolic dims keep what resolve_shapes gives them (batch follows --batch).
        resolved = resolve_shapes([replace(item, shape=shape)], batch)[item.name]
        overrides.append((item.name, resolved))
    return tuple(overrides)


def build_plan(matrix: Matrix) -> list[PlanItem]:
    """The matrix in the order it runs: machine, model, batch, shape mode, streams, precision, then backend, so that
    the first backend of each group is the baseline of its speedups. Shapes and options are checked here, so a bad
    `--input` or `-O` fails (UsageError, exit 2) before any case runs; each case carries only its own backend's
    options, normalized (`backends.options.options_for`), which is what its id holds."""
    from infermeter.backends.options import check_options, for_precision, options_for
    from infermeter.backends.variant import base_name, variant_options

    check_options(matrix.options)
    entries = {entry for chain in matrix.backends for entry in chain}
    # A variant's own settings come after -O's, so `-b tvm:tune_trials=64` wins over `-O tvm.tune_trials=0`.
    options = {
        entry: options_for(base_name(entry), tuple(dict(matrix.options + variant_options(entry)).items()))
        for entry in entries
    }
    plan = []
    machines: tuple[str | None, ...] = matrix.machines or (None,)
    # The default allocator is "" (not in the case id), so a plain run's ids are unchanged.
    allocators = tuple("" if a == "glibc" else a for a in matrix.allocators) or ("",)
    for machine, spec in ((m, spec) for m in machines for spec in matrix.models):
        names = {i.name for i in spec.inputs}
        base_shapes = tuple((n, d) for n, d in matrix.input_shapes if n in names)
        for batch in matrix.batches:
            shapes = base_shapes
            if matrix.seq_len is not None:
                given = {n for n, _ in shapes}
                shapes += tuple(o for o in seq_overrides(spec, batch, matrix.seq_len) if o[0] not in given)
            resolve_shapes(spec.inputs, batch, shapes)
            for shape_mode in matrix.shape_modes:
                dynamic = matrix.dynamic if shape_mode == "dynamic" else ()
                buckets = matrix.buckets if shape_mode == "dynamic" else ()
                for streams in matrix.streams:
                    # No --precision: each model's own (int8 for a quantized graph, else fp32).
                    for precision in matrix.precisions or (spec.default_precision,):
                        for chain, allocator in ((c, a) for c in matrix.backends for a in allocators):
                            cases = tuple(
                                Case(
                                    spec.ref,
                                    base_name(backend),
                                    precision=precision,
                                    batch=batch,
                                    shape_mode=shape_mode,
                                    threads=matrix.threads,
                                    input_shapes=shapes,
                                    options=for_precision(options[backend], precision),
                                    settings=matrix.settings,
                                    dynamic=dynamic,
                                    buckets=buckets,
                                    streams=streams,
                                    data=matrix.data,
                                    input_values=tuple((n, v) for n, v in matrix.input_values if n in names),
                                    machine=machine,
                                    reshape=spec.reshape,
                                    allocator=allocator,
                                )
                                for backend in chain
                            )
                            plan.append(PlanItem(spec, cases))
    return _distinct(plan)


def _distinct(plan: list[PlanItem]) -> list[PlanItem]:
    """`plan` without repeated rows: two variants that differ only in INT8 options are one case at FP32
    (`-b openvino -b openvino:int8_source=qdq --precision fp32,int8` measures openvino fp32 once)."""
    seen: set[tuple[str, ...]] = set()
    kept = []
    for item in plan:
        ids = tuple(case.id for case in item.chain)
        if ids not in seen:
            seen.add(ids)
            kept.append(item)
    return kept
