"""Dims as exporters write them: `?`, an empty name, `unk__N` (tf2onnx) and `DynamicDimension.N` (paddle2onnx) are
unnamed, so each occurrence takes its own size; a real shared name given two sizes is a warning and the engine
decides. Small ONNX models built with onnx.helper, run by the real ONNX Runtime and OpenVINO."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backend_helpers import FAST
from cli_helpers import run_cli
from infermeter.core.case import Case
from infermeter.core.errors import InputSpecError
from infermeter.measure.request import BenchRequest, build_matrix
from infermeter.measure.shapes import plan_shapes
from infermeter.measure.worker import execute_case
from infermeter.models.inputs import dims_by_name, resolve_shapes, shared_dim_conflicts, unnamed_dim
from infermeter.models.resolve import resolve_model


def _save(
    path: Path,
    nodes: list[onnx.NodeProto],
    inputs: dict[str, Sequence[int | str]],
    weights: Sequence[onnx.TensorProto] = (),
) -> str:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name, shape in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        list(weights),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def paddle_like(tmp_path: Path) -> str:
    """A recognizer-like net whose input is [-1, 3, '?', '?'], as paddle2onnx writes it."""
    conv = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["p"]),
        helper.make_node("Flatten", ["p"], ["y"]),
    ]
    return _save(tmp_path / "rec.onnx", nodes, {"x": [-1, 3, "?", "?"]}, [conv])


def test_placeholder_names_are_unnamed_and_real_names_are_not() -> None:
    for name in ("?", "", " ", "unk__0", "unk__417", "DynamicDimension.0", "p2o.DynamicDimension.12"):
        assert unnamed_dim(name), name
    for name in ("batch", "seq", "height", "x_dim2", "unk", "DynamicDimension", 3):
        assert not unnamed_dim(name), name


def test_each_question_mark_takes_its_own_size(paddle_like: str) -> None:
    spec = resolve_model(paddle_like)
    assert spec.inputs[0].shape[2:] == ("?", "?")
    assert resolve_shapes(spec.inputs, 1, [("x", (1, 3, 48, 192))]) == {"x": (1, 3, 48, 192)}
    assert shared_dim_conflicts(spec.inputs, [("x", (1, 3, 48, 192))]) == []
    with pytest.raises(InputSpecError, match=r"--input x:Nx3xNxN"):  # without sizes: the working --input line
        resolve_shapes(spec.inputs, 1)


def test_tf2onnx_and_paddle_placeholders_across_inputs() -> None:
    from infermeter.models.inputs import InputSpec

    inputs = (
        InputSpec("a", "float32", shape=("unk__1", "unk__2")),
        InputSpec("b", "float32", shape=("DynamicDimension.0", "p2o.DynamicDimension.1", "unk__2")),
    )
    shapes = resolve_shapes(inputs, 2, [("a", (2, 5)), ("b", (2, 7, 9))])
    assert shapes == {"a": (2, 5), "b": (2, 7, 9)}
    # What ONNX Runtime may fix by name: only names with one size (unk__2 has 5 and 9).
    assert dims_by_name(inputs, shapes) == {"unk__1": 2, "DynamicDimension.0": 2, "p2o.DynamicDimension.1": 7}


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_bench_case_runs_at_two_sizes_for_question_marks(paddle_like: str, backend: str) -> None:
    pytest.importorskip(backend)
    spec = resolve_model(paddle_like)
    case = Case(spec.ref, backend, batch=1, threads=1, settings=FAST, input_shapes=(("x", (1, 3, 48, 192)),))
    result = execute_case(spec, case)
    assert result.status == "ok", result.error


def test_parity_runs_on_a_question_mark_model(paddle_like: str) -> None:
    done = run_cli("parity", paddle_like, "--input", "x:1x3x48x192", "-b", "onnxruntime,openvino", "--samples", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "two sizes" not in done.stderr
    assert done.stdout.count("PASS") == 2, done.stdout


def test_dynamic_refuses_a_placeholder_with_the_named_dims(paddle_like: str) -> None:
    spec = resolve_model(paddle_like)
    with pytest.raises(InputSpecError, match="exporter's placeholder"):
        plan_shapes(spec.inputs, 1, [("x", (1, 3, 48, 192))], [("?", (32, 64))])


@pytest.fixture
def shared_seq(tmp_path: Path) -> tuple[str, str]:
    """Two inputs that name the same dim `seq`: one model accepts two sizes (Concat), one does not (Add)."""
    inputs = {"a": [1, "seq"], "b": [1, "seq"]}
    concat = _save(tmp_path / "concat.onnx", [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], inputs)
    add = _save(tmp_path / "add.onnx", [helper.make_node("Add", ["a", "b"], ["y"])], inputs)
    return concat, add


def test_shared_name_with_two_sizes_warns_and_the_engine_decides(shared_seq: tuple[str, str]) -> None:
    concat, add = shared_seq
    sizes = (("a", (1, 4)), ("b", (1, 6)))
    notes: list[str] = []
    build_matrix(BenchRequest(models=(concat,), backends=("onnxruntime",), batch=(1,), inputs=sizes), notes.append)
    assert any("shared dim 'seq' 2 sizes: 4 (a) and 6 (b)" in note for note in notes), notes
    accepted = execute_case(
        resolve_model(concat), Case(concat, "onnxruntime", batch=1, threads=1, settings=FAST, input_shapes=sizes)
    )
    assert accepted.status == "ok", accepted.error  # the static-mode overrides did not force one size on both
    refused = execute_case(
        resolve_model(add), Case(add, "onnxruntime", batch=1, threads=1, settings=FAST, input_shapes=sizes)
    )
    assert refused.status == "failed"
    assert refused.error is not None and "4 by 6" in refused.error, refused.error  # ONNX Runtime's own check


def test_parity_cli_prints_the_shared_dim_warning(shared_seq: tuple[str, str]) -> None:
    concat, _ = shared_seq
    done = run_cli("parity", concat, "--input", "a:1x4", "--input", "b:1x6", "-b", "onnxruntime", "--samples", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: --input gives the shared dim 'seq' 2 sizes: 4 (a) and 6 (b)" in " ".join(done.stderr.split())
