"""The summary table of a sweep, as plain rows: shared by the console, markdown and HTML renderers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from infermeter.backends.variant import variant_label
from infermeter.figures.latency_stats import min_samples_for
from infermeter.figures.metric_registry import METRICS, Metric
from infermeter.figures.metric_registry import NUMERIC_COLUMNS as NUMERIC_COLUMNS  # importable from here, where it was
from infermeter.figures.metric_registry import Speedup as Speedup
from infermeter.figures.metric_registry import format_ms as format_ms
from infermeter.figures.warning_codes import WARNING_CODES
from infermeter.report.groups import comparison_group, machine_of
from infermeter.report.int8_explanation import int8_explanation
from infermeter.report.tuning import tuning_sentence
from infermeter.results.records import (
    ComputePrecision,
    Int8Run,
    ParityRecord,
    engine_log_footnotes,
    most_processes,
    read_record,
)
from infermeter.results.records.int8_run import GIVEN
from infermeter.results.schema import CaseResult, CaseWarning

# The case's identity, before the registry's metric columns (`metrics.METRICS`).
HEAD_COLUMNS = ("model", "backend", "precision", "batch", "shape", "streams")
# Every column the summary table can have (a metric whose `shown` is false for the cases is left out).
COLUMNS = HEAD_COLUMNS + tuple(metric.header for metric in METRICS)


@dataclass(frozen=True)
class SummaryTable:
    """Rows of formatted cells under COLUMNS, the warnings (case label, warning) and footnotes."""

    columns: tuple[str, ...]
    rows: list[list[str]]
    warnings: list[tuple[str, CaseWarning]] = field(default_factory=list)
    footnotes: list[str] = field(default_factory=list)

    def compact(self) -> tuple[list[str], list[list[str]], str]:
        """(columns, rows, caption) with every column whose cells are all equal moved into the caption
        (`model tiny_cnn · shape static`), so the table keeps only what varies."""
        keep = [
            i for i, column in enumerate(self.columns) if len({row[i] for row in self.rows}) > 1 or column in _ALWAYS
        ]
        caption = " · ".join(
            f"{self.columns[i]} {self.rows[0][i]}"
            for i in range(len(self.columns))
            if i not in keep and self.rows and _DEFAULT_HIDDEN.get(self.columns[i]) != self.rows[0][i]
        )
        return [self.columns[i] for i in keep], [[row[i] for i in keep] for row in self.rows], caption


_ALWAYS = {"backend", "P50 ms", "P99 ms", "throughput/s", "peak MB", "load s", "speedup", "shape", "runs", "cache"}
_ALWAYS |= {"import s", "load s", "first ms", "to first result s", "cache hit"}
_ALWAYS |= {
    "growth MB/1k req",
    "case",
    "status",
    "MB/1k req",
    "95% CI",
    "plateau at",
    "start MB",
    "end MB",
}  # the soak's table
# A constant column at its default value says nothing: dropped, not captioned ("—": not measured for any case).
_DEFAULT_HIDDEN = {"streams": "1", "GFLOP/s": "—", "% peak": "—"}
_DEFAULT_HIDDEN |= {column: "—" for column in ("build s", "model init s", "quantize s", "optimize s", "deserialize s")}
_DEFAULT_HIDDEN["other s"] = "—"


@dataclass(frozen=True)
class WarningGroup:
    """Every case that carries one warning code: `cases` holds (case label, short detail) pairs."""

    code: str
    title: str
    remedy: str
    cases: list[tuple[str, str]]


def group_warnings(warnings: Sequence[tuple[str, CaseWarning]]) -> list[WarningGroup]:
    """Warnings grouped by code in first-seen order, for a display that states each remedy once."""
    groups: dict[str, WarningGroup] = {}
    for label, warning in warnings:
        title, remedy = WARNING_CODES.get(warning.code, (warning.code, ""))
        group = groups.setdefault(warning.code, WarningGroup(warning.code, title, remedy or warning.message, []))
        group.cases.append((label, warning.detail))
    return list(groups.values())


def case_label(case: CaseResult, backend: str | None = None) -> str:
    """`model backend precision b16 static` — how a case is named in warnings and footnotes (`backend`: the
    backend's label when it differs from its name, see `backend_labels`; without one, the backend's name with the
    `@CLASS` of the cluster node class it ran on, if any)."""
    streams = f" x{case.streams} streams" if case.streams > 1 else ""
    if backend is None:
        backend = case.backend + _at_machine(case)
    return f"{case.model} {backend} {case.precision} b{case.batch} {case.shape_mode}{streams}"


def backend_labels(cases: Sequence[CaseResult]) -> dict[str, str]:
    """Each case's backend as the tables show it, by case id: with the options that tell apart several
    configurations of one backend in the same results (variants, `-b tvm:tune_trials=64`), else its name; with
    `@CLASS` after it when the case ran on a cluster node of that machine class (`bench --cluster`)."""
    by_backend: dict[str, list[CaseResult]] = {}
    for case in cases:
        by_backend.setdefault(case.backend, []).append(case)
    labels = {}
    for backend, group in by_backend.items():
        keys = {key for case in group for key in case.options}
        shown = {key for key in keys if len({case.options.get(key) for case in group}) > 1}
        for case in group:
            labels[case.id] = variant_label(backend, case.options, shown) + _at_machine(case)
    return labels


def _at_machine(case: CaseResult) -> str:
    """` @CLASS` for a case that ran on a cluster node of that machine class, else nothing."""
    machine = machine_of(case)
    return f" @{machine}" if machine else ""


def precision_cell(case: CaseResult) -> str:
    """`fp32`, or `fp32→bf16` when the engine runs another precision than requested (`fp16 (model)` for a model
    run in its own FP16/BF16, `fp32 (fp16 model)` for one computed in FP32); an INT8 row names the
    quantizer that made its graph and, when the engine says, how many of its compute layers ran int8
    (`int8 (nncf 27/30)`; `int8 (model)` for a graph that came quantized; `Int8Run`)."""
    effective = case.precision_effective
    cell = case.precision if effective is None or effective == case.precision else f"{case.precision}→{effective}"
    stored = read_record(case, ComputePrecision)
    # An FP16/BF16 file is the model's own precision (`fp16 (model)`), never a precision change; FP16 weights
    # computed in FP32 say so (`fp32 (fp16 model)`).
    reduced = stored is not None and stored.precision_storage in ("fp16", "bf16")
    if stored is not None and reduced and (effective in (None, case.precision) or stored.model_own(case.precision)):
        cell = stored.label()
    int8 = read_record(case, Int8Run)
    if int8 is None:
        return cell
    layers = f" {int8.mix.counts.get('int8', 0)}/{int8.mix.total}" if int8.mix is not None else ""
    # A graph that came quantized is the model's own precision: `int8 (model)`, not a quantizer of ours.
    return f"{cell} ({'model' if int8.quantizer == GIVEN else int8.quantizer}{layers})"


def parity_failed(case: CaseResult) -> bool:
    """True when the case carries a parity check that did not pass: its speed must not be reported as a gain."""
    parity = read_record(case, ParityRecord)
    return parity is not None and not parity.passed


def interfered(case: CaseResult) -> bool:
    """True when other work on the machine disturbed the case's timed loop (an `interference` warning)."""
    return any(w.code == "interference" for w in case.warnings)


