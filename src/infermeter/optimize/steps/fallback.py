"""4b'. When a reduced precision misses the accuracy budget, its FP32-fallback variant becomes the candidate
instead of the precision being dropped: the layers that must stay in FP32 are searched on the evaluation data
(`quantize.fallback_pipeline`, the study `quantize --to` runs), and the engine's mixed model is measured and
carries the study's accuracy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from infermeter.backends.registry import get_backend
from infermeter.core.errors import InfermeterError
from infermeter.optimize.pipeline import Run
from infermeter.quantize.evaluate import Accuracy
from infermeter.quantize.reduced import Budget
from infermeter.results.records import read_record, write_record
from infermeter.results.schema import CaseResult

# Two FP32 engines differ by about this much in cosine points: a cosine budget tighter than it is unreachable.
FP32_NOISE_POINTS = 1e-4
# The journal's details of step `half` keep each finished study under this key, for a resumed run to reuse.
STUDIES = "fallback_studies"


def budget_for(kind: str, count: int, max_drop_pct: float) -> Budget:
    """optimize's budget in points as the study's: decisions changed for a classifier (a drop of P points is P% of
    the samples flipped), else a mean cosine of 1 − P/100 (the drop of the cosine metric), no tighter than the
    noise between two FP32 engines."""
    if kind == "classification":
        return Budget(max_changed=int(max_drop_pct / 100.0 * count))
    return Budget(min_cosine=1.0 - max(max_drop_pct, FP32_NOISE_POINTS) / 100.0)


def fallback_candidate(run: Run, result: CaseResult) -> CaseResult | None:
    """When `result` (a reduced-precision case, scored) misses the budget: the FP32-fallback study on its engine,
    and its mixed model measured as a candidate of the same step (None when there is none, with a note why)."""
    from infermeter.optimize.accuracy import eval_data
    from infermeter.optimize.repair import repair_prune_reason
    from infermeter.optimize.steps.log import note, skip
    from infermeter.quantize.fallback.pipeline import FallbackRequest, study_fallback

    accuracy = read_record(result, Accuracy)
    limit = run.request.max_accuracy_drop_pct
    if accuracy is None or accuracy.drop_pct <= limit:
        return None
    what = f"{result.backend} {result.precision}"
    if get_backend(result.backend).precision_fallback is None:
        note(run, "half", f"{what} misses the budget and {result.backend} has no FP32-fallback path: dropped")
        return None
    reason = repair_prune_reason(run, result, run.best_to_beat())
    if reason:
        skip(run, "half", f"{what} FP32-fallback study", reason)
        return None
    key = f"{result.backend}-{result.precision}"
    entry = finished_study(run, key)
    if entry is not None:  # a resumed run: the study finished earlier and its files are still there
        note(run, "half", f"{what} misses the budget: resumed: its FP32-fallback study finished earlier "
             f"({len(entry['kept'])} layer(s) in FP32: {', '.join(entry['kept'])})")  # fmt: skip
        return measure_variant(run, result, entry)
    data, reference = eval_data(run, "half")
    budget = budget_for(reference.kind, data.evaluation.count, limit)
    request = FallbackRequest(run.spec.ref, result.precision, engines=(result.backend,),
                              output=run.path(f"fallback-{result.backend}-{result.precision}"), budget=budget,
                              latency=False, threads=run.request.threads, sample_set=data.evaluation)  # fmt: skip
    try:
        study = study_fallback(request).studies[0]
    except InfermeterError as exc:
        note(run, "half", f"{what} misses the budget; no FP32-fallback variant: {exc}")
        return None
    mixed = next((arm for arm in study.arms if arm.label == "mixed"), None)
    if mixed is None or study.mixed is None or study.search is None:
        reason = "; ".join([*study.lines, *(study.search.notes if study.search else ())]) or "no layer kept"
        note(run, "half", f"{what} misses the budget; no FP32-fallback variant: {reason}")
        return None
    entry = {
        "kept": [layer.name for layer in study.search.kept],
        "how": study.mixed.how,
        "mixed_path": str(study.mixed_path),
        "spec": mixed.spec.ref,
        "precision": mixed.case.precision,
        "options": dict(mixed.case.options),
        "accuracy": study.mixed.accuracy.to_dict(),
        # What the engine did with the marks, read from what it ran (`quantize.fallback.marks`).
        "marks": study.marks.summary() if study.marks is not None else None,
    }
    run.journal.details("half").setdefault(STUDIES, {})[key] = entry
    note(run, "half", f"{what} misses the budget ({accuracy.drop_pct:.2f} points): FP32-fallback variant with "
         f"{len(entry['kept'])} layer(s) in FP32 ({', '.join(entry['kept'])}), {entry['marks'] or 'marks not read'}, "
         f"{study.search.evaluations} evaluations, figures {study.mixed.how}")  # fmt: skip
    run.save()
    return measure_variant(run, result, entry)


def finished_study(run: Run, key: str) -> dict[str, Any] | None:
    """The FP32-fallback study `key` (`backend-precision`) a resumed run finished earlier, when its mixed model
    and the spec it is measured from are still on disk; else None (the study runs again)."""
    entry = run.journal.details("half").get(STUDIES, {}).get(key)
    if not isinstance(entry, dict) or not Path(str(entry.get("mixed_path"))).is_file():
        return None
    return entry if entry.get("spec") == run.spec.ref or Path(str(entry.get("spec"))).is_file() else None


def measure_variant(run: Run, result: CaseResult, entry: dict[str, Any]) -> CaseResult | None:
    """The study's mixed variant measured as a candidate of step `half`, carrying the study's accuracy."""
    from infermeter.models.resolve import resolve_model

    spec = run.spec if entry["spec"] == run.spec.ref else resolve_model(entry["spec"])
    base = run.case(spec.ref, result.backend, entry["precision"])
    case = replace(base, options=tuple(sorted({**dict(base.options), **entry["options"]}.items())))
    measured = run.measure("half", spec, case, variant="fp32-fallback")
    if measured is not None and measured.ok:
        write_record(measured, Accuracy.from_dict(entry["accuracy"]))
        kept = ", ".join(entry["kept"])
        marks = f", {entry['marks']}" if entry.get("marks") else ""
        measured.notes.append(f"fp32 fallback: {len(entry['kept'])} layer(s) in FP32 ({kept}{marks}); accuracy "
                              f"{entry['how']}; mixed model {entry['mixed_path']}")  # fmt: skip
        run.save()
    return measured
