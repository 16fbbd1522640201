"""The summary table of a sweep, as plain rows: shared by the console, markdown and HTML renderers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from infermeter.backends.variant import variant_label
from infermeter.case import comparison_key, model_family
from infermeter.report.int8 import int8_explanation
from infermeter.report.numbers import format_number
from infermeter.report.tuning import tuning_sentence
from infermeter.results.records import (
    GenerationCase,
    Int8Run,
    NodeRecord,
    ParityRecord,
    Roofline,
    most_processes,
    read_record,
)
from infermeter.results.records.int8 import GIVEN
from infermeter.results.schema import CaseResult, CaseWarning, LatencyStats, PairedSpeedup
from infermeter.stats import WARNING_CODES, min_samples_for

COLUMNS = (
    "model",
    "backend",
    "precision",
    "batch",
    "shape",
    "streams",
    "P50 ms",
    "P99 ms",
    "throughput/s",
    "peak MB",
    "load s",
    "speedup",
    "GFLOP/s",
    "% peak",
)

# Right-aligned by every renderer (console, markdown, HTML).
NUMERIC_COLUMNS = frozenset(
    {"batch", "P50 ms", "P99 ms", "throughput/s", "peak MB", "load s", "speedup", "GFLOP/s", "% peak"}
)


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
_ALWAYS |= {"case", "status", "MB/1k req", "95% CI", "plateau at", "start MB", "end MB"}  # the soak's table
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


def machine_of(case: CaseResult) -> str | None:
    """The class of cluster node the case ran on (`bench --cluster`), None for a case run here."""
    node = read_record(case, NodeRecord)
    return node.machine if node is not None else None


def comparison_group(case: CaseResult) -> tuple[object, ...]:
    """The comparison group of a result (`case.comparison_key`, as `Case.group_key` for a case to run): speedups are
    within one, so never across inputs (`--data`, `--input NAME=VALUE`) or machine classes."""
    shapes = tuple(sorted((name, tuple(dims)) for name, dims in case.input_shapes.items()))
    model = case.model
    generation = read_record(case, GenerationCase)
    if generation is not None:  # a generation case: its GGUF levels compared, as `GenerateCase.group_key` does
        model = model_family(case.model)
        shapes += (("generated", (case.batch, generation.gen_len)),)
    data_hash = case.data.content_hash if case.data is not None else None
    values = case.input_values.items()
    return comparison_key(
        model, case.batch, case.shape_mode, shapes, case.threads, case.streams, data_hash, values, machine_of(case)
    )


def format_ms(value: float | None) -> str:
    """Milliseconds with three significant digits at least (0.0123, 1.23, 123)."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value:.4f}"
    if value < 100:
        return f"{value:.2f}"
    return f"{value:,.0f}"


def precision_cell(case: CaseResult) -> str:
    """`fp32`, or `fp32→bf16` when the engine runs another precision than requested; an INT8 row names the
    quantizer that made its graph and, when the engine says, how many of its compute layers ran int8
    (`int8 (nncf 27/30)`; `int8 (model)` for a graph that came quantized; `Int8Run`)."""
    effective = case.precision_effective
    cell = case.precision if effective is None or effective == case.precision else f"{case.precision}→{effective}"
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


@dataclass(frozen=True)
class Speedup:
    """A case's speedup over its group's baseline: `ratio` (baseline P50 / case P50, or the paired geometric mean
    when the group ran interleaved), `mark` (empty; "mixed" across precisions; "precision", "parity" or
    "interference" or "storage" when refused, ratio None) and the paired interval when there is one."""

    ratio: float | None
    mark: str = ""
    paired: PairedSpeedup | None = None


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
        paired = case.paired if case.paired is not None and case.paired.baseline_id == base.id else None
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


def speedup_cell(speedup: Speedup | None) -> str:
    """`2.71x [2.64–2.78]` (paired), `no diff [0.98–1.03]` when the interval holds 1.0, `1.52x` (unpaired),
    `n/a†`/`n/a‡`/`n/a§` when refused, `—` when there is nothing to compare."""
    if speedup is None:
        return "—"
    refused = {"precision": "n/a†", "parity": "n/a‡", "interference": "n/a§", "storage": "n/a¶"}
    if speedup.mark in refused:
        return refused[speedup.mark]
    assert speedup.ratio is not None
    star = "*" if speedup.mark == "mixed" else ""
    paired = speedup.paired
    if paired is None:
        return f"{speedup.ratio:.2f}x{star}"
    interval = f"[{paired.ci_low:.2f}–{paired.ci_high:.2f}]"
    return f"no diff{star} {interval}" if paired.no_difference else f"{paired.ratio:.2f}x{star} {interval}"


def p50_cell(case: CaseResult) -> str:
    """P50, with its interval's half-width (`483 ±6%`) when that is wider than the case's --target-ci: the stop
    rule ran out of --max-time before the median was known as precisely as asked."""
    stats = case.latency_ms
    assert stats is not None
    low, high = stats.p50_ci95
    halfwidth = max(stats.p50 - low, high - stats.p50) / stats.p50 if stats.p50 > 0 else 0.0
    if case.target_ci is None or halfwidth <= case.target_ci:
        return format_ms(stats.p50)
    # One decimal below 10%, so that a 1.4% interval against a 1% target does not read "±1%".
    width = f"{halfwidth:.0%}" if halfwidth >= 0.1 else f"{halfwidth:.1%}"
    return f"{format_ms(stats.p50)} ±{width}"