def storage_only(case: CaseResult) -> bool:
    """True when the engine computed the case's FP16/BF16 graph in FP32 (an `fp32_compute_storage` warning)."""
    return any(w.code == "fp32_compute_storage" for w in case.warnings)


def speedups(cases: Sequence[CaseResult], allow_mixed_precision: bool = False) -> dict[str, Speedup]:
    """Speedup of each ok case over the first ok case of its group (same model, batch, shapes, threads). An
    interleaved pair gives the paired ratio with its interval; otherwise the ratio of P50s. Refused (ratio None)
    across effective precisions unless `allow_mixed_precision` (then marked "mixed"), for a parity failure, and
    when other work disturbed either case."""
    baselines: dict[tuple[object, ...], CaseResult] = {}
    out: dict[str, Speedup] = {}
    for case in cases:
        if not case.ok:
            continue
        if parity_failed(case):
            out[case.id] = Speedup(None, "parity")
            continue
        base = baselines.setdefault(comparison_group(case), case)
        assert base.latency_ms is not None and case.latency_ms is not None
        paired = (
            case.timing.paired if case.timing.paired is not None and case.timing.paired.baseline_id == base.id else None
        )
        ratio = paired.ratio if paired is not None else base.latency_ms.p50 / case.latency_ms.p50
        if base.precision_effective != case.precision_effective and not allow_mixed_precision:
            out[case.id] = Speedup(None, "precision")
        elif interfered(case) or interfered(base):
            out[case.id] = Speedup(None, "interference")
        elif storage_only(case) != storage_only(base):  # FP16 storage, FP32 compute: no FP16 speedup to claim
            out[case.id] = Speedup(None, "storage")
        else:
            mark = "" if base.precision_effective == case.precision_effective else "mixed"
            out[case.id] = Speedup(ratio, mark, paired)
    return out


