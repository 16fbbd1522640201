"""FP16/BF16 emulation on the ONNX graph, the range pre-pass and ONNX Runtime's mixed graph, on a LayerNorm over
large activations (breaks in FP16) and the fused LayerNormalization (does not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from infermeter.models.samples import SampleSet
from infermeter.quantize.emulate import emulated, graph_layers, range_outliers, write_mixed_fp16
from infermeter.quantize.evaluate import ModelRunner
from infermeter.quantize.fallback.search import Verdict, find_fallback
from infermeter.quantize.reduced import Budget, judge
from precision_models import VARIANCE_NODES, layernorm_classifier


@pytest.fixture(scope="module")
def samples() -> SampleSet:
    return SampleSet({"x": np.random.default_rng(1).standard_normal((48, 64)).astype(np.float32)}, None, "test")


def _run(path: Path, samples: SampleSet) -> np.ndarray:
    return ModelRunner(path, optimize=False).predict(samples)


def _emulated_run(source: Path, precision: str, keep: frozenset[str], samples: SampleSet, tmp: Path) -> np.ndarray:
    path = tmp / "emulated.onnx"
    onnx.save(emulated(source, precision, keep), str(path))
    return _run(path, samples)


def _search(source: Path, precision: str, samples: SampleSet, tmp: Path, range_kept: list[str]):  # type: ignore[no-untyped-def]
    reference = _run(source, samples)

    def evaluate(keep: frozenset[str]) -> Verdict:
        judgement = judge("classification", reference, _emulated_run(source, precision, keep, samples, tmp), None,
                          None, "emulated")  # fmt: skip
        return Verdict(judgement.meets(Budget()), judgement)

    return find_fallback(graph_layers(source), evaluate, range_kept), reference


def test_range_prepass_flags_the_variance_nodes(tmp_path: Path, samples: SampleSet) -> None:
    model = layernorm_classifier(tmp_path / "ln.onnx")
    assert range_outliers(model, samples) == list(VARIANCE_NODES)


def test_full_fp16_breaks_and_bisection_alone_finds_variance_nodes(tmp_path: Path, samples: SampleSet) -> None:
    model = layernorm_classifier(tmp_path / "ln.onnx")
    result, _ = _search(model, "fp16", samples, tmp_path, range_kept=[])  # no pre-pass: the bisection must find them
    assert result.full.detail.decisions_changed > 10  # FP16 overflow flips most top-1 decisions
    kept = {layer.name for layer in result.kept}
    assert kept and kept <= set(VARIANCE_NODES)
    assert result.verdict.meets and result.verdict.detail.decisions_changed == 0
    assert not result.capped and result.evaluations < 30


def test_bf16_keeps_fp32_range_so_nothing_is_kept(tmp_path: Path, samples: SampleSet) -> None:
    model = layernorm_classifier(tmp_path / "ln.onnx")
    assert range_outliers(model, samples, limit=3.0e38) == []
    out = _emulated_run(model, "bf16", frozenset(), samples, tmp_path)
    assert np.isfinite(out).all()


def test_fused_layernorm_needs_nothing_kept(tmp_path: Path, samples: SampleSet) -> None:
    model = layernorm_classifier(tmp_path / "fused.onnx", fused=True)
    assert range_outliers(model, samples) == []
    result, _ = _search(model, "fp16", samples, tmp_path, range_kept=[])
    assert result.full.meets and result.kept == ()


def test_written_mixed_graph_restores_agreement_like_the_emulation(tmp_path: Path, samples: SampleSet) -> None:
    model = layernorm_classifier(tmp_path / "ln.onnx")
    reference = _run(model, samples)
    # (The full FP16 graph run by ONNX Runtime's x86 CPU provider agrees with FP32 here: it computes the
    # LayerNorm's region in FP32 between inserted casts, which is why FP16 accuracy is judged by emulation.)
    full = _emulated_run(model, "fp16", frozenset(), samples, tmp_path)
    mixed = _run(write_mixed_fp16(model, VARIANCE_NODES, tmp_path / "mixed.onnx"), samples)
    assert np.mean(full.argmax(1) == reference.argmax(1)) < 0.8
    assert np.array_equal(mixed.argmax(1), reference.argmax(1))
    # Between two kept nodes the value stays FP32 (the converter's FP16 round trip is folded away).
    graph = onnx.load(str(tmp_path / "mixed.onnx")).graph
    nodes = {n.name: n for n in graph.node}
    assert nodes["var"].input[0] == nodes["pow"].output[0]
    emulation = _emulated_run(model, "fp16", frozenset(VARIANCE_NODES), samples, tmp_path)
    assert np.max(np.abs(mixed - emulation)) < 0.05 * np.max(np.abs(emulation))
