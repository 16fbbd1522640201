"""`infermeter backends` lists the precisions a backend really runs: each precision a backend accepts (its
`unsupported_reason` lets the case through) is listed; so a backend that quantizes on the fly lists int8."""

from __future__ import annotations

import json

import pytest

from cli_helpers import run_cli
from infermeter.backends.registry import inference_backends
from infermeter.core.case import PRECISIONS, Case
from infermeter.models.resolve import resolve_model


@pytest.mark.parametrize("cls", inference_backends(), ids=lambda cls: cls.name)
def test_every_precision_a_backend_accepts_is_listed(cls: type) -> None:
    spec = resolve_model("tiny_cnn")
    accepted = [p for p in PRECISIONS if cls.unsupported_reason(spec, Case(spec.ref, cls.name, precision=p)) is None]
    assert set(accepted) <= set(cls.precisions), f"{cls.name} runs {accepted} but lists {cls.precisions}"


def test_a_listed_precision_the_backend_refuses_names_the_reason() -> None:
    """unsupported_reason keeps its meaning: ONNX Runtime's CPU provider lists no fp16 and still says why."""
    spec = resolve_model("tiny_cnn")
    onnxruntime = next(cls for cls in inference_backends() if cls.name == "onnxruntime")
    assert "fp16" not in onnxruntime.precisions
    reason = onnxruntime.unsupported_reason(spec, Case(spec.ref, "onnxruntime", precision="fp16"))
    assert reason is not None and "no x86 fp16 kernels" in reason


def test_backends_listing_shows_onnxruntime_int8() -> None:
    done = run_cli("backends", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["onnxruntime"]["precisions"] == ["fp32", "int8"]
    assert rows["onnxruntime-cuda"]["precisions"] == ["fp32"]  # the CUDA provider runs graphs as stored
