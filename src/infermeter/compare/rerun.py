"""`compare BASE NEW --rerun`: both sides' cases re-measured now, interleaved in one session on this machine.

Two results files measured at different times carry two machine states, and nothing inside either file can tell
a change of the machine from a change of the code. Re-measuring both sides together removes the question: each
pair (base case, new case) runs as one interleaved group of two (`measure.interleave.run_group`), so every round
times both within a fraction of a second, and each round gives one ratio new / base in which the machine's state
cancels. The change is the geometric mean of those ratios with its 95% Student-t interval (`paired_speedup`,
inverted: a slowdown), and the p-value is the one-sample t-test of the log ratios against 0. A side flagged
`interference` is still judged (with a note): other work hits both sides of a round alike.

With a sequential decision (`decision`, the CLI's default), the rounds stop as soon as it decides, rounds that
other work disturbed are set aside, and its outcome is the verdict (`decision_rounds.apply_decision`): slower,
faster, same, or unknown when its budget ran out.

A side can be rebuilt when its model still resolves to the same model: a zoo name, or a model file that exists
with the content hash the results file recorded. Each case is rebuilt from the file's stored plan when it has one
(the exact case, id included), else from the result's controlled variables. Both sides get the option
`compare.side` (base / new), ignored by every backend, so that two identical cases stay two distinct items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.compare.decision import DecisionParams
from infermeter.compare.pairing import pair_cases, pairing_note
from infermeter.compare.verdict import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    CaseChange,
    Comparison,
    case_label,
)
from infermeter.core.case import Case, MeasureSettings
from infermeter.core.errors import InfermeterError
from infermeter.results.schema import CaseResult, ResultsFile

SIDE_OPTION = "compare.side"


@dataclass(frozen=True)
class Side:
    """One results file as a source of cases to rebuild: its path, its plan's cases by id, its models' hashes."""

    path: Path
    results: ResultsFile
    plan_cases: dict[str, Case]
    model_hashes: dict[str, str]


def load_side(path: Path, results: ResultsFile) -> Side:
    """The file's stored plan cases (when it has a readable plan) and recorded model content hashes."""
    from infermeter.measure.planfile import PLAN_KEY, stored_plan
    from infermeter.models.resolve import resolve_model

    plan_cases: dict[str, Case] = {}
    try:
        plan = stored_plan(results, path, resolve_model)
    except InfermeterError:  # a model changed or gone: the hash check below refuses its cases by name
        plan = None
    if plan is not None:
        plan_cases = {case.id: case for item in plan.items() for case in item.chain}
    hashes: dict[str, str] = {}
    block: Any = results.extra.get(PLAN_KEY)
    for part in block.get("parts", []) if isinstance(block, dict) else []:
        for entry in part.get("models", []) if isinstance(part, dict) else []:
            if isinstance(entry, dict) and entry.get("content_hash"):
                hashes[str(entry["ref"])] = str(entry["content_hash"])
    return Side(path, results, plan_cases, hashes)