def p99_cell(stats: LatencyStats) -> str:
    """P99, prefixed `~` when fewer than the samples a sound P99 needs stand behind it (see stats.min_samples_for)."""
    sound = stats.count >= min_samples_for(99)
    return format_ms(stats.p99) if sound else f"~{format_ms(stats.p99)}"


def _roofline_cells(case: CaseResult) -> list[str]:
    """Achieved GFLOP/s and the fraction of this machine's ceiling for the case's precision (`bench` adds them
    from `infermeter peak`); "—" when not annotated (--no-roofline, a synthetic case, FLOPs not countable), "≥"
    before lower bounds (some of the graph's nodes uncounted)."""
    roofline = read_record(case, Roofline)
    if roofline is None:
        return ["—", "—"]
    fraction = roofline.peak_fraction
    at_least = "≥" if roofline.uncounted_nodes else ""  # nodes without shapes count 0: lower bounds
    return [f"{at_least}{roofline.achieved_gflops:,.1f}", "—" if fraction is None else f"{at_least}{fraction:.0%}"]


def summary_table(cases: Sequence[CaseResult], allow_mixed_precision: bool = False) -> SummaryTable:
    """The headline table: one row per case, speedup against the first backend of each group."""
    ratios = speedups(cases, allow_mixed_precision)
    rows: list[list[str]] = []
    warnings: list[tuple[str, CaseWarning]] = []
    footnotes: list[str] = []
    marks: set[str] = set()
    tail_short = wide = False
    backends = backend_labels(cases)
    for case in cases:
        label = case_label(case, backends[case.id])
        if not case.ok:
            head = [case.model, backends[case.id], case.precision, str(case.batch), case.shape_mode, str(case.streams)]
            rows.append(head + [case.status.upper()] + ["—"] * 7)
            footnotes.append(f"{label}: {case.status}: {case.error}")
            continue
        stats = case.latency_ms
        assert stats is not None
        speedup = ratios.get(case.id)
        marks.add(speedup.mark if speedup is not None else "")
        p50, p99 = p50_cell(case), p99_cell(stats)
        tail_short = tail_short or p99.startswith("~")
        wide = wide or "±" in p50
        rows.append(
            [
                case.model,
                backends[case.id],
                precision_cell(case),
                str(case.batch),
                case.shape_mode,
                str(case.streams),
                p50,
                p99,
                format_number(case.throughput, ",.1f"),
                format_number(case.peak_rss_mb, ",.0f"),
                format_number(case.load_s, ",.2f"),
                speedup_cell(speedup),
                *_roofline_cells(case),
            ]
        )
        warnings.extend((label, w) for w in case.warnings)
    # Where an INT8 row's time went, and what a tuned row's tuning bought: one sentence per row that has one.
    footnotes += [
        f"{case_label(case, backends[case.id])}: {text}"
        for sentence in (int8_explanation, tuning_sentence)
        for case in cases
        if (text := sentence(case, cases))
    ]
    if "precision" in marks:
        footnotes.append(
            "† speedup refused: this case runs a different effective precision than the first backend of its group; "
            "pass --allow-mixed-precision to show it anyway (marked *)"
        )
    if "parity" in marks:
        footnotes.append(
            "‡ no speedup: this case's outputs failed the parity check against the fp32 reference (see its `parity`)"
        )
    if "interference" in marks:
        footnotes.append("§ no speedup: other work on this machine disturbed this case or its baseline (interference)")
    if "storage" in marks:
        footnotes.append("¶ no speedup: fp32 compute (fp16 storage): the engine computes this reduced-precision "
                         "graph in fp32 on this CPU, so its speed is no fp16/bf16 figure")  # fmt: skip
    processes = most_processes(cases)
    if processes:
        footnotes.append(f"P50: geometric mean of each case's process medians (--repeat, up to {processes} processes), "
                         "its interval from their spread")  # fmt: skip
    if wide:
        footnotes.append(
            "± P50 interval wider than --target-ci: "
            + (
                "its processes disagree by more (--repeat)"
                if processes
                else "--max-time ran out first; raise --max-time for a tighter one"
            )
        )
    if tail_short:
        footnotes.append(
            f"~ P99 from fewer than {min_samples_for(99)} samples: indicative only; raise --min-time for a sound one"
        )
    if any(speedup.paired is not None for speedup in ratios.values()):
        unit = "per-pass ratios of process medians (--repeat)" if processes else "per-round ratios"
        footnotes.append(
            f"speedup: geometric mean of {unit} with its 95% interval (interleaved rounds); "
            "no diff: the interval contains 1.0"
        )
    if any(speedup.mark == "mixed" for speedup in ratios.values()):
        footnotes.append("* speedup across different effective precisions (--allow-mixed-precision)")
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
    return SummaryTable(COLUMNS, rows, warnings, footnotes)


PER_SHAPE_COLUMNS = ("model", "backend", "precision", "batch", "streams", "shape", "runs", "P50 ms", "P99 ms")


def per_shape_rows(cases: Sequence[CaseResult]) -> list[list[str]]:
    """Rows of per-shape statistics for dynamic-shape cases (`seq=64→80` marks a size padded into a bucket)."""
    rows = []
    for case in cases:
        for entry in case.per_shape:
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
