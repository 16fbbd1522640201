"""The summary's speedup and P99 cells: paired intervals, "no diff", refusals and thin tails."""

from __future__ import annotations

from crafted_results import make_case
from infermeter.report.markdown import fastest_lines
from infermeter.report.summary import summary_table
from infermeter.results.schema import (
    CaseResult,
    CaseWarning,
    Interference,
    PairedSpeedup,
    case_from_dict,
    case_to_dict,
)


def _pair(ratio: float, low: float, high: float) -> tuple[CaseResult, CaseResult]:
    base = make_case("onnxruntime", p50_ms=2.0, n=1000)
    case = make_case("openvino", p50_ms=2.0 / ratio, n=1000, seed=1)
    case.timing.paired = PairedSpeedup(base.id, ratio, low, high, 12)
    return base, case


def test_an_interleaved_speedup_shows_its_interval_and_a_null_one_reads_no_difference() -> None:
    table = summary_table(list(_pair(2.71, 2.64, 2.78)))
    speed = table.columns.index("speedup")
    assert table.rows[1][speed] == "2.71x [2.64–2.78]"
    assert any("per-round ratios" in note for note in table.footnotes)
    same = summary_table(list(_pair(1.01, 0.98, 1.04)))
    assert same.rows[1][speed] == "no diff [0.98–1.04]"
    assert "no difference between openvino and onnxruntime" in fastest_lines(list(_pair(1.01, 0.98, 1.04)))[0]


def test_interference_on_either_side_refuses_the_speedup() -> None:
    base, case = _pair(2.0, 1.9, 2.1)
    base.warnings.append(CaseWarning("interference", "other processes used 40% of the CPUs", "40% of CPUs"))
    table = summary_table([base, case])
    assert table.rows[1][table.columns.index("speedup")] == "n/a§"
    assert any(note.startswith("§") for note in table.footnotes)


def test_a_p99_short_of_samples_is_marked_and_a_sound_one_is_not() -> None:
    thin = make_case("onnxruntime", n=100)
    sound = make_case("openvino", n=600, seed=1)
    table = summary_table([thin, sound])
    p99 = table.columns.index("P99 ms")
    assert table.rows[0][p99].startswith("~") and not table.rows[1][p99].startswith("~")
    assert any(note.startswith("~ P99 from fewer than 500") for note in table.footnotes)


def test_paired_and_interference_records_survive_the_results_file() -> None:
    _base, case = _pair(1.5, 1.4, 1.6)
    case.timing.interference = Interference(2.0, 2.0, 3.5, 0.4, 0.0, 0.2)
    case.timing.rounds_p50_ms = [1.0, 1.1]
    data = case_to_dict(case)
    assert data["timing"]["interference"]["other_share"] == 0.1
    back = case_from_dict(data)
    assert back.timing.paired == case.timing.paired and back.timing.interference == case.timing.interference
    assert back.timing.rounds_p50_ms == [1.0, 1.1] and "other_share" not in back.extra


def test_a_p50_wider_than_its_target_shows_its_interval() -> None:
    loose = make_case("onnxruntime", n=20, sigma=0.3)
    loose.timing.target_ci = 0.01
    tight = make_case("openvino", n=20000, sigma=0.01, seed=1)
    tight.timing.target_ci = 0.01
    table = summary_table([loose, tight])
    p50 = table.columns.index("P50 ms")
    assert "±" in table.rows[0][p50] and "±" not in table.rows[1][p50]
    assert any(note.startswith("± P50 interval wider") for note in table.footnotes)


def test_fp32_compute_of_an_fp16_graph_refuses_the_speedup() -> None:
    base, case = _pair(1.3, 1.2, 1.4)
    case.warnings.append(CaseWarning("fp32_compute_storage", "fp32 compute (fp16 storage): ...", "fp16 storage"))
    table = summary_table([base, case])
    assert table.rows[1][table.columns.index("speedup")] == "n/a¶"
    assert any(note.startswith("¶ no speedup: fp32 compute (fp16 storage)") for note in table.footnotes)
