"""The checks on an explain request, before anything loads: two distinct known engines, positive counts."""

from __future__ import annotations

import pytest

from infermeter.core.errors import UsageError
from infermeter.explain.run import ExplainRequest, check_request


@pytest.mark.parametrize(
    ("engines", "more", "message"),
    [
        (("onnxruntime",), {}, "at least two"),
        (("onnxruntime", "onnxruntime"), {}, "onnxruntime more than once"),
        (("onnxruntime", "nosuchengine"), {}, "unknown backend nosuchengine"),
        (("onnxruntime", "openvino"), {"iterations": 0}, "--profile-iterations 0 must be positive"),
        (("onnxruntime", "openvino"), {"batch": -1}, "--batch -1 must be positive"),
    ],
)
def test_bad_requests_are_refused_with_the_reason(engines: tuple[str, ...], more: dict[str, int], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        check_request(ExplainRequest(model="tiny_cnn", engines=engines, **more))  # type: ignore[arg-type]


def test_a_good_request_passes() -> None:
    check_request(ExplainRequest(model="tiny_cnn", engines=("onnxruntime", "openvino", "torch")))
