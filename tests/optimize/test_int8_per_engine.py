"""optimize's INT8 step gives each engine the INT8 graph of its own quantizer (ONNX Runtime: static QDQ; OpenVINO:
NNCF's IR), calibrated on one set and scored on one evaluation, and records which quantizer made each row."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli
from infermeter.results.io import read_results
from infermeter.results.records import Accuracy, Int8Run, OptimizeStep, read_record

pytest.importorskip("openvino")
pytest.importorskip("nncf")

# Short measurements; no finalists' group (this test is about one step; tests/optimize/test_optimize_cli.py runs it).
QUICK = ["--iterations", "10", "--min-time", "0.05", "--warmup", "1", "--max-time", "1", "--rounds", "2",
         "--threads", "1", "--target-ci", "0", "--finalists", "0"]  # fmt: skip


def test_each_engine_gets_its_own_quantizers_int8(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    done = run_cli(
        "optimize", "tiny_cnn", "-o", str(folder), "-b", "onnxruntime,openvino", "--budget-minutes", "4", *QUICK,
        timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (folder / "artifacts" / "model.int8.onnx").is_file() and (folder / "artifacts" / "model.int8.xml").is_file()
    journal = load_json(folder / "results.json")["optimize"]
    step = next(s for s in journal["steps"] if s["key"] == "int8")
    assert any("ort-qdq: onnxruntime; nncf: openvino" in n for n in step["notes"]), step["notes"]
    cases = {c.id: c for c in read_results(folder / "results.json").cases}
    rows = {c.backend: c for c in (cases[i] for i in step["case_ids"]) if c.ok}
    assert set(rows) == {"onnxruntime", "openvino"}
    for backend, (quantizer, artifact) in {
        "onnxruntime": ("ort-qdq", "artifacts/model.int8.onnx"),
        "openvino": ("nncf", "artifacts/model.int8.xml"),
    }.items():
        row = rows[backend]
        record = read_record(row, Int8Run)
        assert record is not None and (record.quantizer, record.source) == (quantizer, "own"), backend
        assert (row.precision, row.precision_effective) == ("int8", "int8")
        assert read_record(row, OptimizeStep) == OptimizeStep(
            "int8", f"INT8 {'NNCF' if quantizer == 'nncf' else 'static QDQ'}", artifact
        )
        assert read_record(row, Accuracy) is not None  # one evaluation set, scored for both
    openvino = read_record(rows["openvino"], Int8Run)
    assert openvino is not None and openvino.mix is not None and openvino.profile is not None
    fp32 = next(c for c in cases.values() if c.backend == "openvino" and c.precision == "fp32" and c.ok)
    assert fp32.latency_ms is not None and rows["openvino"].latency_ms is not None
    if rows["openvino"].latency_ms.p50 > fp32.latency_ms.p50:  # INT8 lost on this run: the step says why
        assert any(n.startswith("openvino INT8 NNCF: INT8 was") for n in step["notes"]), step["notes"]
