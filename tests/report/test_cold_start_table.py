"""The cold-start table shows each load phase under its own name: a PyTorch module's instantiation is not a
compilation, and a phase the table does not name is still counted."""

from __future__ import annotations

from crafted_results import make_case
from infermeter.report.coldstart import COLD_START_COLUMNS, cold_start_rows
from infermeter.report.summary import SummaryTable
from infermeter.results.schema import CaseResult


def _cold(backend: str, phases: dict[str, float], status: str = "ok") -> CaseResult:
    case = make_case(backend, 1, 1.0, n=20, status=status)
    case.loading.load_phases_s = phases
    case.options = {"cache": "off"}
    case.loading.process_start_s = 0.5
    return case


def _cells(phases: dict[str, float]) -> dict[str, str]:
    row = cold_start_rows([_cold("torch", phases)])[0]
    return dict(zip(COLD_START_COLUMNS, row, strict=True))


def test_a_torch_module_build_is_model_init_not_compile() -> None:
    cells = _cells({"import_s": 1.5, "build_s": 0.25})  # as torch backends and older files name it
    assert cells["model init s"] == "0.25" and cells["compile s"] == "—" and cells["import s"] == "1.50"
    assert _cells({"import_s": 1.5, "model_init_s": 0.25})["model init s"] == "0.25"


def test_each_phase_in_its_column_and_unnamed_ones_summed_apart() -> None:
    phases = {"import_s": 0.1, "convert_s": 0.2, "compile_s": 3.0, "session_create_s": 0.4, "quantize_s": 1.25}
    cells = _cells({**phases, "simulated_load_s": 0.5, "load_model": 0.25})
    assert [cells[c] for c in ("import s", "convert s", "compile s", "session s", "quantize s")] == [
        "0.10",
        "0.20",
        "3.00",
        "0.40",
        "1.25",
    ]
    assert cells["other s"] == "0.75" and cells["deserialize s"] == "—"
    assert "engine_build_s" not in str(COLD_START_COLUMNS)


def test_failed_rows_fill_every_column_and_unused_phase_columns_leave_the_table() -> None:
    rows = cold_start_rows([_cold("torch", {}, status="crashed"), _cold("onnxruntime", {"import_s": 0.3})])
    assert all(len(row) == len(COLD_START_COLUMNS) for row in rows) and rows[0][4] == "CRASHED"
    columns, _, caption = SummaryTable(COLD_START_COLUMNS, rows).compact()
    assert "model init s" not in columns and "model init s" not in caption and "other s" not in caption


def test_the_build_is_its_own_column_and_counts_to_the_first_result() -> None:
    from infermeter.results.artifact import Artifact

    case = _cold("openvino", {"import_s": 0.25, "deserialize_s": 0.05})
    case.loading.load_s, case.loading.first_inference_ms = 0.3, 100.0
    case.loading.build = Artifact("/x.blob", "k", cache="built", build_phases_s={"compile_s": 2.0}, built_here_s=2.0)
    cells = dict(zip(COLD_START_COLUMNS, cold_start_rows([case])[0], strict=True))
    assert cells["build s"] == "2.00" and cells["cache hit"] == "built" and cells["deserialize s"] == "0.05"
    assert cells["to first result s"] == "2.90"  # process 0.5 + build 2.0 + load 0.3 + first 0.1
