"""CSV report: one row per case, flat columns in a fixed order, values written so that they read back exactly.

`latency_ms.*` is flattened (`latency_ms.p50`, `latency_ms.p50_ci95_low`, ...); lists and dicts that have no flat
form (options, input shapes) are JSON in their cell; an empty cell is a missing value. `parse_csv` is the inverse
of `csv_records` + `render_csv`, for spreadsheets and scripts that read the file back.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from infermeter.figures.metric_registry import STORED, metric
from infermeter.report.merged import MergedReport
from infermeter.results.records import Accuracy, ParityRecord, Record, Roofline, read_record
from infermeter.results.schema import CaseResult

Value = str | int | float | bool | None

_STATS = ("p50", "p90", "p95", "p99", "p999", "mean", "std", "min", "max", "cv")


def _stat(name: str) -> Callable[[CaseResult], Value]:
    return lambda c: None if c.latency_ms is None else getattr(c.latency_ms, name)


def _ci(name: str, index: int) -> Callable[[CaseResult], Value]:
    return lambda c: None if c.latency_ms is None else getattr(c.latency_ms, name)[index]


def _record(kind: type[Record], name: str) -> Callable[[CaseResult], Value]:
    def get(case: CaseResult) -> Value:
        record = read_record(case, kind)
        return None if record is None else getattr(record, name)

    return get


# (column, type, getter); types: str, int, float, bool, json. The order is the file's column order: append only.
COLUMNS: list[tuple[str, str, Callable[[CaseResult], Value]]] = [
    ("id", "str", lambda c: c.id),
    ("model", "str", lambda c: c.model),
    ("backend", "str", lambda c: c.backend),
    ("backend_version", "str", lambda c: c.backend_version),
    ("device", "str", lambda c: c.device),
    ("batch", "int", lambda c: c.batch),
    ("shape_mode", "str", lambda c: c.shape_mode),
    ("precision", "str", lambda c: c.precision),
    ("precision_effective", "str", lambda c: c.precision_effective),
    ("threads", "int", lambda c: c.threads),
    ("status", "str", lambda c: c.status),
    ("error", "str", lambda c: c.error),
    *[(f"latency_ms.{name}", "float", _stat(name)) for name in _STATS],
    ("latency_ms.p50_ci95_low", "float", _ci("p50_ci95", 0)),
    ("latency_ms.p50_ci95_high", "float", _ci("p50_ci95", 1)),
    ("latency_ms.p99_ci95_low", "float", _ci("p99_ci95", 0)),
    ("latency_ms.p99_ci95_high", "float", _ci("p99_ci95", 1)),
    ("latency_ms.outliers", "int", _stat("outliers")),
    ("latency_ms.count", "int", _stat("count")),
    ("iterations", "int", lambda c: c.timing.iterations),
    ("warmup_iterations", "int", lambda c: c.timing.warmup_iterations),
    ("throughput", "float", metric("throughput").value),
    ("peak_rss_mb", "float", metric("peak_rss_mb").value),
    ("rss_before_load_mb", "float", lambda c: c.memory.rss_before_load_mb),
    ("load_s", "float", metric("load_s").value),
    ("cache_hit", "bool", lambda c: c.loading.cache_hit),
    ("first_inference_ms", "float", lambda c: c.loading.first_inference_ms),
    ("isolated", "bool", lambda c: c.isolated),
    ("started", "str", lambda c: c.started),
    ("duration_s", "float", lambda c: c.duration_s),
    ("warnings", "str", lambda c: ";".join(w.code for w in c.warnings) or None),
    ("options", "json", lambda c: json.dumps(c.options, sort_keys=True)),
    ("input_shapes", "json", lambda c: json.dumps(c.shapes.input_shapes, sort_keys=True)),
    ("parity.passed", "bool", _record(ParityRecord, "passed")),
    ("accuracy.metric", "str", _record(Accuracy, "metric")),
    ("accuracy.value", "float", _record(Accuracy, "value")),
    ("accuracy.drop_pct", "float", _record(Accuracy, "drop_pct")),
    ("flops", "float", _record(Roofline, "flops")),
    ("achieved_gflops", "float", metric("achieved_gflops").value),
    ("arithmetic_intensity", "float", _record(Roofline, "arithmetic_intensity")),
]
# Each registry metric's CSV column: where the file already had it, its getter is the registry's; a metric added to
# the registry later is appended here, after the columns above (the order is append-only).
_LISTED = {name for name, _, _ in COLUMNS}
COLUMNS += [(m.csv, "float", m.value) for m in STORED if m.csv is not None and m.csv not in _LISTED]
COLUMN_TYPES = {name: kind for name, kind, _ in COLUMNS}


def csv_records(report: MergedReport) -> list[dict[str, Value]]:
    """One flat dict per case, `file` first, then COLUMNS in order (what `parse_csv` gives back)."""
    records = []
    for case, source in zip(report.cases, report.sources, strict=True):
        record: dict[str, Value] = {"file": source}
        for name, kind, get in COLUMNS:
            value = get(case)
            if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            record[name] = value
        records.append(record)
    return records


def _write(value: Value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back to the same float
    return str(value)


def render_csv(report: MergedReport) -> str:
    """The CSV text (header + one row per case, `\\n` line ends)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["file", *COLUMN_TYPES])
    for record in csv_records(report):
        writer.writerow([_write(v) for v in record.values()])
    return buffer.getvalue()


def _read(text: str, kind: str) -> Value:
    if text == "":
        return None
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    return text


def parse_csv(text: str) -> list[dict[str, Value]]:
    """Rows of a CSV written by `render_csv`, typed back (unknown columns stay strings)."""
    rows = []
    for raw in csv.DictReader(io.StringIO(text)):
        rows.append({name: _read(value or "", COLUMN_TYPES.get(name, "str")) for name, value in raw.items()})
    return rows


def decode_json_cell(value: Value) -> Any:
    """The object in a `json` column (options, input_shapes)."""
    return json.loads(value) if isinstance(value, str) else None
