"""OpenVINO backend: parity with torch, the precision hint set and read back (the BF16 trap), cache, async."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend_helpers import feeds_for, outputs_of, torch_reference
from infermeter.backends.openvino_backend import OpenVinoBackend, OpenVinoSession, read_back_precision
from infermeter.build.case_build import build_artifact
from infermeter.core.errors import UsageError
from infermeter.measure.worker import execute_case
from infermeter.models.convert import onnx_for
from infermeter.results.env import cpu_isa

pytest.importorskip("openvino")
HAS_BF16 = bool({"avx512_bf16", "amx_bf16"} & set(cpu_isa()))


def test_fp32_outputs_match_torch(tiny_cnn, make_case):
    case = make_case("openvino", options={"cache": "off"})
    feeds = feeds_for(tiny_cnn, case)
    np.testing.assert_allclose(
        outputs_of(tiny_cnn, case, feeds)[0], torch_reference(tiny_cnn, case, feeds)[0], rtol=1e-4, atol=1e-5
    )


@pytest.mark.skipif(not HAS_BF16, reason="the BF16 trap exists only on CPUs with AVX-512 BF16 or AMX")
def test_without_explicit_hint_openvino_runs_bf16(tiny_cnn):
    """The trap itself: OpenVINO's CPU default on this CPU is bf16, although nobody asked for it."""
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(onnx_for(tiny_cnn).path)), "CPU")
    assert read_back_precision(compiled) == "bf16"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_precision_is_set_and_read_back(tiny_cnn, make_case, precision):
    if precision == "bf16" and not HAS_BF16:
        pytest.skip("no native bf16 on this CPU")
    case = make_case("openvino", precision=precision, options={"cache": "off"})
    result = execute_case(tiny_cnn, case)
    assert result.status == "ok", result.error
    assert result.precision_effective == precision
    assert any(f"read back {precision}" in note for note in result.notes)
    assert not [w for w in result.warnings if w.code == "precision_mismatch"]


def test_bf16_unsupported_without_the_isa(tiny_cnn, make_case, monkeypatch):
    monkeypatch.setattr("infermeter.results.env.cpu_isa", lambda: ["avx2", "avx512f"])
    reason = OpenVinoBackend.unsupported_reason(tiny_cnn, make_case("openvino", precision="bf16"))
    assert reason is not None and "avx512_bf16" in reason
    # int8 needs no ISA flag: a float model is quantized by NNCF in the build stage (tests/quantize/test_int8_*).
    assert OpenVinoBackend.unsupported_reason(tiny_cnn, make_case("openvino", precision="int8")) is None


def test_compiled_blob_built_once_imported_and_truncated_blob_rebuilt(tiny_cnn, make_case, own_compile_cache):
    case = make_case("openvino", batch=3)  # a cache of this test's own: the first build is a miss
    first = build_artifact(tiny_cnn, case)
    assert first is not None and first.cache == "built" and first.build_phases_s["compile_s"] > 0
    second = build_artifact(tiny_cnn, case)
    assert second is not None and second.cache == "hit"
    session = OpenVinoBackend().load(tiny_cnn, case, second)
    assert "deserialize_s" in session.load_phases_s and "compile_s" not in session.load_phases_s
    assert session.effective_precision() == "fp32"  # the precision hint survives the export and import
    session.close()
    with Path(second.path).open("r+b") as handle:
        handle.truncate(64)
    third = build_artifact(tiny_cnn, case)
    assert third is not None and third.cache == "rebuilt"
    session = OpenVinoBackend().load(tiny_cnn, case, third)
    feeds = feeds_for(tiny_cnn, case)
    np.testing.assert_allclose(
        session.outputs_to_numpy(session.run(session.prepare(feeds)))[0],
        torch_reference(tiny_cnn, case, feeds)[0],
        rtol=1e-4,
        atol=1e-5,
    )
    session.close()


def test_load_without_a_build_compiles_in_place(tiny_cnn, make_case):
    case = make_case("openvino", options={"cache": "off"})
    assert build_artifact(tiny_cnn, case) is None
    session = OpenVinoBackend().load(tiny_cnn, case)
    assert "compile_s" in session.load_phases_s
    session.close()


def test_options_threads_streams_and_dynamic_shapes(tiny_cnn, make_case):
    case = make_case("openvino", shape_mode="dynamic", options={"cache": "off", "openvino.hint": "throughput"})
    session = OpenVinoBackend().load(tiny_cnn, case)
    assert isinstance(session, OpenVinoSession)
    assert session.compiled_model.get_property("INFERENCE_NUM_THREADS") == 2
    assert str(session.compiled_model.get_property("PERFORMANCE_HINT")).upper().endswith("THROUGHPUT")
    # Dynamic mode keeps the symbolic batch: another batch size runs on the same compiled model.
    other = {"input": np.zeros((5, 3, 32, 32), dtype=np.float32)}
    assert session.outputs_to_numpy(session.run(session.prepare(other)))[0].shape == (5, 10)
    session.close()
    with pytest.raises(UsageError, match=r"openvino\.hint"):
        OpenVinoBackend().load(tiny_cnn, make_case("openvino", options={"openvino.hint": "fast"}))


def test_async_api_matches_sync(tiny_cnn, make_case):
    case = make_case("openvino", options={"cache": "off", "openvino.streams": "2"})
    session = OpenVinoBackend().load(tiny_cnn, case)
    assert isinstance(session, OpenVinoSession)
    prepared = session.prepare(feeds_for(tiny_cnn, case))
    expected = session.outputs_to_numpy(session.run(prepared))[0]
    session.start_async(prepared)
    np.testing.assert_array_equal(session.wait()[0], expected)
    queue = session.async_queue(2)
    seen: list[np.ndarray] = []
    queue.set_callback(lambda request, _: seen.append(np.array(request.get_output_tensor(0).data)))
    for _ in range(4):
        queue.start_async(prepared)
    queue.wait_all()
    assert len(seen) == 4 and all(np.array_equal(s, expected) for s in seen)
    session.close()
