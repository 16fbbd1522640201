"""`quantize --to` per engine: ONNX Runtime's mixed FP16 graph judged by emulation, OpenVINO's read-back, torch's
autocast exclusions, TensorRT's constraints file, one line for an engine without a path; timed interleaved."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from infermeter.backends._tensorrt_engine import constrain_layers
from infermeter.backends.onnxruntime import OnnxRuntimeBackend
from infermeter.core.case import MeasureSettings
from infermeter.quantize.fallback import study as fallback_study
from infermeter.quantize.fallback.pipeline import FallbackRequest, study_fallback, time_arms
from infermeter.quantize.reduced import Budget, decisions_changed
from precision_models import VARIANCE_NODES, layernorm_classifier

TORCH_FACTORY = """
import torch
from torch import nn

def build():
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(16, 32))
    model.add_module("act", nn.ReLU())
    model.add_module("fc2", nn.Linear(32, 4))
    return model, {"x": ("float32", ("batch", 16))}
"""


@pytest.fixture(scope="module")
def fp16_study(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("fp16")
    model = layernorm_classifier(folder / "ln.onnx")
    request = FallbackRequest(
        str(model),
        "fp16",
        engines=("onnxruntime", "openvino", "tensorrt", "tvm"),
        output=folder / "out",
        samples=32,
        latency=False,
    )
    return {s.engine: s for s in study_fallback(request).studies}


def test_onnxruntime_keeps_the_variance_nodes_and_writes_the_mixed_graph(fp16_study) -> None:  # type: ignore[no-untyped-def]
    study = fp16_study["onnxruntime"]
    assert study.full.how == "emulated fp16" and study.full.decisions_changed > 5
    assert {layer.name for layer in study.search.kept} <= set(VARIANCE_NODES) and study.search.kept
    assert study.mixed.decisions_changed == 0 and study.mixed_path.is_file()
    assert "max |difference| from the emulated mixed model" in study.parity
    assert [arm.label for arm in study.arms] == ["FP32", "full FP16", "mixed"]
    # ONNX Runtime's CPU provider has no x86 FP16 kernels: its profile shows FP32 kernels on any CPU, so the speed is
    # storage only and the accuracy figure stays the emulated one.
    assert study.speed_note.startswith("fp32 compute (fp16 storage)")
    assert study.mixed.how.startswith("emulated")


def test_openvino_reads_back_what_it_ran(fp16_study) -> None:  # type: ignore[no-untyped-def]
    study = fp16_study["openvino"]
    text = " ".join(study.lines)
    if study.full is None:  # a CPU without reduced-precision arithmetic: said in one line
        assert "runs fp32" in text
        return
    assert study.full.how.startswith("computed by openvino")
    assert "openvino runtime model, layers by precision:" in text


def test_tensorrt_writes_constraints_and_an_engine_without_a_path_says_so(fp16_study) -> None:  # type: ignore[no-untyped-def]
    study = fp16_study["tensorrt"]
    written = json.loads(study.mixed_path.read_text())
    assert written["fp32_layers"] == sorted(layer.name for layer in study.search.kept)
    assert fp16_study["tvm"].lines == ["tvm: no reduced-precision fallback path here"]


def test_constrain_layers_sets_fp32_on_the_named_layers() -> None:
    layers = [SimpleNamespace(name=n, num_outputs=1, precision=None, types={}) for n in ("fc1", "pow", "var")]
    for layer in layers:
        layer.set_output_type = lambda i, t, layer=layer: layer.types.__setitem__(i, t)
    network = SimpleNamespace(num_layers=3, get_layer=lambda i: layers[i])
    flags: list[str] = []
    config = SimpleNamespace(set_flag=flags.append)
    trt = SimpleNamespace(float32="f32", BuilderFlag=SimpleNamespace(OBEY_PRECISION_CONSTRAINTS="obey"))
    assert constrain_layers(trt, network, config, ["pow", "var", "gone"]) == ["gone"]
    assert [(la.precision, la.types) for la in layers] == [(None, {}), ("f32", {0: "f32"}), ("f32", {0: "f32"})]
    assert flags == ["obey"]


def test_storage_note_only_when_the_engine_computed_fp32() -> None:
    assert "fp32 compute (fp16 storage)" in OnnxRuntimeBackend().storage_note("fp16", "fp32")
    assert OnnxRuntimeBackend().storage_note("fp32", "fp32") is None
    assert OnnxRuntimeBackend().storage_note("fp16", "fp16") is None  # a provider with FP16 kernels


def test_torch_autocast_search_excludes_modules_and_the_bench_applies_them(tmp_path: Path) -> None:
    from infermeter.backends._common import cpu_precision_reason

    if cpu_precision_reason("bf16", "torch"):
        pytest.skip("this CPU has no bf16 arithmetic")
    factory = tmp_path / "net.py"
    factory.write_text(TORCH_FACTORY)
    # A cosine budget tighter than BF16's noise: only FP32 modules meet it.
    request = FallbackRequest(
        f"{factory}:build",
        "bf16",
        engines=("torch",),
        output=tmp_path / "out",
        budget=Budget(min_cosine=0.9999999),
        samples=16,
        latency=False,
    )
    study = study_fallback(request).studies[0]
    assert study.full.how == "computed by torch (autocast bf16)" and not study.full.meets(request.budget)
    kept = [layer.name for layer in study.search.kept]
    assert kept and set(kept) <= {"fc1", "fc2"} and study.mixed.meets(request.budget)
    assert json.loads(study.mixed_path.read_text())["fp32_modules"] == kept
    mixed = study.arms[-1]
    assert dict(mixed.case.options) == {"torch.autocast": "on", "torch.fp32_modules": str(study.mixed_path)}


def test_decisions_changed_rules() -> None:
    reference = np.array([[0.2, 0.8], [0.6, 0.4], [0.51, 0.49]])
    moved = np.array([[0.2, 0.8], [0.6, 0.4], [0.49, 0.51]])
    assert decisions_changed(reference, moved, None) == (1, "top-1")
    assert decisions_changed(reference, moved, 0.5)[0] == 1
    assert decisions_changed(reference, reference + 0.02, 0.5)[0] == 1  # 0.49 → 0.51 crosses the threshold
    assert decisions_changed(np.ones((3, 1)), np.ones((3, 1)), None)[0] is None
    assert decisions_changed(reference, moved, None, "embedding")[0] is None  # an embedding has no top-1


def test_interleaved_timing_of_the_three_variants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fallback_study, "STUDY_SETTINGS", MeasureSettings(
        warmup_iterations=2, min_iterations=5, min_time_s=0.05, max_time_s=0.5, rounds=3, target_ci=0.0))  # fmt: skip
    model = layernorm_classifier(tmp_path / "ln.onnx")
    request = FallbackRequest(
        str(model), "fp16", engines=("onnxruntime",), output=tmp_path / "out", samples=16, latency=False
    )
    study = study_fallback(request).studies[0]
    time_arms(study)
    results = [arm.result for arm in study.arms]
    assert all(r is not None and r.ok for r in results), [r.error for r in results if r]
    assert (
        results[1].timing.paired is not None and results[2].timing.paired is not None
    )  # paired per round against FP32
    if study.speed_note:
        assert results[2].precision_effective == "fp32"
        assert any("fp32 compute (fp16 storage)" in note for note in results[2].notes), results[2].notes
        assert "fp32_compute_storage" in [w.code for w in results[2].warnings]


def test_openvino_marks_the_kept_layers_and_reads_back_whether_they_held(tmp_path: Path) -> None:
    model = layernorm_classifier(tmp_path / "ln.onnx")
    # A cosine budget between full BF16's and FP32's, so that the search runs and OpenVINO gets marked layers.
    request = FallbackRequest(
        str(model),
        "bf16",
        engines=("openvino",),
        output=tmp_path / "out",
        budget=Budget(min_cosine=0.999995),
        samples=16,
        max_evaluations=12,
        latency=False,
    )
    study = study_fallback(request).studies[0]
    if study.full is None:
        pytest.skip("this CPU runs OpenVINO in fp32 only")
    text = "\n".join(study.lines)
    if study.full.meets(request.budget):  # another CPU's BF16 kernels may be closer to FP32
        pytest.skip("full bf16 within the budget here")
    assert study.mixed_path.suffix == ".xml" and study.mixed_path.is_file()
    marks = study.marks
    assert marks is not None and f"{marks.summary()} (read from the runtime model's runtimePrecision)" in text
    # A mixed figure (and arm) only where a held mark changes what OpenVINO runs; else it is the full model.
    assert (study.mixed is not None) == bool(marks.effective) == ("mixed" in [arm.label for arm in study.arms])
    assert study.mixed is None or study.mixed.how.startswith("computed by openvino")
    written = study.mixed_path.read_text()  # the mark is in the IR (its name differs across OpenVINO versions)
    assert 'name="precise"' in written or 'name="DisablePrecisionConversion"' in written
