"""The plan a results file was written for, stored in the file itself so that `bench --resume FILE` replays it.

The file's `plan` block holds the resolved matrix (model refs with their content hashes, backend chains, every
list and setting, threads already resolved) and the original command, written before the first case. `resumed`
lists each resumption (when, the command, how many cases remained). A block that cannot be read back raises
ResultsError before anything is written, so a broken file is never overwritten.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.core.case import MeasureSettings
from infermeter.core.errors import InfermeterError, ResultsError
from infermeter.measure.plan import Matrix, PlanItem, build_plan
from infermeter.measure.scenarios import LATENCY, Scenario, stored_scenario
from infermeter.models.spec import ModelSpec
from infermeter.results.schema import ResultsFile, now_iso

if TYPE_CHECKING:
    from infermeter.core.case import DataSource

PLAN_KEY = "plan"
RESUMED_KEY = "resumed"
PLAN_VERSION = 2  # 2: the plan names its scenario (`scenario`), where version 1 had a `cold_start` flag

Sizes = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class StoredPlan:
    """Everything that decides which cases a sweep runs: one matrix per part (the first from the original
    command, one more per `--resume-extend`), and what changes how the whole plan runs: its scenario (COLD_START
    with `--cold-start`; LATENCY otherwise, each case then measured as its settings choose, a soak with --soak)
    and whether each case runs in a worker of its own."""

    parts: tuple[Matrix, ...]
    command: tuple[str, ...]
    scenario: Scenario = LATENCY
    isolate: bool = True

    def items(self) -> list[PlanItem]:
        """The plan in the order it runs: each part's items in turn, a case already planned by an earlier item
        left out (so no case is ever run, or recorded, twice)."""
        seen: set[str] = set()
        items: list[PlanItem] = []
        for matrix in self.parts:
            for item in self.scenario.expand(build_plan(matrix)):
                ids = {case.id for case in item.chain}
                if not ids & seen:
                    seen |= ids
                    items.append(item)
        return items

    def extended(self, matrix: Matrix) -> StoredPlan:
        """This plan with `matrix`'s cases added after its own."""
        return dataclasses.replace(self, parts=(*self.parts, matrix))


def remaining(items: Sequence[PlanItem], results: ResultsFile) -> list[PlanItem]:
    """The items of the plan with no result in `results` yet (a fallback chain is done once any of its cases is),
    or with fewer processes than their `--repeat` asks (`measure.repeat`)."""
    from infermeter.measure.repeat import wants_more

    done = {case.id: case for case in results.cases}
    return [item for item in items if wants_more(item, done)]


def _sizes_to_json(pairs: Sizes) -> list[list[Any]]:
    return [[name, list(dims)] for name, dims in pairs]


def _sizes_from_json(value: Any) -> Sizes:
    return tuple((str(name), tuple(int(d) for d in dims)) for name, dims in value)


def _matrix_to_dict(matrix: Matrix) -> dict[str, Any]:
    data: dict[str, Any] = {
        # A ref is resolved again on resume; the hash says whether it still names the same model.
        "models": [_model_to_json(spec) for spec in matrix.models],
        "backends": [list(chain) for chain in matrix.backends],
        "precisions": list(matrix.precisions),
        "batches": list(matrix.batches),
        "shape_modes": list(matrix.shape_modes),
        "streams": list(matrix.streams),
        "threads": matrix.threads,
        "input_shapes": _sizes_to_json(matrix.input_shapes),
        "options": [list(kv) for kv in matrix.options],
        "dynamic": _sizes_to_json(matrix.dynamic),
        "buckets": _sizes_to_json(matrix.buckets),
        "seq_len": matrix.seq_len,
        "settings": dataclasses.asdict(matrix.settings),
        "data": None if matrix.data is None else dataclasses.asdict(matrix.data),
        "input_values": [list(kv) for kv in matrix.input_values],
    }
    if matrix.machines:  # only when given: a plan without machines reads the same in an older infermeter
        data["machines"] = list(matrix.machines)
    if matrix.allocators:
        data["allocators"] = list(matrix.allocators)
    return data


def _model_to_json(spec: ModelSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"ref": spec.ref, "content_hash": spec.content_hash}
    if spec.reshape:  # only when given: a plan without it reads the same in an older infermeter
        entry["reshape"] = _sizes_to_json(spec.reshape)
    return entry


def settings_from_json(value: dict[str, Any]) -> MeasureSettings:
    """The settings of a stored plan (a setting added later keeps its default)."""
    defaults = MeasureSettings()
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(MeasureSettings):
        if f.name in value:  # a setting added later keeps its default; a wrong type fails the cast
            kwargs[f.name] = type(getattr(defaults, f.name))(value[f.name])
    return MeasureSettings(**kwargs)


