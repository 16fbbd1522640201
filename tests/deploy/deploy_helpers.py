"""Small, real deploy sources for the deploy tests: tiny_cnn's verified ONNX export and its INT8 (QDQ) file in
an `optimize`-shaped folder (results.json + deploy.json + artifacts/), and a `load -o` results file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from crafted_results import accuracy_field, load_field, make_case, make_results, parity_field
from infermeter.core.case import Case
from infermeter.deploy.manifest import MANIFEST_FORMAT, entry, write_manifest
from infermeter.models.convert import onnx_for
from infermeter.models.resolve import resolve_model
from infermeter.results.io import write_results
from infermeter.results.records import OptimizeStep, write_record
from infermeter.results.schema import CaseResult

ORT_ID = "onnxruntime-fp32-b4-static-t2-tiny"
OV_ID = "openvino-int8-b4-static-t2-tiny"
LOAD_ID = "load-openvino-int8-b1-offline-tiny"


def _optimize_case(backend: str, precision: str, case_id: str, artifact: str, **extra: Any) -> CaseResult:
    case = make_case(backend, 4, 0.5, precision=precision, threads=2, peak_mb=180.0, case_id=case_id)
    write_record(case, OptimizeStep("int8" if precision == "int8" else "fp32", "", artifact))
    case.extra.update(extra)
    case.options = {"openvino.hint": "latency"} if backend == "openvino" else {}
    return case


def make_optimize_folder(folder: Path) -> Path:
    """An optimize output folder whose pick is OpenVINO running the INT8 artifact, fallback ORT FP32."""
    from infermeter.build.int8.onthefly import quantize_on_the_fly

    spec = resolve_model("tiny_cnn")
    artifacts = folder / "artifacts"
    artifacts.mkdir(parents=True)
    shutil.copyfile(onnx_for(spec).path, artifacts / "model.fp32.onnx")
    int8 = quantize_on_the_fly(
        spec,
        Case(
            "tiny_cnn",
            "onnxruntime",
            precision="int8",
            batch=1,
            shape_mode="static",
            threads=1,
            input_shapes=(),
            options=(),
        ),
    ).path
    shutil.copyfile(int8, artifacts / "model.int8.onnx")
    ort = _optimize_case("onnxruntime", "fp32", ORT_ID, "artifacts/model.fp32.onnx", **parity_field(True))
    accuracy = accuracy_field(0.98, 2.0, "top1_agreement")
    ov = _optimize_case("openvino", "int8", OV_ID, "artifacts/model.int8.onnx", **accuracy)
    ov.precision_effective = "int8"
    write_results(folder / "results.json", make_results([ort, ov]))
    manifest = {
        "format": MANIFEST_FORMAT,
        "source_model": "tiny_cnn",
        "chosen": entry(ov, "tiny_cnn", folder),
        "runner_up": None,
        "fallback": entry(ort, "tiny_cnn", folder),
        "baseline": None,
        "serving": {"max_batch": 4, "max_delay_ms": 2.0},
    }
    write_manifest(folder, manifest)
    return folder


def make_load_results(path: Path) -> Path:
    """A `load -o` file: one invalid run and the valid best (concurrency 8, max-batch 8, 2 workers)."""
    cases = []
    for case_id, valid, p50 in ((LOAD_ID + "-x16", False, 30.0), (LOAD_ID, True, 3.0)):
        case = make_case("openvino", 1, p50, precision="int8", case_id=case_id)
        case.options = {"serve.max_batch": "8", "serve.max_delay_ms": "1.5", "serve.workers": "2"}
        case.extra.update(load_field(valid))
        cases.append(case)
    write_results(path, make_results(cases))
    return path
