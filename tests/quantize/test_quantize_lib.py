"""Static/dynamic INT8 with ONNX Runtime, evaluation, sensitivity ranking and the greedy budget search."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from quant_models import mlp, mlp_data

from infermeter.core.case import MeasureSettings
from infermeter.core.errors import UsageError
from infermeter.models.spec import onnx_graph_precision
from infermeter.quantize.evaluate import score
from infermeter.quantize.pipeline import quantize_model
from infermeter.quantize.request import QuantizeRequest


@pytest.fixture
def plain(tmp_path: Path) -> tuple[Path, Path, Path]:
    model = mlp(tmp_path / "mlp.onnx")
    return model, mlp_data(tmp_path / "calib.npz", model, 150, 1), mlp_data(tmp_path / "eval.npz", model, 200, 2)


@pytest.fixture
def sensitive(tmp_path: Path) -> tuple[Path, Path, Path]:
    model = mlp(tmp_path / "sensitive.onnx", sensitive=True)
    return model, mlp_data(tmp_path / "scalib.npz", model, 150, 1), mlp_data(tmp_path / "seval.npz", model, 300, 2)


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_quantized_graph_reads_int8(plain: tuple[Path, Path, Path], tmp_path: Path, mode: str) -> None:
    from infermeter.build.int8.ort_quant import QuantConfig

    model, calib, evaluation = plain
    out = tmp_path / f"{mode}.onnx"
    outcome = quantize_model(
        QuantizeRequest(
            str(model), out, config=QuantConfig(mode=mode), calib=str(calib), eval=str(evaluation), latency=False
        )
    )
    assert onnx_graph_precision(str(model)) == "fp32"
    assert onnx_graph_precision(str(out)) == "int8"
    fp32, int8 = outcome.rows
    assert fp32.accuracy is not None and fp32.accuracy.value == 1.0  # labels are FP32's own predictions
    assert int8.accuracy is not None and int8.accuracy.metric == "top1" and int8.accuracy.eval_samples == 200
    assert int8.accuracy.drop_pct == pytest.approx((1.0 - int8.accuracy.value) * 100)
    assert int8.accuracy.drop_pct < 5 and int8.accuracy.details["cosine_mean"] > 0.99


def test_eval_without_labels_scores_agreement(plain: tuple[Path, Path, Path], tmp_path: Path) -> None:
    model, calib, _ = plain
    unlabelled = mlp_data(tmp_path / "unlabelled.npz", model, 100, 3, labels=False)
    outcome = quantize_model(
        QuantizeRequest(str(model), tmp_path / "q.onnx", calib=str(calib), eval=str(unlabelled), latency=False)
    )
    accuracy = outcome.rows[1].accuracy
    # An ONNX file says nothing of its task: without labels, the headline is cosine to FP32's outputs.
    assert accuracy is not None and accuracy.metric == "cosine" and accuracy.fp32_value == 1.0
    assert {"cosine_mean", "sqnr_db", "top1_agreement"} <= set(accuracy.details)


def test_score_metrics_are_exact() -> None:
    reference = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    flipped = reference.copy()
    flipped[0] = [0.0, 1.0]
    labelled = score("classification", reference, flipped, np.array([0, 1, 0, 0]))
    assert (labelled.metric, labelled.value, labelled.fp32_value) == ("top1", 0.5, 0.75)
    assert labelled.drop_pct == pytest.approx(25.0)
    embedding = score("embedding", reference, reference * 2, None)
    assert embedding.metric == "cosine" and embedding.value == pytest.approx(1.0)
    assert embedding.details["retrieval_agreement"] == 1.0


def test_random_calibration_warns(plain: tuple[Path, Path, Path], tmp_path: Path) -> None:
    model, _, _ = plain
    outcome = quantize_model(QuantizeRequest(str(model), tmp_path / "q.onnx", latency=False))
    assert "random_calibration" in [w.code for w in outcome.warnings]
    assert any("random inputs" in note for note in outcome.notes)


def test_sensitivity_ranks_the_sensitive_layer_first(sensitive: tuple[Path, Path, Path], tmp_path: Path) -> None:
    model, calib, evaluation = sensitive
    outcome = quantize_model(
        QuantizeRequest(
            str(model), tmp_path / "q.onnx", calib=str(calib), eval=str(evaluation), sensitivity=True, latency=False
        )
    )
    ranking = outcome.sensitivity
    assert next(s.node for s in ranking) == "mm2"
    assert ranking[0].recovered_pct > 20 and ranking[0].output_sqnr_gain_db > 10
    assert all(s.recovered_pct < ranking[0].recovered_pct for s in ranking[1:])


def test_greedy_search_meets_budget(
    sensitive: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each variant timed in its own worker, as quantize does, with the shortest timing (the figures are not checked).
    short = MeasureSettings(warmup_iterations=1, min_iterations=5, min_time_s=0.0, max_time_s=1.0, target_ci=0.0)
    monkeypatch.setattr("infermeter.quantize.latency.QUICK_SETTINGS", short)
    model, calib, evaluation = sensitive
    out = tmp_path / "mixed.onnx"
    outcome = quantize_model(
        QuantizeRequest(
            str(model), out, calib=str(calib), eval=str(evaluation), max_drop_pct=5.0, latency=True, threads=1
        )
    )
    assert outcome.budget_met is True
    plain, mixed = outcome.rows[1], outcome.rows[2]
    assert plain.accuracy is not None and plain.accuracy.drop_pct > 5.0
    assert mixed.float_nodes[0] == "mm2" and mixed.accuracy is not None and mixed.accuracy.drop_pct <= 5.0
    assert outcome.frontier[0].float_nodes == () and len(outcome.frontier) == len(mixed.float_nodes) + 1
    assert all(p.latency_p50_ms is not None and p.latency_p50_ms > 0 for p in outcome.frontier)
    assert onnx_graph_precision(str(out)) == "int8" and plain.path.is_file() and plain.path != out
    assert mixed.timing is not None and mixed.timing.precision == "int8" and mixed.timing.ok


def test_bad_requests(plain: tuple[Path, Path, Path], tmp_path: Path) -> None:
    model, calib, _ = plain
    with pytest.raises(UsageError, match="--exclude"):
        from infermeter.build.int8.ort_quant import QuantConfig

        quantize_model(
            QuantizeRequest(
                str(model), tmp_path / "q.onnx", config=QuantConfig(exclude=("nope",)), calib=str(calib), latency=False
            )
        )
    with pytest.raises(UsageError, match=r"writes a \.xml"):
        quantize_model(QuantizeRequest(str(model), tmp_path / "q.onnx", engine="openvino"))


@pytest.mark.slow
def test_openvino_engine_writes_int8_ir(plain: tuple[Path, Path, Path], tmp_path: Path) -> None:
    from infermeter.build.int8.ov_quant import ir_precision

    model, calib, evaluation = plain
    out = tmp_path / "mlp.xml"
    outcome = quantize_model(
        QuantizeRequest(str(model), out, engine="openvino", calib=str(calib), eval=str(evaluation), latency=False)
    )
    assert out.is_file() and out.with_suffix(".bin").is_file()
    assert ir_precision(out) == "int8" and ir_precision(out) != ir_precision(model)
    accuracy = outcome.rows[1].accuracy
    assert accuracy is not None and accuracy.metric == "top1" and accuracy.value > 0.5


@pytest.mark.slow
def test_openvino_max_drop_runs_nncf_accuracy_control(sensitive: tuple[Path, Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("nncf")
    model, calib, evaluation = sensitive
    out = tmp_path / "controlled.xml"
    outcome = quantize_model(QuantizeRequest(str(model), out, engine="openvino", calib=str(calib),
                                             eval=str(evaluation), max_drop_pct=5.0, latency=False))  # fmt: skip
    plain, controlled = outcome.rows[1], outcome.rows[2]
    assert plain.accuracy is not None and plain.accuracy.drop_pct > 5.0  # mm2's outliers break plain NNCF INT8 too
    # NNCF returned the costly layer to float and the IR written meets the budget, scored as every other row.
    assert controlled.role == "mixed" and controlled.label.startswith("NNCF accuracy control (")
    assert controlled.accuracy is not None and controlled.accuracy.drop_pct <= 5.0 and outcome.budget_met
    assert controlled.float_nodes and any("mm2" in name for name in controlled.float_nodes), controlled.float_nodes
    assert controlled.path == out and out.with_suffix(".bin").is_file()
    assert plain.path.name == "controlled.int8-all.xml" and plain.path.with_suffix(".bin").is_file()
    assert any(note.startswith("nncf.quantize_with_accuracy_control") for note in outcome.notes)
    assert outcome.sensitivity == []  # our per-layer ranking of ONNX Runtime's QDQ graph is not run for NNCF


def test_static_int8_leaves_attention_activations_in_float(tmp_path: Path) -> None:
    # Per-tensor static ranges on Q.K^T, scores.V, the mask and Softmax ruined all-MiniLM-L6-v2 (mean cosine
    # 0.40 to FP32); in a graph with attention only products with a constant weight are quantized.
    import onnx

    out = tmp_path / "bert_tiny-int8.onnx"
    outcome = quantize_model(QuantizeRequest("bert_tiny", out, calib_size=8, latency=False))
    int8 = next(row for row in outcome.rows if row.precision == "int8")
    graph = onnx.load(str(int8.path)).graph
    initializers = {i.name for i in graph.initializer}
    producer = {o: node for node in graph.node for o in node.output}

    def dequantized_weight(tensor: str) -> bool:
        node = producer.get(tensor)
        return node is not None and node.op_type == "DequantizeLinear" and node.input[0] in initializers

    def dequantized(tensor: str) -> bool:
        node = producer.get(tensor)
        return node is not None and node.op_type == "DequantizeLinear"

    matmuls = [n for n in graph.node if n.op_type == "MatMul"]
    quantized = [n for n in matmuls if dequantized(n.input[0]) or dequantized(n.input[1])]
    assert quantized, "no MatMul was quantized at all"
    assert all(dequantized_weight(n.input[1]) for n in quantized)  # never an activation x activation product
    assert not any(dequantized(i) for n in graph.node if n.op_type == "Softmax" for i in n.input)
