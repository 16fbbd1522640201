"""Parity: metrics against hand-computed values, verdicts, records, --data validation, the CLI across real
backends on tiny_cnn, and localization of a weight perturbed in one node of the ONNX served to one backend."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import load_json, run_cli, run_main
from infermeter.backends.registry import backend_names, get_backend
from infermeter.core.case import Case
from infermeter.core.errors import InputSpecError, UsageError
from infermeter.models.resolve import resolve_model
from infermeter.parity import (
    ParityRecord,
    Tolerance,
    compare_output,
    default_tolerance,
    judge,
)
from infermeter.parity.data import load_npz_feeds
from infermeter.results.io import read_results, write_results
from infermeter.results.records import read_record, write_record
from infermeter.results.schema import CaseResult, ResultsFile


def _has_openvino() -> bool:
    return "openvino" in backend_names() and get_backend("openvino").available() is None


# ---- metrics, by hand -------------------------------------------------------------------------------------------


def test_metrics_match_hand_computed_values() -> None:
    m = compare_output("y", np.array([3.0, 4.0], np.float32), np.array([3.0, 5.0], np.float32))
    assert m.max_abs_err == 1.0 and m.mean_abs_err == 0.5
    assert m.scale == 4.0
    # relative error denominator: |ref| + 1e-3 * scale
    assert m.max_rel_err == pytest.approx(1 / 4.004)
    assert m.mean_rel_err == pytest.approx(0.5 / 4.004)
    assert m.cosine == pytest.approx(29 / (5 * math.sqrt(34)))
    assert m.sqnr_db == pytest.approx(10 * math.log10(25 / 1))
    assert m.worst_ratio is None and m.top1_agreement is None


def test_elementwise_bound_is_scaled_by_the_output() -> None:
    ref, cand = np.array([3.0, 4.0]), np.array([3.0, 5.0])
    m = compare_output("y", ref, cand, Tolerance("fp32", atol=0.1, rtol=0.0))
    assert m.worst_ratio == pytest.approx(1 / (0.1 * 4.0)) and m.outside == 1
    # The same relative error on an output 1e6 times smaller gives the same verdict.
    small = compare_output("y", ref * 1e-6, cand * 1e-6, Tolerance("fp32", atol=0.1, rtol=0.0))
    assert small.worst_ratio == pytest.approx(m.worst_ratio)


def test_topk_agreement_by_hand() -> None:
    ref = np.array([[0, 1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1, 0]], np.float32)
    cand = np.array([[0, 1, 2, 3, 4, 5, 6], [0, 5, 4, 3, 2, 1, 6]], np.float32)
    m = compare_output("logits", ref, cand)
    assert m.top1_agreement == 0.5
    # row 0: same top-5; row 1: {0,1,2,3,4} vs {6,1,2,3,4} share 4 of 5
    assert m.top5_agreement == pytest.approx((1.0 + 0.8) / 2)


def test_edge_cases_identical_zero_nonfinite_integer_shape() -> None:
    same = compare_output("y", np.ones(3), np.ones(3))
    assert same.sqnr_db == math.inf and same.cosine == 1.0 and same.max_abs_err == 0
    zero_ref = compare_output("y", np.zeros(3), np.array([0.0, 1.0, 0.0]))
    assert zero_ref.sqnr_db == -math.inf and zero_ref.cosine == 0.0
    nan = compare_output("y", np.array([1.0, np.nan, np.inf]), np.array([np.nan, np.nan, np.inf]))
    assert nan.nonfinite_mismatch == 1
    ints = compare_output("idx", np.array([1, 2, 3]), np.array([1, 2, 4]))
    assert ints.exact_required and ints.outside == 1
    shaped = compare_output("y", np.ones((2, 3)), np.ones((3, 2)))
    assert shaped.problem is not None and "(3, 2)" in shaped.problem


# ---- tolerances and verdicts ------------------------------------------------------------------------------------


def test_default_tolerances_and_overrides() -> None:
    fp32, fp16, int8 = default_tolerance("fp32"), default_tolerance("fp16"), default_tolerance("int8")
    assert fp32.atol is not None and fp16.atol is not None and fp32.atol < fp16.atol
    assert int8.atol is None and int8.min_cosine is not None and int8.min_top1 is not None
    assert default_tolerance("int8", atol=0.1).rtol == 0.0
    assert default_tolerance("fp32", rtol=0.5).atol == fp32.atol
    with pytest.raises(UsageError, match="--atol"):
        default_tolerance("fp32", atol=-1.0)
    with pytest.raises(UsageError, match="precision"):
        default_tolerance("fp8")


def test_judge_names_output_metric_and_threshold() -> None:
    tol = default_tolerance("fp32")
    ref = np.linspace(-1, 1, 50).reshape(5, 10)
    good = compare_output("logits", ref, ref + 1e-8, tol)
    bad = compare_output("embedding", ref, ref + 1e-3, tol)
    passed, reason, worst = judge([good, bad], tol)
    assert not passed and worst == "embedding"
    assert "output embedding" in reason and "max abs err 0.001" in reason and "atol 1e-05×scale" in reason
    passed, reason, worst = judge([good], tol)
    assert passed and worst == "logits"
    # int8 is judged by cosine / top-1, not element-wise
    int8 = default_tolerance("int8")
    flipped = ref.copy()
    flipped[:, [0, -1]] = flipped[:, [-1, 0]]
    passed, reason, _ = judge([compare_output("logits", ref, flipped, int8)], int8)
    assert not passed and "cosine" in reason


def test_parity_record_round_trips_through_a_results_file(tmp_path: Path) -> None:
    tol = default_tolerance("fp32")
    metrics = [compare_output("logits", np.ones((2, 10)), np.ones((2, 10)), tol)]
    passed, reason, worst = judge(metrics, tol)
    record = ParityRecord(
        "onnxruntime",
        "torch",
        precision="fp32",
        status="pass" if passed else "fail",
        reason=reason,
        tolerance=tol,
        precision_effective="fp32",
        outputs=metrics,
    )
    record.worst_output = worst
    result = CaseResult(
        "id",
        "tiny_cnn",
        backend="onnxruntime",
        backend_version="1",
        device="cpu",
        batch=1,
        shape_mode="static",
        precision="fp32",
        precision_effective="fp32",
        threads=1,
        status="ok",
    )
    write_record(result, record)
    path = tmp_path / "r.json"
    write_results(path, ResultsFile(created="now", environment={}, cases=[result]))  # strict JSON: no inf
    assert load_json(path)["cases"][0]["parity"]["outputs"][0]["sqnr_db"] == "inf"
    back = read_record(read_results(path).cases[0], ParityRecord)
    assert back == record and back.passed and back.worst() is not None
    assert ParityRecord.from_dict(record.to_dict()) == record


# ---- --data validation ------------------------------------------------------------------------------------------


def test_npz_feeds_checked(tmp_path: Path) -> None:
    spec = resolve_model("tiny_cnn")
    good = tmp_path / "good.npz"
    np.savez(good, input=np.zeros((4, 3, 32, 32), np.float64))
    feeds = load_npz_feeds(good, spec, batch=2)
    assert len(feeds) == 2 and feeds[0]["input"].shape == (2, 3, 32, 32) and feeds[0]["input"].dtype == np.float32
    cases = {
        "wrong_name.npz": ({"image": np.zeros((1, 3, 32, 32), np.float32)}, "missing input; unexpected image"),
        "wrong_shape.npz": ({"input": np.zeros((1, 3, 28, 28), np.float32)}, "dim 2 of the model's input is fixed"),
        "wrong_rank.npz": ({"input": np.zeros((3, 32, 32), np.float32)}, "3 dims"),
        "wrong_dtype.npz": ({"input": np.zeros((1, 3, 32, 32), np.int64)}, "dtype int64"),
    }
    for name, (arrays, message) in cases.items():
        np.savez(tmp_path / name, **arrays)  # type: ignore[arg-type]
        with pytest.raises(InputSpecError, match=message):
            load_npz_feeds(tmp_path / name, spec)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(good.read_bytes()[:100])
    with pytest.raises(InputSpecError, match=r"not a readable \.npz"):
        load_npz_feeds(corrupt, spec)


def test_cli_bad_data_exits_2(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 not really a zip")
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, pixels=np.zeros((1, 3, 32, 32), np.float32))
    for path, message in ((corrupt, "not a readable .npz"), (wrong, "named like the model's inputs")):
        done = run_main("parity", "tiny_cnn", "-b", "onnxruntime", "--data", str(path))
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
    done = run_main("parity", "tiny_cnn", "-b", "onnxruntime", "--input", "input:1x3x28x28")
    assert done.returncode == 2 and "fixed at 32" in done.stderr


# ---- real backends on tiny_cnn ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_onnx() -> Path:
    """tiny_cnn's ONNX export (in the session's cache, shared with the CLI subprocesses)."""
    from infermeter.models.convert import onnx_for

    return onnx_for(resolve_model("tiny_cnn")).path


def test_a_reference_that_runs_the_torch_form_is_refused_for_an_onnx_file(tiny_onnx: Path) -> None:
    from infermeter.parity.run import choose_reference

    onnx_spec = resolve_model(str(tiny_onnx))
    assert (choose_reference(onnx_spec, None), choose_reference(resolve_model("tiny_cnn"), None)) == (
        "onnxruntime",
        "torch",
    )
    with pytest.raises(UsageError, match=r"--reference torch: .* has no PyTorch form"):
        choose_reference(onnx_spec, "torch")


@pytest.fixture(scope="module")
def corrupted(tiny_onnx: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of tiny_cnn's ONNX with one weight of its LAST Conv perturbed; returns (path, that node's name)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(tiny_onnx))
    conv = [n for n in model.graph.node if n.op_type == "Conv"][-1]
    assert conv is not model.graph.node[0]  # so that "first divergent node" means something
    for init in model.graph.initializer:
        if init.name == conv.input[1]:
            weight = numpy_helper.to_array(init).copy()
            weight.flat[0] += 0.5
            init.CopyFrom(numpy_helper.from_array(weight, init.name))
    path = tmp_path_factory.mktemp("corrupt") / "tiny_cnn_bad.onnx"
    onnx.save(model, str(path))
    return path, conv.name


def _backends() -> str:
    return ",".join(["torch", "onnxruntime", *(["openvino"] if _has_openvino() else [])])


def test_parity_passes_across_backends_on_user_data(tiny_onnx: Path, tmp_path: Path) -> None:
    data = tmp_path / "images.npz"
    np.savez(data, input=np.random.default_rng(1).standard_normal((4, 3, 32, 32)).astype(np.float32))
    out = tmp_path / "parity.json"
    done = run_cli("parity", "tiny_cnn", "-b", _backends(), "--data", str(data), "--batch", "2", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    cases = load_json(out)["cases"]
    assert [c["backend"] for c in cases] == _backends().split(",")
    for case in cases:
        parity = case["parity"]
        assert parity["status"] == "pass" and parity["samples"] == 2 and parity["reference"] == "torch"
        (logits,) = parity["outputs"]
        assert logits["shape"] == [4, 10] and logits["top1_agreement"] == 1.0 and logits["cosine"] > 0.99999
    if not _has_openvino():
        pytest.skip("openvino is not registered/available: checked torch and onnxruntime only")


def test_corrupted_backend_fails_and_localize_names_the_node(corrupted: tuple[Path, str], tmp_path: Path) -> None:
    bad, node = corrupted
    out = tmp_path / "parity.json"
    done = run_cli(
        "parity", "tiny_cnn", "-b", _backends() + ",null", "-O", "null.fail=load",
        "--candidate-onnx", f"onnxruntime={bad}", "--localize", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"first divergent node: {node} (Conv)" in done.stdout
    records = {c["backend"]: c["parity"] for c in load_json(out)["cases"]}
    assert records["onnxruntime"]["status"] == "fail" and "output logits" in records["onnxruntime"]["reason"]
    assert records["onnxruntime"]["localization"]["first"]["node"] == node
    assert records["onnxruntime"]["localization"]["worst"]
    assert records["null"]["status"] == "error" and "null.fail" in records["null"]["reason"]
    assert all(records[b]["status"] == "pass" for b in _backends().split(",") if b != "onnxruntime")


def test_localize_on_openvino(corrupted: tuple[Path, str], tiny_onnx: Path) -> None:
    if not _has_openvino():
        pytest.skip("openvino is not registered/available")
    from infermeter.parity.data import random_feeds
    from infermeter.parity.localize import localize

    bad, node = corrupted
    spec = resolve_model("tiny_cnn")
    case = Case("tiny_cnn", "openvino")
    feeds = random_feeds(spec, 1, (), 1, 0)[0]
    tol = default_tolerance("fp32")
    found = localize(spec, case, feeds, tol, candidate_onnx=bad)
    assert found["status"] == "localized" and found["first"]["node"] == node, found
    clean = localize(spec, case, feeds, tol)
    assert clean["status"] == "clean" and clean["compared"] > 5 and clean["first"] is None, clean


def test_check_case_parity_for_bench(tiny_onnx: Path) -> None:
    from infermeter.parity.run import check_case_parity

    spec = resolve_model("tiny_cnn")
    ok = check_case_parity(spec, Case("tiny_cnn", "onnxruntime", batch=2), samples=2)
    assert ok["passed"] and ok["reference"] == "torch" and ok["outputs"][0]["shape"] == [4, 10]
    # The null backend returns zeros shaped (batch, 1): its outputs are wrong, and the check says so.
    wrong = check_case_parity(spec, Case("tiny_cnn", "null", batch=2))
    assert not wrong["passed"] and wrong["status"] == "fail" and "shape" in wrong["reason"]
    failed = check_case_parity(spec, Case("tiny_cnn", "null", options=(("null.fail", "load"),)))
    assert failed["status"] == "error" and not failed["passed"]


@pytest.mark.slow
def test_zoo_cnns_parity() -> None:
    for model in ("mobilenet_v2", "resnet18"):  # in this process: the tests above run parity end to end
        done = run_main("parity", model, "-b", _backends(), "--samples", "2")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("PASS") == len(_backends().split(","))
