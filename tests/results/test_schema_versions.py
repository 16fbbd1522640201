"""Results schema versions: a version-1 file (the measurements flat on the case) reads into the groups of version
2 and is written back as version 2 with the same figures; version 2 round-trips; unknown keys survive."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from infermeter.core.errors import ResultsError
from infermeter.results.artifact import Artifact
from infermeter.results.io import read_results, write_results
from infermeter.results.schema import (
    SCHEMA_VERSION,
    CaseResult,
    Interference,
    LatencyStats,
    LoadingFigures,
    MemoryFigures,
    PairedSpeedup,
    ResultsFile,
    ShapeFigures,
    TimingFigures,
    case_from_dict,
    case_to_dict,
)

_BUILD = Artifact("/cache/model.onnx", "k1", cache="built", build_phases_s={"compile_s": 2.0}, built_here_s=2.0)
# The measurements of one case, by the group version 2 keeps them in; version 1 had these keys flat on the case.
_MEASURED: dict[str, dict[str, Any]] = {
    "timing": {
        "samples_ms": [1.25, 1.5, 1.75],
        "warmup_ms": [3.0, 2.0],
        "iterations": 3,
        "warmup_iterations": 2,
        "throughput": 1600.0,
        "rounds_p50_ms": [1.5, 1.4],
        "target_ci": 0.01,
        "interference": {
            "wall_s": 2.0,
            "cpus": 2.0,
            "own_cpu_s": 3.5,
            "other_cpu_s": 0.4,
            "steal_s": 0.0,
            "pressure_s": 0.2,
            "other_share": 0.1,
            "pressure_share": 0.1,
        },
        "paired": {"baseline_id": "base", "ratio": 1.2, "ci_low": 1.1, "ci_high": 1.3, "rounds": 2},
    },
    "memory": {"peak_rss_mb": 512.5, "rss_before_load_mb": 40.0, "rss_timeline_mb": [[0.0, 100.0], [0.5, 120.0]]},
    "loading": {
        "load_s": 0.75,
        "load_phases_s": {"import_s": 0.25, "session_create_s": 0.5},
        "cache_hit": True,
        "build": _BUILD.to_dict(),
        "process_start_s": 0.3,
        "first_inference_ms": 9.5,
    },
    "shapes": {
        "input_shapes": {"input": [2, 3, 32, 32]},
        "dynamic": {"batch": [1, 2]},
        "per_shape": [{"label": "batch=1", "count": 2}],
    },
}
_IDENTITY: dict[str, Any] = {
    "id": "onnxruntime-fp32-b2", "model": "tiny_cnn", "backend": "onnxruntime", "backend_version": "1.20",
    "device": "cpu", "batch": 2, "shape_mode": "dynamic", "precision": "fp32", "precision_effective": "fp32",
    "threads": 4, "status": "ok", "error": None,
    "latency_ms": {"p50": 1.5, "p90": 1.7, "p95": 1.72, "p99": 1.75, "p999": 1.75, "mean": 1.5, "std": 0.25,
                   "min": 1.25, "max": 1.75, "cv": 0.17, "p50_ci95": [1.25, 1.75], "p99_ci95": [1.5, 1.75],
                   "outliers": 0, "count": 3},
    "warnings": [{"code": "high_cv", "message": "CV 17%", "detail": "CV 17%"}], "notes": ["a note"],
    "options": {"onnxruntime.graph_opt": "all"}, "isolated": True, "synthetic": False, "streams": 1,
    "started": "2026-01-01T00:00:00+00:00", "duration_s": 3.0,
}  # fmt: skip
_FLAT_V1_CASE = {**_IDENTITY, **{k: v for group in _MEASURED.values() for k, v in group.items()}}


def _file(version: int, case: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": version, "created": "2026-01-01T00:00:00+00:00", "command": ["infermeter", "bench"],
            "environment": {"cpu_model": "x"}, "cases": [case]}  # fmt: skip


def test_a_version_1_file_reads_into_the_groups(tmp_path: Path) -> None:
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(_file(1, {**_FLAT_V1_CASE, "parity": {"passed": True}, "later_key": [1]})))
    case = read_results(path).cases[0]
    assert case.timing.samples_ms == [1.25, 1.5, 1.75] and case.timing.iterations == 3
    assert case.timing.throughput == 1600.0 and case.timing.target_ci == 0.01
    assert case.timing.interference == Interference(2.0, 2.0, 3.5, 0.4, 0.0, 0.2)
    assert case.timing.paired == PairedSpeedup("base", 1.2, 1.1, 1.3, 2)
    assert case.memory == MemoryFigures(512.5, 40.0, [[0.0, 100.0], [0.5, 120.0]])
    assert case.loading.load_s == 0.75 and case.loading.cache_hit is True and case.loading.first_inference_ms == 9.5
    assert case.loading.build == _BUILD
    assert case.shapes == ShapeFigures({"input": [2, 3, 32, 32]}, {"batch": [1, 2]}, [{"label": "batch=1", "count": 2}])
    assert case.latency_ms is not None and case.latency_ms.p50 == 1.5
    # Only what no field holds is left over: the records and a later version's key, none of the moved fields.
    assert set(case.extra) == {"parity", "later_key"}


def test_a_version_1_file_is_written_back_as_version_2_with_the_same_figures(tmp_path: Path) -> None:
    old, new = tmp_path / "v1.json", tmp_path / "v2.json"
    old.write_text(json.dumps(_file(1, {**_FLAT_V1_CASE, "later_key": [1]})))
    write_results(new, read_results(old))
    data = json.loads(new.read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 2
    (case,) = data["cases"]
    for group, fields in _MEASURED.items():
        assert case[group] == fields, group  # the same figures, now under the group's key
        assert not set(fields) & set(case), f"{group}'s fields are no longer flat on the case"
    assert {k: case[k] for k in _IDENTITY} == _IDENTITY and case["later_key"] == [1]
    assert read_results(new) == read_results(old)  # and it reads back to the same case


def _measured_case() -> CaseResult:
    stats = LatencyStats(1.5, 1.7, p95=1.72, p99=1.75, p999=1.75, mean=1.5, std=0.25, min=1.25, max=1.75, cv=0.17,
                         p50_ci95=(1.25, 1.75), p99_ci95=(1.5, 1.75), outliers=0, count=3)  # fmt: skip
    return CaseResult(
        "case-1",
        "tiny_cnn",
        backend="openvino",
        backend_version="2025.1",
        device="cpu",
        batch=1,
        shape_mode="static",
        precision="int8",
        precision_effective="int8",
        threads=2,
        status="ok",
        latency_ms=stats,
        timing=TimingFigures(
            [1.25, 1.5, 1.75],
            [2.0],
            iterations=3,
            warmup_iterations=1,
            throughput=666.7,
            interference=Interference(1.0, 2.0, 1.5, 0.0, 0.0, None),
            paired=PairedSpeedup("base", 2.0, 1.9, 2.1, 4),
            rounds_p50_ms=[1.5, 1.5],
        ),
        memory=MemoryFigures(peak_rss_mb=300.0),
        loading=LoadingFigures(load_s=0.5, build=Artifact("/a.xml", "k", cache="hit")),
        shapes=ShapeFigures({"x": [1, 8]}),
    )


def test_version_2_round_trips_and_nests_the_groups(tmp_path: Path) -> None:
    case = _measured_case()
    path = tmp_path / "r.json"
    write_results(path, ResultsFile("2026-01-01T00:00:00+00:00", {}, [case]))
    raw = json.loads(path.read_text())["cases"][0]
    assert raw["memory"] == {"peak_rss_mb": 300.0, "rss_before_load_mb": None, "rss_timeline_mb": []}
    assert (
        raw["timing"]["interference"]["other_share"] == 0.0 and raw["timing"]["interference"]["pressure_share"] is None
    )
    assert raw["loading"]["build"]["cache"] == "hit" and raw["shapes"]["input_shapes"] == {"x": [1, 8]}
    assert read_results(path).cases == [case]


def test_unknown_keys_are_kept_at_the_top_and_inside_a_group() -> None:
    data = copy.deepcopy(case_to_dict(_measured_case()))
    data["a_later_record"] = {"kept": True}
    data["memory"]["a_later_figure_mb"] = 12.0
    case = case_from_dict(json.loads(json.dumps(data)))
    assert case.extra == {"a_later_record": {"kept": True}, "memory": {"a_later_figure_mb": 12.0}}
    assert case.memory.peak_rss_mb == 300.0
    assert case_to_dict(case) == data


def test_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v3.json"
    path.write_text(json.dumps(_file(SCHEMA_VERSION + 1, _IDENTITY)))
    with pytest.raises(ResultsError, match="newer than this infermeter understands"):
        read_results(path)
