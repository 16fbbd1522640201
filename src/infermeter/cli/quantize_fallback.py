"""`infermeter quantize MODEL --to fp16|bf16`: the reduced-precision study's tables (decisions changed, the layers
kept in FP32, the three speeds per engine)."""

from __future__ import annotations

import math
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from infermeter.cli.common import require_positive, split_values, stderr, stdout
from infermeter.cli.quantize_flags import StudyFlags
from infermeter.quantize.fallback.study import BenchArm, EngineStudy
from infermeter.quantize.reduced import Budget, Judgement


def _changed(judgement: Judgement | None) -> str:
    if judgement is None:
        return "—"
    if not math.isfinite(judgement.max_abs_error):
        return "NaN/inf"
    return "n/a" if judgement.decisions_changed is None else str(judgement.decisions_changed)


def _cosine(judgement: Judgement | None) -> str:
    return "—" if judgement is None else f"{judgement.cosine:.6f}"


def _speed(arm: BenchArm | None, storage_only: bool) -> str:
    if arm is None or arm.result is None:
        return "—"
    result = arm.result
    if not result.ok or result.latency_ms is None:
        return result.status
    text = f"{result.latency_ms.p50:.3f}"
    paired = result.timing.paired
    if paired is not None:
        text += (" (speedup refused)" if storage_only
                 else f" ({paired.ratio:.2f}× [{paired.ci_low:.2f}, {paired.ci_high:.2f}])")  # fmt: skip
    return text


def accuracy_table(studies: list[EngineStudy], precision: str, budget: Budget) -> Table:
    """Decisions changed at full reduced precision and with the kept layers, per engine."""
    table = Table(header_style="bold", title=f"{precision.upper()} vs FP32 (budget: {budget.describe()})")
    for column in ("engine", "full: changed", "full: cosine", "kept in FP32", "mixed: changed", "mixed: cosine"):
        table.add_column(column, justify="left" if column == "engine" else "right")
    for column in ("evals", "search s", "figures from"):
        table.add_column(column, justify="left" if column == "figures from" else "right")
    for study in studies:
        if study.full is None:
            continue
        search, marks = study.search, study.marks
        kept = "—" if search is None else f"{len(search.kept)}" + (" (capped)" if search.capped else "")
        kept += f" ({marks.held_count} held)" if marks is not None else ""
        no_mixed = study.mixed_cell()
        how = study.full.how + (
            f"; mixed {study.mixed.how}" if study.mixed and study.mixed.how != study.full.how else ""
        )
        table.add_row(
            study.engine,
            _changed(study.full),
            _cosine(study.full),
            kept,
            no_mixed or _changed(study.mixed),
            "—" if no_mixed else _cosine(study.mixed),
            "—" if search is None else str(search.evaluations),
            "—" if search is None else f"{search.elapsed_s:.1f}",
            escape(how),
        )
    return table


def speed_table(studies: list[EngineStudy], precision: str) -> Table:
    """P50 latency (ms, batch 1) of FP32, full reduced and mixed on each engine, timed interleaved."""
    table = Table(header_style="bold", title="P50 ms at batch 1, interleaved (speedup vs FP32 [95% CI])")
    for column in ("engine", "FP32", f"full {precision.upper()}", "mixed"):
        table.add_column(column, justify="left" if column == "engine" else "right")
    for study in studies:
        if not any(arm.result for arm in study.arms):
            continue
        by_role = {("mixed" if a.label == "mixed" else "fp32" if a.label == "FP32" else "full"): a for a in study.arms}
        storage = study.speed_note is not None
        cells = [_speed(by_role.get(role), storage and role != "fp32") for role in ("fp32", "full", "mixed")]
        cells[2] = study.mixed_cell() or cells[2]  # no mark held: the mixed model is the full one, not timed twice
        table.add_row(study.engine, *cells)
    return table


def _print_study_details(study: EngineStudy) -> None:
    search = study.search
    if search is not None and search.kept:
        kept = Table(header_style="bold", title=f"{study.engine}: layers kept in FP32")
        for column in ("layer", "op", "position"):
            kept.add_column(column, justify="right" if column == "position" else "left")
        for layer in search.kept:
            kept.add_row(escape(layer.name), layer.op_type, str(layer.position))
        stdout.print(kept)
        stdout.print(f"[dim]{study.engine}: found on {escape(study.search_how)}[/]", soft_wrap=True)
    if search is not None:
        if search.range_kept:
            stdout.print(f"{study.engine}: range pre-pass (beyond ±65504): {escape(', '.join(search.range_kept))}")
        if search.type_table:
            rows = ", ".join(
                f"{r.op_type}×{r.layers} {'meets' if r.verdict.meets else 'misses'}" for r in search.type_table
            )
            stdout.print(f"{study.engine}: operator types kept in FP32 one at a time: {escape(rows)}", soft_wrap=True)
        for note in search.notes:
            stdout.print(f"{study.engine}: {escape(note)}", soft_wrap=True)
    for line in [*study.lines, *(x for x in (study.parity, study.speed_note) if x)]:
        stdout.print(f"[dim]{escape(line)}[/]", soft_wrap=True)
    if study.mixed_path is not None:
        held = study.marks is None or study.marks.effective
        what = "mixed model" if held else "marked model (no mark held: the same as the full one)"
        stdout.print(f"{study.engine}: {what}: {escape(str(study.mixed_path))}")


def run_fallback_study(model: str, flags: StudyFlags) -> None:
    """`quantize --to`: run the study and print its tables."""
    from infermeter.quantize.fallback.pipeline import FallbackRequest, fallback_engines_here, study_fallback
    from infermeter.results.env import default_threads

    require_positive(flags.threads, "--threads", allow_zero=True)
    precision, latency = flags.to, not flags.no_latency
    engines = tuple(split_values(flags.backends)) or fallback_engines_here()
    folder = flags.output or Path(f"{Path(model.split(':')[0]).stem}-{precision}")
    budget = Budget(flags.max_changed, flags.min_cosine, flags.threshold)
    request = FallbackRequest(
        model,
        precision,
        engines=engines,
        output=folder,
        budget=budget,
        data=flags.data,
        samples=flags.samples,
        max_evaluations=flags.max_evals,
        latency=latency,
        threads=flags.threads or default_threads(),
        seed=flags.seed,
    )
    with stderr.status("reduced-precision study") as status:
        outcome = study_fallback(request, lambda msg: status.update(escape(msg)))
    stdout.print(accuracy_table(outcome.studies, precision, budget))
    if latency:
        stdout.print(speed_table(outcome.studies, precision))
    for study in outcome.studies:
        _print_study_details(study)
    for note in outcome.notes:
        stdout.print(f"[dim]{escape(note)}[/]", soft_wrap=True)
    stdout.print(f"FP32 reference: {escape(str(outcome.fp32_model))} (ONNX Runtime, graph as written)")
