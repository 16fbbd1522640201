"""The cold-start table (`bench --cold-start`): each phase from a fresh process to the first result, the build
stage's apart from the load's, each under its own name (`results.artifact.Phase`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from infermeter.figures.number_format import format_number
from infermeter.report.summary import backend_labels, format_ms, precision_cell
from infermeter.results.artifact import Phase
from infermeter.results.schema import CaseResult

# Load phases in the order they run, each in a column of its own name; a phase named otherwise (a test backend's,
# a generation backend's) is summed into `other s`. A build phase taken in `load` (nothing built ahead) shows in its
# own column too.
LOAD_PHASES = (
    Phase.IMPORT,
    Phase.MODEL_INIT,
    Phase.CONVERT,
    Phase.QUANTIZE,
    Phase.OPTIMIZE,
    Phase.COMPILE,
    Phase.DESERIALIZE,
    Phase.SESSION_CREATE,
)
_COLUMN_NAMES = {Phase.SESSION_CREATE: "session s"}
# PyTorch backends and older files called instantiating the module (weights included) `build_s`: not a compilation.
_PHASE_ALIASES = {"build_s": Phase.MODEL_INIT.value}


def phase_column(phase: Phase) -> str:
    """`compile_s` -> `compile s`, `model_init_s` -> `model init s`."""
    return _COLUMN_NAMES.get(phase, phase.value.removesuffix("_s").replace("_", " ") + " s")


COLD_START_PHASE_COLUMNS = ("build s", *(phase_column(phase) for phase in LOAD_PHASES), "other s")
COLD_START_COLUMNS = (
    "model",
    "backend",
    "precision",
    "cache",
    "cache hit",
    "process s",
    *COLD_START_PHASE_COLUMNS,
    "load s",
    "first ms",
    "to first result s",
    "P50 ms",
)


def _phase_cells(load_phases_s: dict[str, float]) -> list[str]:
    phases: dict[str, float] = {}
    for name, seconds in load_phases_s.items():
        key = _PHASE_ALIASES.get(name, name)
        phases[key] = phases.get(key, 0.0) + seconds
    known = [phases.pop(phase.value, None) for phase in LOAD_PHASES]
    other = sum(phases.values()) if phases else None
    return [format_number(seconds, ",.2f") for seconds in (*known, other)]


def _cache_cell(case: CaseResult) -> str:
    """The build stage's cache state when the case loaded an artifact, else the engine's own cache hit."""
    if case.loading.build is not None:
        return case.loading.build.cache
    return {True: "yes", False: "no", None: "—"}[case.loading.cache_hit]


def cold_start_rows(cases: Sequence[CaseResult]) -> list[list[str]]:
    """One row per cold-start run: each phase of getting from a fresh process to the first result. `build s` is
    what this run spent building its artifact (0 on a cache hit), apart from the load; the backend is labelled with
    its variant's options (`tvm tune_trials=64`), but never with the passes' own `cache` and `cold.pass`."""
    rows = []
    backends = backend_labels([replace(c, options=_without_pass(c.options)) for c in cases])
    for case in cases:
        options = case.options
        label = "no cache" if options.get("cache") == "off" else f"cache (run {options.get('cold.pass', '?')})"
        if not case.ok:
            head = [case.model, backends[case.id], case.precision, label, case.status.upper()]
            rows.append(head + ["—"] * (len(COLD_START_COLUMNS) - len(head)))
            continue
        build_s = case.loading.build.built_here_s if case.loading.build is not None else None
        first_result_s = sum(
            (
                case.loading.process_start_s or 0.0,
                build_s or 0.0,
                case.loading.load_s or 0.0,
                (case.loading.first_inference_ms or 0.0) / 1e3,
            )
        )
        rows.append(
            [
                case.model,
                backends[case.id],
                precision_cell(case),
                label,
                _cache_cell(case),
                format_number(case.loading.process_start_s, ",.2f"),
                format_number(build_s, ",.2f"),
                *_phase_cells(case.loading.load_phases_s),
                format_number(case.loading.load_s, ",.2f"),
                format_ms(case.loading.first_inference_ms),
                format_number(first_result_s, ",.2f"),
                format_ms(case.latency_ms.p50 if case.latency_ms else None),
            ]
        )
    return rows


def _without_pass(options: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in options.items() if key not in ("cache", "cold.pass")}


__all__ = ["COLD_START_COLUMNS", "COLD_START_PHASE_COLUMNS", "cold_start_rows", "phase_column"]
