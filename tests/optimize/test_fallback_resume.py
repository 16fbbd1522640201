"""`optimize --resume`: a finished FP32-fallback study is reused (its mixed model measured with the accuracy it
found), not run again; a study whose files are gone runs again."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crafted_results import accuracy_field
from infermeter.core.case import Case
from infermeter.figures.latency_stats import latency_stats
from infermeter.optimize.journal import Journal
from infermeter.optimize.steps import fallback as steps_fallback
from infermeter.results.records import Accuracy, read_record
from infermeter.results.schema import CaseResult, ResultsFile


def _case_result(case_id: str, precision: str, extra: dict[str, Any] | None = None) -> CaseResult:
    return CaseResult(id=case_id, model="m", backend="torch", backend_version="1", device="cpu", batch=1,
                      shape_mode="static", precision=precision, precision_effective=precision, threads=1, status="ok",
                      latency_ms=latency_stats([10.0] * 20), extra=extra or {})  # fmt: skip


def _run(tmp_path: Path, measured: list[Case]) -> SimpleNamespace:
    journal = Journal(ResultsFile("now", {}))
    journal.begin("half", "half", "why")

    def measure(step: str, spec: object, case: Case, variant: str = "") -> CaseResult:
        measured.append(case)
        return _case_result("mixed", case.precision)

    return SimpleNamespace(
        request=SimpleNamespace(max_accuracy_drop_pct=1.0, threads=1, no_prune=True),
        spec=SimpleNamespace(ref="m.py:build"),
        best_to_beat=lambda: None,
        journal=journal,
        emit=lambda event: None,
        save=lambda: None,
        path=lambda relative: tmp_path / relative,
        case=lambda ref, backend, precision: Case(ref, backend, precision=precision),
        measure=measure,
    )


def test_a_finished_study_is_reused_on_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import infermeter.quantize.fallback.pipeline as pipeline

    def no_study(*args: object, **kwargs: object) -> None:
        raise AssertionError("the finished study ran again")

    monkeypatch.setattr(pipeline, "study_fallback", no_study)
    config = tmp_path / "m.bf16.torch-autocast.json"
    config.write_text('{"fp32_modules": ["fc1"]}')
    measured: list[Case] = []
    run = _run(tmp_path, measured)
    found = Accuracy("cosine", 0.999, 1.0, 0.1, 64)
    run.journal.details("half")[steps_fallback.STUDIES] = {"torch-bf16": {
        "kept": ["fc1"], "how": "computed by torch", "mixed_path": str(config), "spec": "m.py:build",
        "precision": "bf16", "options": {"torch.autocast": "on", "torch.fp32_modules": str(config)},
        "accuracy": found.to_dict()}}  # fmt: skip
    missed = _case_result("torch-bf16", "bf16", accuracy_field(0.9, 3.0))
    result = steps_fallback.fallback_candidate(run, missed)  # type: ignore[arg-type]
    assert result is not None and read_record(result, Accuracy) == found
    assert [dict(c.options) for c in measured] == [{"torch.autocast": "on", "torch.fp32_modules": str(config)}]
    assert any("resumed" in n for n in run.journal.step("half")["notes"])
    # Its mixed model gone: the study is not taken as finished.
    config.unlink()
    assert steps_fallback.finished_study(run, "torch-bf16") is None  # type: ignore[arg-type]


def test_nothing_recorded_means_no_resume(tmp_path: Path) -> None:
    run = _run(tmp_path, [])
    assert steps_fallback.finished_study(run, "torch-bf16") is None  # type: ignore[arg-type]
