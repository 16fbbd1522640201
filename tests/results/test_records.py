"""Typed case records: every registered record round-trips record -> dict -> JSON -> record, through a results
file too; files written before records existed (the same JSON, or none of it) still load; bad data is named."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from crafted_results import make_case, make_results
from infermeter.errors import ResultsError
from infermeter.results.io import read_results, write_results
from infermeter.results.records import (
    CASE_RECORDS,
    SLO,
    Accuracy,
    AccuracyError,
    ComputePrecision,
    Distribution,
    EngineLog,
    EngineWarning,
    Footprint,
    GenerationCase,
    GenerationSummary,
    GgufQuality,
    Int8Run,
    LayerMix,
    LayerProfile,
    LayerTime,
    LoadRecord,
    LostAttempt,
    NodeGroup,
    NodeRecord,
    OptimizeStep,
    OutputMetrics,
    ParityRecord,
    ProcessRecord,
    ProcessRun,
    QuantizedVariant,
    Record,
    Roofline,
    RooflineError,
    ServerMetrics,
    ServerSample,
    ServingLevel,
    SoakRecord,
    Tolerance,
    TunePoint,
    read_record,
    write_record,
)

_DIST = Distribution(p50=10.5, p90=12.0, p99=15.25, mean=11.0, min=9.0, max=16.0, count=40)

# One record of every kind, with every field set away from its default where it has one.
SAMPLES: dict[type[Record], Record] = {
    ParityRecord: ParityRecord(
        "onnxruntime",
        "torch",
        "fp32",
        "pass",
        "within atol 1e-05×scale",
        Tolerance("fp32", 1e-5, 1e-4, 0.99999, 0.9),
        "fp32",
        [OutputMetrics("logits", (2, 10), 1e-7, 1e-8, 2e-6, 1e-7, 1.0, math.inf, 3.5, 0.1, 0, 1.0, 1.0)],
        2,
        "logits",
        {"status": "clean", "compared": 7},
    ),
    Accuracy: Accuracy("top1", 0.91, 0.93, 2.0, 64, {"cosine_mean": 0.99, "sqnr_db": 31.5}),
    AccuracyError: AccuracyError("RuntimeError: no INT8 kernels"),
    Roofline: Roofline(2_000_000, 400_000, 12.5, 5.0, "fp32_gflops", 100.0, 0.125, 100.0, "compute", True),
    RooflineError: RooflineError("ModelError: no ONNX form"),
    OptimizeStep: OptimizeStep("int8", "INT8 static QDQ", "artifacts/model.int8.onnx"),
    GenerationSummary: GenerationSummary(
        8, 7, 1, {"timeout": 1}, 2.5, 2.8, 112, 256, 44.8, _DIST, _DIST, _DIST, _DIST, _DIST, SLO(200.0, 30.0), 6, 2.4
    ),
    GenerationCase: GenerationCase(64, 16, "output tokens/s", 12.5, 4, 1, "generate"),
    GgufQuality: GgufQuality("q8_0", 1.25, 12.5, 300, 0.97, "f16"),
    QuantizedVariant: QuantizedVariant("int8", "INT8 static", "resnet18", "/tmp/m.int8.onnx", ["conv1", "fc"]),
    LoadRecord: LoadRecord(
        "http://127.0.0.1:8000",
        "server",
        120.0,
        119.5,
        118.0,
        None,
        10.0,
        1195,
        1190,
        {"timeout": 5},
        20.0,
        False,
        ["5 of 1195 requests failed (timeout 5)"],
        0.4,
        1.2,
    ),
    TunePoint: TunePoint("max-batch 8, delay 2 ms, 1 worker", True),
    Int8Run: Int8Run(
        "int8",
        "int8",
        "nncf",
        "own",
        LayerMix({"int8": 27, "fp32": 3}, ["head/MatMul"]),
        LayerProfile(
            2.5,
            20,
            NodeGroup(27, 0.9),
            NodeGroup(2, 0.1),
            NodeGroup(1, 0.05),
            NodeGroup(3, 0.4),
            [LayerTime("conv1", "Convolution", "int8", 0.3)],
        ),
        LayerProfile(1.25, 20, NodeGroup(3, 0.1), NodeGroup(), NodeGroup(), NodeGroup(30, 1.0)),
        "RuntimeError: no counters",
    ),
    NodeRecord: NodeRecord(
        "c0ffee" * 4,
        "xeon-1",
        "xeon-amx",
        1796160000.25,
        1796160004.5,
        {"cpu_model": "Intel Xeon", "thread_env": {"OMP_NUM_THREADS": "4"}},
        (LostAttempt("dead" * 6, "xeon-2", "xeon-amx", "NodeDiedError: the node died", "2026-12-01T22:00:00+00:00"),),
    ),
    SoakRecord: SoakRecord(
        5000,
        50,
        2500,
        2450,
        505,
        "zipf",
        "minutes",
        [[0, 0.0, 50.5, 40.25], [5000, 9.5, 80.0, 70.0]],
        1.25,
        [1.0, 1.5],
        True,
        None,
        2.5,
        80.0,
        50.5,
        80.0,
        [[0, 499, 1.5, 3.25]],
        "jemalloc",
        {"seq": [8, 512]},
        {"seq": [128, 256, 512]},
        {"heap_mb": 10.5},
        ["a note"],
    ),
    Footprint: Footprint(12.5, "/tmp/model.onnx", 55.25, ["onnxruntime"], 0.75, "a reason"),
    ProcessRecord: ProcessRecord(
        3, (ProcessRun(0, "ok", 1.5, 2.5, 400, 10, 0.2, 3.0, 120.0, "t", 2.0), ProcessRun(1, "crashed", error="killed"))
    ),
    ServingLevel: ServingLevel("llama-server -np 4", "rate", 2.5, 0.875, 0.9, "3 of 8 requests failed: connect"),
    ServerMetrics: ServerMetrics(
        ("http://127.0.0.1:1/metrics",),
        0.5,
        (ServerSample(0.25, {"llamacpp:requests_processing": 2.0}), ServerSample(0.75, {})),
        ("http://127.0.0.1:1/slots: HTTP 404",),
    ),
    EngineLog: EngineLog(
        [EngineWarning("onnxruntime", "Removing initializer '…'.", 2, ["Removing initializer 'a'."], "strip", True)],
        ["a line"],
    ),
    ComputePrecision: ComputePrecision("fp16", "fp32", True, "onnxruntime profile: 53 fp32 compute kernels"),
}


def _case() -> Any:
    return make_case("onnxruntime", 1, 1.0, n=20)


def test_every_registered_record_has_a_sample_and_a_distinct_place() -> None:
    assert set(SAMPLES) == set(CASE_RECORDS)
    blocks = [kind.KEY for kind in CASE_RECORDS if not kind.FLAT]
    assert len(blocks) == len(set(blocks))
    flat_keys = [key for kind in CASE_RECORDS if kind.FLAT for key in kind.field_names()]
    assert len(flat_keys) == len(set(flat_keys)) and not set(flat_keys) & set(blocks)
    for kind in CASE_RECORDS:
        assert not kind.FLAT or kind.MARKER in kind.field_names(), kind


@pytest.mark.parametrize("kind", CASE_RECORDS, ids=lambda kind: kind.__name__)
def test_record_round_trips_through_json(kind: type[Record]) -> None:
    record = SAMPLES[kind]
    text = json.dumps(record.to_dict(), allow_nan=False)  # results files are strict JSON
    assert kind.from_dict(json.loads(text)) == record


@pytest.mark.parametrize("kind", CASE_RECORDS, ids=lambda kind: kind.__name__)
def test_record_round_trips_through_a_results_file(kind: type[Record], tmp_path: Path) -> None:
    case = _case()
    assert read_record(case, kind) is None
    write_record(case, SAMPLES[kind])
    path = tmp_path / "r.json"
    write_results(path, make_results([case]))
    back = read_results(path).cases[0]
    assert read_record(back, kind) == SAMPLES[kind]
    assert all(read_record(back, other) is None for other in CASE_RECORDS if other is not kind)


def test_flat_record_rewritten_drops_its_stale_fields() -> None:
    case = _case()
    write_record(case, SAMPLES[Roofline])
    write_record(case, Roofline(10, 5, 1.0, 2.0, "int8_gops"))
    assert "attainable_gflops" not in case.extra and "peak_exceeded" not in case.extra
    assert read_record(case, Roofline) == Roofline(10, 5, 1.0, 2.0, "int8_gops")


# A results file as infermeter wrote it before typed records: the same on-disk forms, hand-written here so that
# a change of format fails this test rather than passing through a writer that changed with it.
_OLD_CASE: dict[str, Any] = {
    "id": "old",
    "model": "tiny_cnn",
    "backend": "onnxruntime",
    "backend_version": "1.20.0",
    "device": "cpu",
    "batch": 1,
    "shape_mode": "static",
    "precision": "int8",
    "precision_effective": "int8",
    "threads": 2,
    "status": "ok",
    "parity": {
        "backend": "onnxruntime",
        "reference": "torch",
        "precision": "int8",
        "status": "fail",
        "reason": "output logits: cosine 0.9 < 0.98",
        "tolerance": {"precision": "int8", "atol": None, "rtol": None, "min_cosine": 0.98, "min_top1": 0.9},
        "precision_effective": "int8",
        "outputs": [{"name": "logits", "shape": [2, 10], "cosine": 0.9, "sqnr_db": "inf", "worst_ratio": None}],
        "samples": 2,
        "worst_output": "logits",
        "localization": None,
        "passed": False,
    },
    "accuracy": {
        "metric": "top1", "value": 0.9, "fp32_value": 0.92, "drop_pct": 2.0, "eval_samples": 64, "cosine_mean": 0.99
    },
    "flops": 1000,
    "bytes_moved": 500,
    "achieved_gflops": 2.0,
    "arithmetic_intensity": 2.0,
    "peak_precision": "int8_gops",
    "peak_ceiling_gflops": None,
    "peak_fraction": None,
    "optimize": {"step": "int8", "variant": "INT8 static QDQ", "artifact": "artifacts/model.int8.onnx"},
    "load": {
        "target": "http://127.0.0.1:8000", "scenario": "offline", "target_qps": None, "offered_qps": 50.0,
        "achieved_qps": 49.0, "concurrency": 8, "duration_s": 5.0, "issued": 250, "ok": 250, "errors": {},
        "slo_p99_ms": None, "valid": True, "reasons": [], "lag_p99_ms": 0.1, "lag_max_ms": 0.3,
    },
    "tune": {"policy": "max-batch 8", "pick": True},
    "a_later_field": {"kept": True},
}  # fmt: skip


def _write_old(path: Path, case: dict[str, Any]) -> None:
    data = {"schema_version": 1, "created": "2026-01-01T00:00:00+00:00", "environment": {}, "cases": [case]}
    path.write_text(json.dumps(data))


def test_a_file_written_before_records_reads_into_them(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    _write_old(path, _OLD_CASE)
    case = read_results(path).cases[0]
    parity = read_record(case, ParityRecord)
    assert parity is not None and not parity.passed and parity.tolerance.min_top1 == 0.9
    assert parity.outputs[0].shape == (2, 10) and parity.outputs[0].sqnr_db == math.inf
    assert read_record(case, Accuracy) == Accuracy("top1", 0.9, 0.92, 2.0, 64, {"cosine_mean": 0.99})
    assert read_record(case, Roofline) == Roofline(1000, 500, 2.0, 2.0, "int8_gops")
    assert read_record(case, OptimizeStep) == OptimizeStep("int8", "INT8 static QDQ", "artifacts/model.int8.onnx")
    load = read_record(case, LoadRecord)
    assert load is not None and load.valid and load.concurrency == 8
    assert read_record(case, TunePoint) == TunePoint("max-batch 8", True)
    # Written back unchanged: nothing a record does not know is lost.
    again = tmp_path / "again.json"
    write_results(again, read_results(path))
    assert json.loads(again.read_text())["cases"][0]["a_later_field"] == {"kept": True}
    assert json.loads(again.read_text())["cases"][0]["parity"] == _OLD_CASE["parity"]


def test_a_file_without_any_record_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    plain = {k: v for k, v in _OLD_CASE.items() if k in ("id", "model", "backend", "backend_version", "device")}
    plain.update(batch=1, shape_mode="static", precision="fp32", precision_effective=None, threads=1, status="failed")
    _write_old(path, plain)
    case = read_results(path).cases[0]
    assert all(read_record(case, kind) is None for kind in CASE_RECORDS)


def test_data_that_is_not_the_record_is_named(tmp_path: Path) -> None:
    case = _case()
    case.extra["accuracy"] = {"metric": "top1", "value": 0.9}  # fp32_value and the rest missing
    with pytest.raises(ResultsError, match=r"case onnxruntime-fp32.*'accuracy'.*Accuracy.*fp32_value"):
        read_record(case, Accuracy)
    case.extra["parity"] = "passed"
    with pytest.raises(ResultsError, match="ParityRecord"):
        read_record(case, ParityRecord)