def _model_from_json(entry: dict[str, Any], resolve: Callable[[str], ModelSpec]) -> ModelSpec:
    ref = str(entry["ref"])
    reshape = _sizes_from_json(entry.get("reshape", []))
    try:
        if reshape:
            from infermeter.models.reshape import reshape_model

            spec = reshape_model(resolve(ref), reshape)
        else:
            spec = resolve(ref)
    except InfermeterError as exc:
        raise ResultsError(f"the plan's model {ref!r} cannot be resolved any more: {exc}") from exc
    if entry.get("content_hash") and entry["content_hash"] != spec.content_hash:
        raise ResultsError(
            f"the plan's model {ref!r} has changed since the plan was written (content hash differs); "
            "resuming would mix two models in one file: start a new results file"
        )
    return spec


def _data_from_json(value: Any) -> DataSource | None:
    """The plan's data, checked to hold what it held when the plan was written."""
    if value is None:
        return None
    from infermeter.core.case import DataSource
    from infermeter.models.feeds_data import data_content_hash

    source = DataSource(str(value["ref"]), str(value["content_hash"]), int(value["samples"]))
    try:
        now = data_content_hash(source.ref)
    except InfermeterError as exc:
        raise ResultsError(f"the plan's data {source.ref!r} cannot be read any more: {exc}") from exc
    if now != source.content_hash:
        raise ResultsError(
            f"the plan's data {source.ref!r} has changed since the plan was written (content hash differs); "
            "resuming would mix two data sets in one file: start a new results file"
        )
    return source


def _matrix_from_json(data: dict[str, Any], resolve: Callable[[str], ModelSpec]) -> Matrix:
    seq_len = data.get("seq_len")
    return Matrix(
        models=tuple(_model_from_json(entry, resolve) for entry in data["models"]),
        backends=tuple(tuple(str(name) for name in chain) for chain in data["backends"]),
        precisions=tuple(str(p) for p in data["precisions"]),
        batches=tuple(int(b) for b in data["batches"]),
        shape_modes=tuple(str(m) for m in data["shape_modes"]),
        streams=tuple(int(s) for s in data["streams"]),
        threads=int(data["threads"]),
        input_shapes=_sizes_from_json(data.get("input_shapes", [])),
        options=tuple((str(k), str(v)) for k, v in data.get("options", [])),
        dynamic=_sizes_from_json(data.get("dynamic", [])),
        buckets=_sizes_from_json(data.get("buckets", [])),
        seq_len=None if seq_len is None else int(seq_len),
        settings=settings_from_json(data.get("settings", {})),
        data=_data_from_json(data.get("data")),
        input_values=tuple((str(k), str(v)) for k, v in data.get("input_values", [])),
        machines=tuple(str(m) for m in data.get("machines", [])),
        allocators=tuple(str(a) for a in data.get("allocators", [])),
    )


def plan_to_dict(plan: StoredPlan) -> dict[str, Any]:
    """The JSON `plan` block of a results file."""
    return {
        "version": PLAN_VERSION,
        "command": list(plan.command),
        "scenario": plan.scenario.name,
        "isolate": plan.isolate,
        "parts": [_matrix_to_dict(matrix) for matrix in plan.parts],
    }


def plan_from_dict(data: Any, where: Path, resolve: Callable[[str], ModelSpec]) -> StoredPlan:
    """Inverse of plan_to_dict, models resolved with `resolve`; ResultsError naming `where` when the block is
    not a readable plan (edited by hand, truncated, from a newer infermeter)."""
    if isinstance(data, dict) and data.get("task", "infer") != "infer":  # `generate`: an `llm bench` sweep
        raise ResultsError(f"{where} holds a generation plan: resume it with `infermeter llm bench --resume {where}`")
    try:
        if not isinstance(data, dict) or not isinstance(data.get("parts"), list) or not data["parts"]:
            raise ValueError("no parts")
        if int(data.get("version", PLAN_VERSION)) > PLAN_VERSION:
            raise ResultsError(f"{where}: its plan is from a newer infermeter (version {data['version']}); upgrade")
        return StoredPlan(
            parts=tuple(_matrix_from_json(part, resolve) for part in data["parts"]),
            command=tuple(str(word) for word in data.get("command", [])),
            scenario=stored_scenario(data),
            isolate=bool(data.get("isolate", True)),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(
            f"{where} holds a plan that cannot be read ({type(exc).__name__}: {exc}); the file was left as it is"
        ) from exc


def stored_plan(results: ResultsFile, where: Path, resolve: Callable[[str], ModelSpec]) -> StoredPlan | None:
    """The plan stored in `results`, or None when the file has none (written before plans were stored)."""
    if PLAN_KEY not in results.extra:
        return None
    return plan_from_dict(results.extra[PLAN_KEY], where, resolve)


def store_plan(results: ResultsFile, plan: StoredPlan) -> None:
    """Put `plan` into `results` (written with the file's next write, before the first case)."""
    results.extra[PLAN_KEY] = plan_to_dict(plan)


def record_resumption(results: ResultsFile, command: Sequence[str], left: int, extended: bool) -> None:
    """Append this resumption to the file's history; `command` (the original) is left as it was."""
    history = results.extra.get(RESUMED_KEY)
    entries = history if isinstance(history, list) else []
    entry: dict[str, Any] = {"at": now_iso(), "command": list(command), "remaining": left}
    if extended:
        entry["extended"] = True
    results.extra[RESUMED_KEY] = [*entries, entry]
