"""Models as they really ship (issue 29), in the library: the one `--input` parser (names with colons, constant
vectors, did-you-mean), control inputs that are not batches, `--reshape` of declared-static dims, the model's own
precision, and parity's tolerance following what the reference ran."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from shipped_models import (
    COLON_NAME,
    baked_detector,
    colon_named,
    constant_reshape,
    control_vector_tts,
    float_mlp,
    qdq_mlp,
)

from infermeter.core.case import Case
from infermeter.core.errors import InputSpecError, ModelError, UsageError
from infermeter.models.feeds_data import check_input_values, constant_array
from infermeter.models.input_flags import parse_input_flags
from infermeter.models.inputs import InputSpec, batched_inputs, fixed_batch, resolve_shapes
from infermeter.models.reshape import parse_reshape, reshape_notes
from infermeter.models.resolve import resolve_model
from infermeter.parity import default_tolerance, tolerance_for_reference

pytest.importorskip("onnxruntime")


def test_one_parser_splits_on_the_last_colon_and_reads_vectors() -> None:
    shapes, values = parse_input_flags([f"{COLON_NAME}:1x43844x1", "scales=0.667,1,0.8", "x:1,3,4", "sr=16000,a:2x3"])
    assert shapes == ((COLON_NAME, (1, 43844, 1)), ("x", (1, 3, 4)), ("a", (2, 3)))
    assert dict(values) == {"scales": "0.667,1,0.8", "sr": "16000"}
    assert parse_input_flags([f"{COLON_NAME}=2"])[1] == ((COLON_NAME, "2"),)
    with pytest.raises(InputSpecError, match="not NAME:DIMS"):
        parse_input_flags(["x"])
    with pytest.raises(UsageError, match="two shapes"):
        parse_input_flags(["x:1x2", "x:1x3"])
    assert parse_reshape(["images:1x3x480x640"]) == (("images", (1, 3, 480, 640)),)
    with pytest.raises(InputSpecError, match="--reshape"):
        parse_reshape(["images"])


def test_an_unknown_name_gets_a_did_you_mean() -> None:
    inputs = [InputSpec(COLON_NAME, "float32", shape=("unk__1", "unk__2", 1))]
    with pytest.raises(InputSpecError, match=r"did you mean 'serving_default_input_2:0'"):
        resolve_shapes(inputs, 1, [("serving_default_input_2", (1, 5, 1))])
    with pytest.raises(InputSpecError, match="did you mean 'scales'"):
        check_input_values([InputSpec("scales", "float32", shape=(3,))], (("scale", "1"),))


def test_a_control_vector_is_not_the_batch() -> None:
    tts = [
        InputSpec("input", "int64", shape=("batch", "phonemes")),
        InputSpec("input_lengths", "int64", shape=("batch",)),
        InputSpec("scales", "float32", shape=(3,)),
    ]
    assert batched_inputs(tts) == {"input", "input_lengths"}
    assert fixed_batch(tts) is None
    assert resolve_shapes(tts, 1, [("input", (1, 50))]) == {"input": (1, 50), "input_lengths": (1,), "scales": (3,)}
    # Exported at batch 1 with every dim fixed: the batch is the first dim of the rank-2 input, the vector is left.
    fixed = [
        InputSpec("input", "int64", shape=(1, 50)),
        InputSpec("lengths", "int64", shape=(1,)),
        InputSpec("scales", "float32", shape=(3,)),
    ]
    assert batched_inputs(fixed) == {"input", "lengths"} and fixed_batch(fixed) == ("input", 1)
    assert resolve_shapes(fixed, 1)["scales"] == (3,)
    with pytest.raises(InputSpecError, match="fixed batch of 1"):
        resolve_shapes(fixed, 4)  # the batched inputs still refuse another batch


def test_a_constant_vector_fills_its_input() -> None:
    spec = InputSpec("scales", "float32", shape=(3,))
    np.testing.assert_allclose(constant_array(spec, "0.667,1,0.8", (3,)), [0.667, 1.0, 0.8], rtol=1e-6)
    assert constant_array(spec, "2", (3,)).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(InputSpecError, match="2 values"):
        constant_array(spec, "1,2", (3,))
    with pytest.raises(InputSpecError, match="2 values"):  # checked before anything runs
        check_input_values([spec], (("scales", "1,2"),))


def test_the_model_s_own_precision_is_read_with_the_model(tmp_path: Path) -> None:
    float_spec = resolve_model(float_mlp(tmp_path / "mlp.onnx"))
    qdq_spec = resolve_model(qdq_mlp(tmp_path / "mlp_qdq.onnx"))
    assert (float_spec.precision, float_spec.default_precision) == ("fp32", "fp32")
    assert (qdq_spec.precision, qdq_spec.default_precision) == ("int8", "int8")
    assert resolve_model("tiny_cnn").default_precision == "fp32"  # defined in code: no precision of its own


def test_the_int8_tflite_precision_is_read_with_the_model(tmp_path: Path) -> None:
    pytest.importorskip("ai_edge_litert")
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from backend_helpers import write_tflite_mlp

    rng = np.random.default_rng(0)
    layers = [(rng.standard_normal((8, 4)).astype(np.float32), np.zeros(8, np.float32))]
    assert resolve_model(str(write_tflite_mlp(tmp_path / "f.tflite", layers, 4))).precision == "fp32"
    quantized = resolve_model(str(write_tflite_mlp(tmp_path / "q.tflite", layers, 4, int8_weights=True)))
    assert quantized.precision == "int8" and quantized.default_precision == "int8"


def test_reshape_rewrites_declared_dims_into_the_cache(tmp_path: Path, cache_dir: Path) -> None:
    import onnx

    path = baked_detector(tmp_path / "detector.onnx")
    declared = resolve_model(path)
    assert declared.inputs[0].shape == (10, 3, 32, 32)
    with pytest.raises(InputSpecError, match="fixed at 10"):  # --input never overrides a declared dim
        resolve_shapes(declared.inputs, 1, [("images", (1, 3, 48, 64))])
    spec = resolve_model(path, (("images", (1, 3, 48, 64)),))
    assert spec.ref == path and spec.inputs[0].shape == (1, 3, 48, 64)
    assert spec.declared == (("images", (10, 3, 32, 32)),) and spec.content_hash != declared.content_hash
    assert spec.path is not None and Path(spec.path).is_relative_to(cache_dir)
    graph = onnx.load(spec.path).graph
    assert [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == [1, 3, 48, 64]
    assert [d.dim_value for d in graph.output[0].type.tensor_type.shape.dim] == [1, 4]  # inferred again
    (note,) = reshape_notes(spec)
    assert "[10, 3, 32, 32] -> [1, 3, 48, 64]" in note
    # The override is part of the case's identity: results of the reshaped model never pair with the declared.
    assert Case(path, "onnxruntime").id != Case(path, "onnxruntime", reshape=spec.reshape).id
    with pytest.raises(InputSpecError, match="did you mean 'images'"):
        resolve_model(path, (("image", (1, 3, 48, 64)),))
    with pytest.raises(UsageError, match=r"--batch and --input"):
        resolve_model("tiny_cnn", (("input", (1, 3, 64, 64)),))


def test_reshape_keeps_weights_an_old_exporter_listed_as_inputs(tmp_path: Path) -> None:
    path = baked_detector(tmp_path / "old.onnx", weights_as_inputs=True)
    assert [i.name for i in resolve_model(path).inputs] == ["images"]  # a weight is not an input to feed
    spec = resolve_model(path, (("images", (1, 3, 48, 64)),))
    assert spec.inputs[0].shape == (1, 3, 48, 64)


def test_quantize_samples_carry_constants_batched_or_not() -> None:
    from infermeter.build.int8.feeds import ModelInputs

    tts = (
        InputSpec("input", "int64", shape=("batch", "phonemes"), int_range=(0, 50)),
        InputSpec("input_lengths", "int64", shape=("batch",)),
        InputSpec("scales", "float32", shape=(3,)),
    )
    feeds = ModelInputs(tts, (("input", (1, 20)),), (("input_lengths", "20"), ("scales", "0.5,1,0.8")))
    feeds.check()
    samples = feeds.random(5, seed=0)
    assert samples.arrays["input"].shape == (5, 20) and set(samples.arrays) == {"input"}
    first = next(samples.batches(4))
    assert first["input"].shape == (4, 20) and first["input_lengths"].tolist() == [20] * 4
    np.testing.assert_allclose(first["scales"], [0.5, 1.0, 0.8])  # the control vector fed as it is, not batched
    with pytest.raises(InputSpecError, match="did you mean 'scales'"):
        ModelInputs(tts, (), (("scale", "1"),)).check()


def test_serve_loads_the_reshaped_model(tmp_path: Path) -> None:
    from infermeter.serve.model import ServeConfig, ServedModel

    path = baked_detector(tmp_path / "detector.onnx")
    served = ServedModel(ServeConfig(path, "onnxruntime", max_batch=1, reshape=(("images", (1, 3, 48, 64)),)))
    assert served.spec.inputs[0].shape == (1, 3, 48, 64)
    assert served.case(1).reshape == (("images", (1, 3, 48, 64)),)


def test_a_reshaped_model_runs_on_onnxruntime_and_openvino(tmp_path: Path) -> None:
    from infermeter.build.case_build import open_session

    spec = resolve_model(baked_detector(tmp_path / "detector.onnx"), (("images", (1, 3, 48, 64)),))
    feeds = {"images": np.random.default_rng(0).standard_normal((1, 3, 48, 64)).astype(np.float32)}
    outputs = []
    for backend in ("onnxruntime", "openvino"):
        if backend == "openvino":
            pytest.importorskip("openvino")
        session = open_session(spec, Case(spec.ref, backend, reshape=spec.reshape))
        outputs.append(session.outputs_to_numpy(session.run(session.prepare(feeds)))[0])
        session.close()
    assert outputs[0].shape == (1, 4)
    np.testing.assert_allclose(outputs[0], outputs[-1], rtol=1e-4, atol=1e-5)


def test_a_dim_the_constants_fix_fails_with_the_engine_s_message(tmp_path: Path) -> None:
    from infermeter.build.case_build import open_session

    spec = resolve_model(constant_reshape(tmp_path / "fixed.onnx"), (("images", (1, 3, 4, 4)),))
    session = open_session(spec, Case(spec.ref, "onnxruntime", reshape=spec.reshape))
    with pytest.raises(Exception, match=r"cannot be reshaped"):
        session.run(session.prepare({"images": np.zeros((1, 3, 4, 4), np.float32)}))


def test_an_openvino_ir_is_reshaped_with_model_reshape(tmp_path: Path) -> None:
    ov = pytest.importorskip("openvino")
    xml = tmp_path / "detector.xml"
    ov.save_model(ov.Core().read_model(baked_detector(tmp_path / "detector.onnx")), str(xml))
    spec = resolve_model(str(xml), (("images", (1, 3, 48, 64)),))
    assert spec.kind == "openvino_ir" and spec.inputs[0].shape == (1, 3, 48, 64)
    assert [d.get_length() for d in ov.Core().read_model(spec.path).inputs[0].get_partial_shape()] == [1, 3, 48, 64]
    fixed = tmp_path / "fixed.xml"
    ov.save_model(ov.Core().read_model(constant_reshape(tmp_path / "fixed.onnx")), str(fixed))
    # OpenVINO reads the constant Reshape as following the batch; 60 elements a row do not fit its 48.
    with pytest.raises(ModelError, match=r"--reshape could not rewrite .*do not evenly divide") as caught:
        resolve_model(str(fixed), (("images", (1, 3, 5, 4)),))
    assert "\n" not in str(caught.value) and ".hpp" not in str(caught.value)  # one line, the engine's reason


def test_parity_tolerance_follows_what_the_reference_ran() -> None:
    fp32 = default_tolerance("fp32")
    assert tolerance_for_reference(fp32, "int8").precision == "int8"
    assert tolerance_for_reference(fp32, "fp32") is fp32
    assert tolerance_for_reference(default_tolerance("int8"), "fp32").precision == "int8"  # never tightened


def test_two_engines_on_the_model_s_own_int8_graph_pass_at_int8_tolerance(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    from infermeter.parity.run import check_case_parity

    spec = resolve_model(qdq_mlp(tmp_path / "mlp_qdq.onnx"))
    # Asked for fp32 (an explicit precision): the reference runs the model's INT8 graph, so INT8 tolerances apply.
    # (Two threads: OpenVINO 2026.4's CPU plugin computes this QDQ MLP wrongly at INFERENCE_NUM_THREADS=1,
    # cosine 0.44 to ONNX Runtime, which parity rightly fails.)
    parity = check_case_parity(spec, Case(spec.ref, "openvino", precision="fp32", batch=2, threads=2))
    assert parity["status"] == "pass", parity
    assert parity["tolerance"]["precision"] == "int8"


def test_colon_and_control_vector_models_resolve(tmp_path: Path) -> None:
    colon = resolve_model(colon_named(tmp_path / "colon.onnx"))
    assert resolve_shapes(colon.inputs, 1, [(COLON_NAME, (1, 64, 1))]) == {COLON_NAME: (1, 64, 1)}
    tts = resolve_model(control_vector_tts(tmp_path / "tts.onnx"))
    assert fixed_batch(tts.inputs) is None and batched_inputs(tts.inputs) == {"input", "input_lengths"}


def test_quantize_refuses_to_score_outputs_whose_size_follows_the_values() -> None:
    from infermeter.quantize.evaluate import score

    # A TTS model's audio: FP32 and INT8 durations differ, so do the lengths (a Piper voice did this).
    with pytest.raises(ModelError, match="cannot be compared element by element"):
        score("generic", np.zeros((2, 1, 38400), np.float32), np.zeros((2, 1, 38144), np.float32), None)
