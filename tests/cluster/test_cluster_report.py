"""The summary table of a `bench --cluster --machines` run: speedups within one machine class, the class named."""

from __future__ import annotations

import pytest

from crafted_results import make_case
from infermeter.report.summary import backend_labels, speedups
from infermeter.results.records import NodeRecord, write_record


def test_speedups_stay_within_one_machine_class_and_tables_name_it() -> None:
    cases = []
    for machine, onnx_ms, ov_ms in (("a", 2.0, 1.0), ("b", 4.0, 1.0)):
        for backend, p50 in (("onnxruntime", onnx_ms), ("openvino", ov_ms)):
            case = make_case(backend, p50_ms=p50, case_id=f"{backend}-{machine}")
            write_record(
                case, NodeRecord(f"node-{machine}", "host", machine=machine, held_from_s=0.0, held_until_s=1.0)
            )
            cases.append(case)
    ratios = speedups(cases)
    # Each openvino case against the onnxruntime case of its own class: 2x on a, 4x on b (never 1/4 across).
    assert ratios["openvino-a"].ratio == pytest.approx(2.0, rel=0.05)
    assert ratios["openvino-b"].ratio == pytest.approx(4.0, rel=0.05)
    assert backend_labels(cases)["openvino-b"] == "openvino @b"
    assert backend_labels([make_case("openvino", case_id="here")])["here"] == "openvino"


def test_advise_answers_which_machine_and_which_engine() -> None:
    from infermeter.advise.pick import advise

    cases = []
    for machine, onnx_ms, ov_ms in (("a", 2.0, 1.5), ("b", 0.9, 1.2)):
        for backend, p50 in (("onnxruntime", onnx_ms), ("openvino", ov_ms)):
            case = make_case(backend, p50_ms=p50, case_id=f"{backend}-{machine}")
            write_record(
                case, NodeRecord(f"node-{machine}", "host", machine=machine, held_from_s=0.0, held_until_s=1.0)
            )
            cases.append(case)
    advice = advise(cases)
    assert advice.pick is not None and advice.pick.id == "onnxruntime-b"
    assert advice.explanation[0].startswith("Pick ") and " onnxruntime @b " in advice.explanation[0]
    per_machine = next(line for line in advice.explanation if line.startswith("Best per machine class"))
    assert "a: " in per_machine and "openvino @a" in per_machine and "b: " in per_machine, per_machine
