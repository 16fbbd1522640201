"""Which FP32 marks of the reduced-precision study each engine held, read from what the engine ran (issue 49 item 4):
OpenVINO's runtime model, ONNX Runtime's profiled kernels, torch's module outputs. A mark on a layer the engine
fused into another one, or ran in BF16/FP16 anyway, does not count; an engine that held none times no mixed model."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from infermeter.core.case import MeasureSettings
from infermeter.quantize.emulate import named_model, write_mixed_fp16
from infermeter.quantize.fallback import study as fallback_study
from infermeter.quantize.fallback.engines import openvino_marked
from infermeter.quantize.fallback.marks import mark_openvino, onnxruntime_marks, openvino_marks, torch_marks
from infermeter.quantize.fallback.pipeline import FallbackRequest, study_fallback, time_arms
from infermeter.quantize.reduced import Budget

torch = pytest.importorskip("torch")
ov = pytest.importorskip("openvino")
pytest.importorskip("onnxruntime")

# The exporter's node names of `_Net`: the convolution (with its bias), the first Linear, the LayerNorm, the Softmax.
CONV, FC1, NORM, SOFTMAX = "/conv/Conv", "/fc1/Gemm", "/ln/LayerNormalization", "/Softmax"
BF16 = {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "bf16"}
# The fragile written-out LayerNorm classifier of the precision study, as a factory the study exports to ONNX.
FRAGILE = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.fc1, self.fc2 = nn.Linear(64, 64), nn.Linear(64, 10)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.randn(64, 64, generator=generator) * 100.0)
            self.fc2.weight.copy_(torch.randn(10, 64, generator=generator) * 0.3)
            self.fc1.bias.copy_(torch.randn(64, generator=generator))
            self.fc2.bias.copy_(torch.randn(10, generator=generator) * 0.1)

    def forward(self, x):
        h = self.fc1(x)
        centred = h - h.mean(-1, keepdim=True)
        h = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.fc2(torch.relu(h))

def build():
    return Net(), {"x": ("float32", ("batch", 64))}
"""