def summary_table(cases: Sequence[CaseResult], allow_mixed_precision: bool = False) -> SummaryTable:
    """The headline table: one row per case, speedup against the first backend of each group."""
    ratios = speedups(cases, allow_mixed_precision)
    shown = [metric for metric in METRICS if metric.shown(cases)]
    rows: list[list[str]] = []
    warnings: list[tuple[str, CaseWarning]] = []
    footnotes: list[str] = []
    tail_short = wide = False
    backends = backend_labels(cases)
    for case in cases:
        label = case_label(case, backends[case.id])
        if not case.ok:
            head = [case.model, backends[case.id], case.precision, str(case.batch), case.shape_mode, str(case.streams)]
            rows.append(head + failed_cells(case, shown))
            footnotes.append(f"{label}: {case.status}: {case.error}")
            continue
        cells = {metric.header: metric.text(case, ratios.get(case.id)) for metric in shown}
        tail_short = tail_short or cells["P99 ms"].startswith("~")
        wide = wide or "±" in cells["P50 ms"]
        head = [case.model, backends[case.id], precision_cell(case), str(case.batch), case.shape_mode]
        rows.append([*head, str(case.streams), *cells.values()])
        warnings.extend((label, w) for w in case.warnings)
    # Where an INT8 row's time went, and what a tuned row's tuning bought: one sentence per row that has one.
    footnotes += [
        f"{case_label(case, backends[case.id])}: {text}"
        for sentence in (int8_explanation, tuning_sentence)
        for case in cases
        if (text := sentence(case, cases))
    ]
    footnotes += _speed_footnotes(cases, ratios, wide, tail_short)
    footnotes += engine_log_footnotes(cases)  # each distinct engine warning once, with its count
    if any(speedup.mark == "mixed" for speedup in ratios.values()):
        warnings.append(
            (
                "table",
                CaseWarning(
                    "precision_mismatch",
                    "speedups marked * compare different effective precisions: they are not like-for-like",
                    "speedups marked *",
                ),
            )
        )
    return SummaryTable(HEAD_COLUMNS + tuple(metric.header for metric in shown), rows, warnings, footnotes)


def _speed_footnotes(
    cases: Sequence[CaseResult], ratios: dict[str, Speedup], wide: bool, tail_short: bool
) -> list[str]:
    """The footnotes of the speed columns: refused speedups (†‡§¶), --repeat medians, wide P50 intervals (±),
    P99s from too few samples (~), paired intervals and speedups across precisions (*)."""
    marks = {speedup.mark for speedup in ratios.values()}
    notes: list[str] = []
    if "precision" in marks:
        notes.append(
            "† speedup refused: this case runs a different effective precision than the first backend of its group; "
            "pass --allow-mixed-precision to show it anyway (marked *)"
        )
    if "parity" in marks:
        notes.append(
            "‡ no speedup: this case's outputs failed the parity check against the fp32 reference (see its `parity`)"
        )
    if "interference" in marks:
        notes.append("§ no speedup: other work on this machine disturbed this case or its baseline (interference)")
    if "storage" in marks:
        notes.append("¶ no speedup: fp32 compute (fp16 storage): the engine computes this reduced-precision "
                     "graph in fp32 on this CPU, so its speed is no fp16/bf16 figure")  # fmt: skip
    processes = most_processes(cases)
    if processes:
        notes.append(f"P50: geometric mean of each case's process medians (--repeat, up to {processes} processes), "
                     "its interval from their spread")  # fmt: skip
    if wide:
        notes.append(
            "± P50 interval wider than --target-ci: "
            + (
                "its processes disagree by more (--repeat)"
                if processes
                else "--max-time ran out first; raise --max-time for a tighter one"
            )
        )
    if tail_short:
        notes.append(
            f"~ P99 from fewer than {min_samples_for(99)} samples: indicative only; raise --min-time for a sound one"
        )
    if any(speedup.paired is not None for speedup in ratios.values()):
        unit = "per-pass ratios of process medians (--repeat)" if processes else "per-round ratios"
        notes.append(
            f"speedup: geometric mean of {unit} with its 95% interval (interleaved rounds); "
            "no diff: the interval contains 1.0"
        )
    if "mixed" in marks:
        notes.append("* speedup across different effective precisions (--allow-mixed-precision)")
    return notes


def failed_cells(case: CaseResult, shown: Sequence[Metric]) -> list[str]:
    """A failed case's metric cells: its status (`FAILED`, `CRASHED`) under the first metric, "—" under the rest."""
    return [case.status.upper() if index == 0 else "—" for index in range(len(shown))]


PER_SHAPE_COLUMNS = ("model", "backend", "precision", "batch", "streams", "shape", "runs", "P50 ms", "P99 ms")


def per_shape_rows(cases: Sequence[CaseResult]) -> list[list[str]]:
    """Rows of per-shape statistics for dynamic-shape cases (`seq=64→80` marks a size padded into a bucket)."""
    rows = []
    for case in cases:
        for entry in case.shapes.per_shape:
            stats = entry["latency_ms"]
            rows.append(
                [
                    case.model,
                    case.backend,
                    precision_cell(case),
                    str(case.batch),
                    str(case.streams),
                    entry["label"],
                    str(entry["count"]),
                    format_ms(stats["p50"]),
                    format_ms(stats["p99"]),
                ]
            )
    return rows