def _shapes(values: dict[str, list[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((name, tuple(int(d) for d in dims)) for name, dims in sorted(values.items()))


def rebuild_case(side: Side, result: CaseResult, tag: str, settings: MeasureSettings) -> tuple[Any, Case]:
    """(model spec, case) to measure `result` again, tagged with `compare.side=tag`; InfermeterError (with the
    reason) when it cannot be rebuilt here."""
    from infermeter.models.resolve import resolve_model

    spec = resolve_model(result.model)
    recorded = side.model_hashes.get(result.model)
    if recorded and spec.content_hash and recorded != spec.content_hash:
        raise InfermeterError(f"{result.model} has changed since {side.path} was measured")
    case = side.plan_cases.get(result.id)
    if case is None:
        if result.shape_mode != "static":
            raise InfermeterError(f"{side.path} has no stored plan to rebuild a dynamic-shape case from")
        options = tuple(sorted(result.options.items()))
        case = Case(
            result.model,
            result.backend,
            precision=result.precision,
            batch=result.batch,
            shape_mode=result.shape_mode,
            threads=result.threads,
            input_shapes=_shapes(result.shapes.input_shapes),
            options=options,
            streams=result.streams,
        )
    options = tuple(sorted({**dict(case.options), SIDE_OPTION: tag}.items()))
    return spec, replace(case, options=options, settings=settings)


def _item(side: Side, result: CaseResult, tag: str, settings: MeasureSettings) -> tuple[Any, tuple[Case, ...]]:
    spec, case = rebuild_case(side, result, tag, settings)
    return spec, (case,)


def paired_change(base: CaseResult, new: CaseResult, label: str, threshold: float, alpha: float) -> CaseChange:
    """The change new / base from one interleaved group: per-round ratios, their geometric mean and interval."""
    from scipy.stats import ttest_1samp

    from infermeter.measure.interleave import paired_speedup

    draft = CaseChange(label, base, new=new, paired_by="rerun", metric="p50", replication="paired rounds")
    if not (base.ok and new.ok and base.latency_ms and new.latency_ms):
        return replace(draft, notes=[f"re-measured: base {base.status}, new {new.status} ({base.error or new.error})"])
    if base.precision_effective != new.precision_effective:
        text = f"effective precision {base.precision_effective} vs {new.precision_effective}"
        return replace(draft, verdict="precision differs", notes=[text])
    count = min(len(base.timing.rounds_p50_ms), len(new.timing.rounds_p50_ms))
    draft = replace(draft, base_value=base.latency_ms.p50, new_value=new.latency_ms.p50, replicates=(count, count))
    if count < 2:
        return replace(draft, notes=["fewer than 2 rounds: raise --min-time or --rounds"])
    # paired_speedup gives base / new (a speedup); the gate reads new / base (a slowdown), hence the inversion.
    speedup = paired_speedup(base.timing.rounds_p50_ms[:count], new.timing.rounds_p50_ms[:count], base.id)
    ratio, ci95 = 1.0 / speedup.ratio, (1.0 / speedup.ci_high, 1.0 / speedup.ci_low)
    logs = np.log(new.timing.rounds_p50_ms[:count]) - np.log(base.timing.rounds_p50_ms[:count])
    spread = float(np.std(logs))
    p_value = float(ttest_1samp(logs, 0.0).pvalue) if spread > 0 else (1.0 if float(np.mean(logs)) == 0 else 0.0)
    notes = []
    significant = p_value < alpha
    # Judged anyway: both sides ran in the same rounds, so other work between rounds cancels in the ratios and
    # work within a round widens their interval. Refusing would pass a real regression on a busy CI runner.
    if any(w.code == "interference" for c in (base, new) for w in c.warnings):
        notes.append("other work ran during the re-measurement (interference): the interval is wider for it")
    beyond = ratio > 1.0 + threshold or ratio < 1.0 / (1.0 + threshold)
    verdict = ("slower" if ratio > 1.0 else "faster") if significant else "not significant"
    if significant and not beyond:
        notes.append(f"within the {threshold:.0%} threshold")
    return replace(
        draft,
        ratio=ratio,
        ratio_ci95=ci95,
        p_value=p_value,
        significant=significant,
        beyond_threshold=beyond,
        verdict=verdict,
        notes=notes,
    )


def rerun_comparison(
    base: Side,
    new: Side,
    settings: MeasureSettings,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    on_pair: Callable[[int, int, str], None] | None = None,
    decision: DecisionParams | None = None,
    metric: str = "p50",
) -> Comparison:
    """Re-measure every paired case of the two files, each pair as one interleaved group of two, and judge each
    change on its per-round ratios: by the sequential `decision` when given (the rounds stop once it decides),
    else by the t-test after the rounds (`metric` the one asked for: the decision gates p50, its record says
    why when that was p99). Pairs that cannot be rebuilt here are listed in `remarks`."""
    from infermeter.compare.decision_rounds import apply_decision, decided_group
    from infermeter.measure.interleave import run_group
    from infermeter.measure.plan import PlanItem

    pairs, only_base, only_new = pair_cases(base.results.cases, new.results.cases)
    changes: list[CaseChange] = []
    remarks: list[str] = []
    for index, (b, n, how) in enumerate(pairs):
        label = case_label(n)
        try:
            items = [PlanItem(*_item(side, r, tag, settings)) for side, r, tag in ((base, b, "base"), (new, n, "new"))]
        except InfermeterError as exc:
            remarks.append(f"not re-measured: {label}: {exc}")
            continue
        if on_pair is not None:
            on_pair(index, len(pairs), label)
        decided = None
        if decision is not None:
            done, decided, reason = decided_group(items, decision)
        else:
            done, reason = run_group(items, lambda _i, _case, _phase: None)
        if reason is not None:
            remarks.append(f"not re-measured: {label}: {reason}")
            continue
        change = apply_decision(paired_change(done[0][1], done[1][1], label, threshold, alpha), decided, metric)
        note = pairing_note(b, n, how)
        if note:
            change.notes.insert(0, note)
        changes.append(change)
    if pairs:
        remarks.insert(0, "re-measured now, both sides interleaved on this machine; the files' own figures unused")
    return Comparison(
        "p50",
        threshold,
        alpha=alpha,
        changes=changes,
        only_base=only_base,
        only_new=only_new,
        env_differences=[],
        remarks=remarks,
    )


def rerun_files(paths: Sequence[Path]) -> tuple[Side, Side]:
    """Read BASE and NEW as rebuildable sides."""
    from infermeter.results.io import read_results

    base, new = (load_side(path, read_results(path)) for path in paths)
    return base, new