class _Net(torch.nn.Module):  # type: ignore[misc,name-defined]
    """Conv → ReLU → Linear → ×3+1 → LayerNorm → Softmax → Linear: a few layers OpenVINO fuses in different ways."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc1, self.ln, self.fc2 = torch.nn.Linear(512, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(torch.relu(self.conv(x)).flatten(1)) * 3.0 + 1.0
        return self.fc2(torch.softmax(self.ln(h), -1))


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("net")
    torch.onnx.export(_Net().eval(), (torch.randn(1, 3, 8, 8),), str(folder / "raw.onnx"), input_names=["x"],
                      output_names=["y"], dynamo=False)  # fmt: skip
    return named_model(folder / "raw.onnx", folder / "net.onnx")


def _ran(compiled: object) -> dict[str, str]:
    """Read in the test itself: each original layer name of the runtime model → the precision its layer ran in."""
    ran = {}
    for op in compiled.get_runtime_model().get_ordered_ops():  # type: ignore[attr-defined]
        info = op.get_rt_info()
        for name in info["originalLayersNames"].astype(str).split(","):
            ran[name] = info["runtimePrecision"].astype(str)
    return ran


def test_openvino_marks_are_read_from_its_runtime_model(net: Path, tmp_path: Path) -> None:
    core = ov.Core()
    full = core.compile_model(str(net), "CPU", BF16)
    if _ran(full).get("/conv/Conv/WithoutBiases") != "bf16":
        pytest.skip("the CPU plugin runs fp32 here (no bf16 arithmetic): no mark can change anything")
    # The convolution's own operation (`/conv/Conv/WithoutBiases`) is marked with its bias Add (`/conv/Conv`).
    assert mark_openvino(core.read_model(str(net)), {CONV, FC1, SOFTMAX}) >= 4
    mixed = openvino_marked(core, net, {CONV, FC1, SOFTMAX}, tmp_path / "marked.xml", BF16)  # the study's step
    marks = openvino_marks(mixed, full, {CONV, FC1, SOFTMAX})
    ran = _ran(mixed)
    # What the runtime model says: the convolution ran FP32, the Softmax BF16 despite its mark, and the first Linear
    # is fused into a FullyConnected named after the Add that follows it (no runtime layer names it).
    assert ran["/conv/Conv/WithoutBiases"] == "f32" and ran[SOFTMAX] == "bf16"
    assert not any(name == FC1 or name.startswith(FC1 + "/") for name in ran)
    assert (marks.held, marks.reduced, marks.unseen) == ((CONV,), (SOFTMAX,), (FC1,))
    assert marks.effective == (CONV,) and marks.summary() == "1 of 3 FP32 mark(s) held"
    assert marks.mixed_cell() is None  # one held mark changes what runs: the mixed model is timed


def test_openvino_with_no_mark_held_has_no_mixed_model(net: Path, tmp_path: Path) -> None:
    core = ov.Core()
    full = core.compile_model(str(net), "CPU", BF16)
    if _ran(full).get(SOFTMAX) != "bf16":
        pytest.skip("the CPU plugin runs fp32 here (no bf16 arithmetic)")
    mixed = openvino_marked(core, net, {FC1, SOFTMAX}, tmp_path / "marked.xml", BF16)
    marks = openvino_marks(mixed, full, {FC1, SOFTMAX})
    assert marks.held == () and marks.effective == ()
    assert marks.mixed_cell() == "= full (no mark held)"
    assert "0 of 2 FP32 mark(s) held" in marks.lines()[0]
    assert any("no mixed model timed" in line for line in marks.lines())


def test_onnxruntime_marks_are_read_from_its_kernels(net: Path, tmp_path: Path) -> None:
    mixed = write_mixed_fp16(net, {CONV, FC1, SOFTMAX}, tmp_path / "mixed.onnx")
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    # The LayerNorm is not blocked: ONNX Runtime has an FP16 LayerNormalization kernel and runs it in FP16 there,
    # so asking about it reads "reduced", never "held".
    marks = onnxruntime_marks(mixed, {CONV, FC1, SOFTMAX, NORM}, feeds, 1)
    assert marks.reduced == (NORM,) and set(marks.held) == {CONV, FC1, SOFTMAX} and not marks.unseen
    assert marks.summary() == "3 of 4 FP32 mark(s) held"


def test_torch_marks_read_each_module_output_dtype() -> None:
    from infermeter.backends._common import cpu_precision_reason
    from infermeter.backends.torch_eager import exclude_from_autocast

    if cpu_precision_reason("bf16", "torch"):
        pytest.skip("this CPU has no bf16 arithmetic")
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    exclude_from_autocast(model, {"0"})

    def run() -> None:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            model(torch.randn(2, 8))

    marks = torch_marks(model, {"0", "2"}, run)  # "2" is not excluded: it runs in BF16
    assert (marks.held, marks.reduced) == (("0",), ("2",))


def test_the_study_times_no_mixed_model_where_openvino_held_no_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The written-out LayerNorm classifier at a cosine budget BF16 misses: the layers kept are two Linears
    (FullyConnected, run BF16 despite the mark) and LayerNorm parts OpenVINO fuses into its MVN layer."""
    from rich.console import Console

    from infermeter.cli.quantize_fallback import accuracy_table, speed_table

    monkeypatch.setattr(fallback_study, "STUDY_SETTINGS", MeasureSettings(
        warmup_iterations=2, min_iterations=5, min_time_s=0.05, max_time_s=0.5, rounds=2, target_ci=0.0))  # fmt: skip
    factory = tmp_path / "fragile.py"
    factory.write_text(FRAGILE)
    budget = Budget(min_cosine=0.999996)
    request = FallbackRequest(f"{factory}:build", "bf16", engines=("openvino",), output=tmp_path / "out",
                              budget=budget, samples=16, max_evaluations=16, latency=False)  # fmt: skip
    study = study_fallback(request).studies[0]
    if study.full is None:
        pytest.skip("the CPU plugin runs fp32 here (no bf16 arithmetic)")
    assert study.search is not None and study.search.kept and study.marks is not None
    assert study.marks.marked == tuple(sorted(layer.name for layer in study.search.kept))
    assert study.marks.held == () and study.mixed is None
    assert [arm.label for arm in study.arms] == ["FP32", "full BF16"]  # no mixed arm: full BF16 timed twice
    time_arms(study)
    console = Console(width=250, record=True)
    console.print(accuracy_table([study], "bf16", budget))
    console.print(speed_table([study], "bf16"))
    text = console.export_text()
    assert text.count("= full (no mark held)") == 2 and re.search(r"\(0 held\)", text)


def test_a_marked_ir_that_reads_back_wrong_is_build_invalid_and_not_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marked IR is a built artifact like any other (`build.validate`): cut short on disk, the study refuses it
    before judging or timing it. (Seen for real: OpenVINO 2026.4 reads resnet18's IR with the mark on a residual
    block's Convolution into a model that returns no rows at bf16.)"""
    from infermeter.quantize.fallback import engines
    from precision_models import layernorm_classifier

    real = engines.openvino_marked

    def cut_short(core: object, fp32_onnx: Path, keep: set[str], target: Path, config: dict[str, object]) -> object:
        compiled = real(core, fp32_onnx, keep, target, config)
        weights = target.with_suffix(".bin")
        weights.write_bytes(weights.read_bytes()[:100])
        return compiled

    monkeypatch.setattr(engines, "openvino_marked", cut_short)
    request = FallbackRequest(str(layernorm_classifier(tmp_path / "ln.onnx")), "bf16", engines=("openvino",),
                              output=tmp_path / "out", budget=Budget(min_cosine=0.999995), samples=16,
                              max_evaluations=12, latency=False)  # fmt: skip
    study = study_fallback(request).studies[0]
    if study.full is None or study.full.meets(request.budget) or study.search is None or not study.search.kept:
        pytest.skip("no marked IR written here (fp32-only CPU, or full bf16 within the budget)")
    line = next(line for line in study.lines if "build_invalid" in line)
    assert "the marked IR failed core.read_model: OpenVINO cannot read the IR back" in line
    assert study.mixed is None and study.mixed_path is None and study.marks is None
    assert study.mixed_refused is not None and study.mixed_cell() == "build_invalid (mixed model)"
    assert [arm.label for arm in study.arms] == ["FP32", "full BF16"]
