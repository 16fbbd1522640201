"""Typed case records: every registered record round-trips record -> dict -> JSON -> record, through a results
file too; files written before records existed (the same JSON, or none of it) still load; bad data is named."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from crafted_results import make_case, make_results
from infermeter.core.errors import ResultsError
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
        precision="fp32",
        status="pass",
        reason="within atol 1e-05×scale",
        tolerance=Tolerance("fp32", 1e-5, 1e-4, 0.99999, 0.9),
        precision_effective="fp32",
        outputs=[
            OutputMetrics(
                "logits",
                (2, 10),
                max_abs_err=1e-7,
                mean_abs_err=1e-8,
                max_rel_err=2e-6,
                mean_rel_err=1e-7,
                cosine=1.0,
                sqnr_db=math.inf,
                scale=3.5,
                worst_ratio=0.1,
                outside=0,
                top1_agreement=1.0,
                top5_agreement=1.0,
            )
        ],
        samples=2,
        worst_output="logits",
        localization={"status": "clean", "compared": 7},
    ),
    Accuracy: Accuracy("top1", 0.91, 0.93, 2.0, 64, {"cosine_mean": 0.99, "sqnr_db": 31.5}),
    AccuracyError: AccuracyError("RuntimeError: no INT8 kernels"),
    Roofline: Roofline(
        2_000_000,
        400_000,
        achieved_gflops=12.5,
        arithmetic_intensity=5.0,
        peak_precision="fp32_gflops",
        peak_ceiling_gflops=100.0,
        peak_fraction=0.125,
        attainable_gflops=100.0,
        roofline_bound="compute",
        peak_exceeded=True,
    ),
    RooflineError: RooflineError("ModelError: no ONNX form"),
    OptimizeStep: OptimizeStep("int8", "INT8 static QDQ", "artifacts/model.int8.onnx"),
    GenerationSummary: GenerationSummary(
        8,
        7,
        failed=1,
        errors_by_kind={"timeout": 1},
        wall_s=2.5,
        requests_per_s=2.8,
        output_tokens=112,
        prompt_tokens=256,
        output_tokens_per_s=44.8,
        ttft_ms=_DIST,
        tpot_ms=_DIST,
        itl_ms=_DIST,
        e2e_ms=_DIST,
        tokens_per_s_per_request=_DIST,
        slo=SLO(200.0, 30.0),
        slo_met=6,
        goodput_rps=2.4,
    ),
    GenerationCase: GenerationCase(
        64, 16, throughput_unit="output tokens/s", model_size_mb=12.5, concurrency=4, short_outputs=1, task="generate"
    ),
    GgufQuality: GgufQuality(
        "q8_0", 1.25, perplexity=12.5, scored_tokens=300, top1_agreement=0.97, agreement_reference="f16"
    ),
    QuantizedVariant: QuantizedVariant("int8", "INT8 static", "resnet18", "/tmp/m.int8.onnx", ["conv1", "fc"]),
    LoadRecord: LoadRecord(
        "http://127.0.0.1:8000",
        "server",
        target_qps=120.0,
        offered_qps=119.5,
        achieved_qps=118.0,
        concurrency=None,
        duration_s=10.0,
        issued=1195,
        ok=1190,
        errors={"timeout": 5},
        slo_p99_ms=20.0,
        valid=False,
        reasons=["5 of 1195 requests failed (timeout 5)"],
        lag_p99_ms=0.4,
        lag_max_ms=1.2,
    ),
    TunePoint: TunePoint("max-batch 8, delay 2 ms, 1 worker", True),
    Int8Run: Int8Run(
        "int8",
        "int8",
        quantizer="nncf",
        source="own",
        mix=LayerMix({"int8": 27, "fp32": 3}, ["head/MatMul"]),
        profile=LayerProfile(
            2.5,
            20,
            reorders=NodeGroup(27, 0.9),
            converts=NodeGroup(2, 0.1),
            quantize_nodes=NodeGroup(1, 0.05),
            float_compute=NodeGroup(3, 0.4),
            top=[LayerTime("conv1", "Convolution", "int8", 0.3)],
        ),
        fp32_profile=LayerProfile(
            1.25,
            20,
            reorders=NodeGroup(3, 0.1),
            converts=NodeGroup(),
            quantize_nodes=NodeGroup(),
            float_compute=NodeGroup(30, 1.0),
        ),
        profile_error="RuntimeError: no counters",
    ),
    NodeRecord: NodeRecord(
        "c0ffee" * 4,
        "xeon-1",
        machine="xeon-amx",
        held_from_s=1796160000.25,
        held_until_s=1796160004.5,
        environment={"cpu_model": "Intel Xeon", "thread_env": {"OMP_NUM_THREADS": "4"}},
        lost=(
            LostAttempt("dead" * 6, "xeon-2", "xeon-amx", "NodeDiedError: the node died", "2026-12-01T22:00:00+00:00"),
        ),
    ),
    SoakRecord: SoakRecord(
        5000,
        50,
        exploration_requests=2500,
        replay_requests=2450,
        distinct_shapes=505,
        lengths="zipf",
        stopped_by="minutes",
        samples=[[0, 0.0, 50.5, 40.25], [5000, 9.5, 80.0, 70.0]],
        slope_mb_per_1k=1.25,
        slope_ci_mb_per_1k=[1.0, 1.5],
        growing=True,
        plateau_at=None,
        tolerance_mb=2.5,
        peak_rss_mb=80.0,
        start_rss_mb=50.5,
        end_rss_mb=80.0,
        windows=[[0, 499, 1.5, 3.25]],
        allocator="jemalloc",
        size_range={"seq": [8, 512]},
        buckets={"seq": [128, 256, 512]},
        recycle_after={"heap_mb": 10.5},
        heap=["a note"],
    ),
    Footprint: Footprint(12.5, "/tmp/model.onnx", 55.25, ["onnxruntime"], 0.75, "a reason"),
    ProcessRecord: ProcessRecord(
        3,
        (
            ProcessRun(
                0,
                "ok",
                p50_ms=1.5,
                p99_ms=2.5,
                samples=400,
                rounds=10,
                throughput=0.2,
                load_s=3.0,
                first_inference_ms=120.0,
                peak_rss_mb="t",
                started=2.0,
            ),
            ProcessRun(1, "crashed", error="killed"),
        ),
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
    write_record(case, Roofline(10, 5, achieved_gflops=1.0, arithmetic_intensity=2.0, peak_precision="int8_gops"))
    assert "attainable_gflops" not in case.extra and "peak_exceeded" not in case.extra
    assert read_record(case, Roofline) == Roofline(
        10, 5, achieved_gflops=1.0, arithmetic_intensity=2.0, peak_precision="int8_gops"
    )


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
    assert read_record(case, Roofline) == Roofline(
        1000, 500, achieved_gflops=2.0, arithmetic_intensity=2.0, peak_precision="int8_gops"
    )
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
