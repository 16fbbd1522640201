"""Step 6 of optimize: advice under the constraints (pick, runner-up, ONNX Runtime FP32 fallback), then the
deployable folder: deploy.json, DEPLOY.md and report.html."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import Any

from infermeter.advise.pick import Advice, advise
from infermeter.core.extras import install_line, missing_modules
from infermeter.deploy.manifest import BATCHING_DELAY_MS, MANIFEST_FORMAT, entry, render_deploy_md, write_manifest
from infermeter.optimize.candidates import evidence_reason
from infermeter.optimize.pipeline import Run
from infermeter.optimize.serving import MeasuredPolicy
from infermeter.optimize.steps.finalists import final_pool, finalists_lines
from infermeter.optimize.steps.fp32 import begin, finish, note, skip
from infermeter.report.summary import case_label
from infermeter.results.records import Accuracy, ParityRecord, read_record
from infermeter.results.schema import CaseResult


@dataclass(frozen=True)
class Outcome:
    """How the run ended: the advice (its `pick` is None when nothing met the constraints), the fallback, and the
    files written."""

    advice: Advice
    runner_up: CaseResult | None
    _: KW_ONLY  # the rest by keyword
    fallback: CaseResult | None
    baseline: CaseResult | None
    folder: Path
    report: Path
    deploy_md: Path | None
    explanation: list[str]
    serving: MeasuredPolicy | None = None  # the serving step's measured batching policy (`--serve`)


def constraints_text(run: Run) -> str:
    """`max accuracy drop 1 point, P99 <= 10 ms` for the report and DEPLOY.md."""
    request = run.request
    parts = [f"accuracy drop <= {request.max_accuracy_drop_pct:g} points"]
    if request.max_p99_ms is not None:
        parts.append(f"P99 <= {request.max_p99_ms:g} ms")
    if request.max_memory_mb is not None:
        parts.append(f"peak memory <= {request.max_memory_mb:g} MB")
    if request.max_load_s is not None:
        parts.append(f"load <= {request.max_load_s:g} s")
    return ", ".join(parts)


def step_advise(run: Run, baseline: CaseResult | None) -> Outcome:
    """6. Rank what was measured, name the pick, runner-up and fallback, and write the deployable folder."""
    begin(run, "advise", "the fastest configuration is worthless if it breaks a constraint: filter, rank by the "
          f"objective ({run.request.objective}), and keep a portable fallback")  # fmt: skip
    cases = []
    for case in run.measured():
        reason = evidence_reason(case, run.spec.default_precision)
        if reason:
            skip(run, "advise", case_label(case), reason)
        else:
            cases.append(case)
    cases, eliminated = final_pool(run, cases)
    request = run.request
    advice = advise(cases, request.constraints(), request.objective, request.price_per_hour, ruled_out=eliminated)
    runner_up = advice.ranked[1] if len(advice.ranked) > 1 else None
    fallback = run.fp32_case_of("onnxruntime")
    if fallback is not None and not fallback.ok:
        fallback = None
    # A finalist's figures are the group's, whatever role it plays (see optimize.steps_finalists).
    fallback = next((c for c in cases if fallback is not None and c.id == fallback.id), fallback)
    explanation = explain(advice, fallback, baseline, run.spec.default_precision)
    explanation[2:2] = finalists_lines(run, advice.pick, runner_up)
    details = run.journal.details("advise")
    details.update(
        {
            "pick": advice.pick.id if advice.pick else None,
            "runner_up": runner_up.id if runner_up else None,
            "fallback": fallback.id if fallback else None,
            "baseline": baseline.id if baseline else None,
            "explanation": explanation,
            "binding": [b.message for b in advice.binding],
            "excluded": [{"case": case_label(e.case), "reasons": e.reasons} for e in advice.excluded],
            "constraints": constraints_text(run),
            "objective": run.request.objective,
            "price_per_hour": run.request.price_per_hour,
            "costs": [cost.to_dict() for cost in advice.costs],
        }
    )
    for line in explanation:
        note(run, "advise", line)
    deploy_md = _write_deploy(run, advice, runner_up, fallback, baseline) if advice.pick else None
    if missing_modules(["plotly"]):
        note(run, "advise", f"report.md, not report.html: the HTML report needs plotly: {install_line('html')}")
    finish(run, "advise", "done" if advice.pick else "failed")
    report = write_report(run)
    return Outcome(
        advice,
        runner_up,
        fallback=fallback,
        baseline=baseline,
        folder=run.folder,
        report=report,
        deploy_md=deploy_md,
        explanation=explanation,
    )


UNVERIFIED = "Accuracy is unverified: this case carries no accuracy measurement."


def explain(advice: Advice, fallback: CaseResult | None, baseline: CaseResult | None, own: str = "fp32") -> list[str]:
    """advise's explanation, with what optimize knows beyond it: an FP32 pick (or one at the model's `own`
    precision: an INT8-by-design model's own graph) whose parity passed has its outputs proven equal to the
    reference; the fallback and the baseline named when the pick is one of them."""
    pick = advice.pick
    if pick is None:
        return list(advice.explanation)
    lines = []
    parity = read_record(pick, ParityRecord)
    for line in advice.explanation:
        if line == UNVERIFIED and pick.precision in ("fp32", own) and parity is not None and parity.passed:
            what = "FP32" if pick.precision == "fp32" else f"the model's own {own.upper()} graph"
            line = (
                f"Accuracy: {what} with outputs equal to the reference within the parity tolerance (no accuracy risk)."
            )
        elif line == UNVERIFIED and baseline is not None and pick.id == baseline.id:
            line = "Accuracy: this is the baseline itself (the reference)."
        lines.append(line)
    if fallback is not None and pick.id == fallback.id:
        lines.append("The pick is also the portable fallback (ONNX Runtime FP32).")
    return lines


def write_report(run: Run) -> Path:
    """report.html: the story section first, then the standard report of every case. Without plotly (the `html`
    extra), report.md: the standard report, every case compared (mixed precisions on purpose, as optimize does)."""
    from infermeter.report.merged import SourceFile, merge_results

    merged = merge_results([SourceFile(str(run.results_path.name), run.results)])
    if missing_modules(["plotly"]):
        from infermeter.report.markdown import render_markdown

        path, text = run.path("report.md"), render_markdown(merged, allow_mixed_precision=True)
    else:
        from infermeter.report.story import render_story_html

        path, text = run.path("report.html"), render_story_html(merged)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def caveats(run: Run, pick: CaseResult) -> list[str]:
    """What a deployer must know about the pick, from the measurements."""
    out = []
    phases = ", ".join(f"{k.removesuffix('_s')} {v:.2f} s" for k, v in pick.loading.load_phases_s.items())
    out.append(
        f"Cold start: loading took {pick.loading.load_s or 0:.2f} s ({phases or 'no phases recorded'}); the first "
        f"inference {pick.loading.first_inference_ms or 0:.1f} ms against a steady P50 of "
        f"{pick.latency_ms.p50 if pick.latency_ms else 0:.3g} ms (`infermeter bench --cold-start` measures fresh "
        "processes with and without caches)."
    )
    shapes = ", ".join(f"{k} {v}" for k, v in pick.shapes.input_shapes.items())
    dynamic = [f"{i.name}: {list(i.shape)}" for i in run.spec.inputs if any(isinstance(d, str) for d in i.shape)]
    out.append(
        f"Shapes: measured with {pick.shape_mode} shapes at {shapes}. The server runs dynamic batches of 1 to "
        f"{pick.batch} rows; other sizes were not measured"
        + (f" (the model's dynamic axes: {'; '.join(dynamic)})." if dynamic else ".")
    )
    accuracy = read_record(pick, Accuracy)
    if accuracy is not None:
        int8 = run.journal.details("int8").get("plain", {})
        random = " Calibrated on RANDOM inputs: pass --calib with real data before trusting it." if int8.get(
            "random_calibration") and pick.precision == "int8" else ""  # fmt: skip
        out.append(
            f"Accuracy evidence: {accuracy.metric} {accuracy.value:.4f} vs FP32 {accuracy.fp32_value:.4f} "
            f"(drop {accuracy.drop_pct:.2f} points) on {accuracy.eval_samples} evaluation samples.{random}"
        )
    parity = read_record(pick, ParityRecord)
    if parity is not None:
        verdict = "passed" if parity.passed else "FAILED"
        out.append(f"Parity against {parity.reference}: {verdict} ({parity.reason}).")
    if pick.precision == "fp32" and parity is None and accuracy is None:
        out.append("Outputs of this configuration are the reference itself (the baseline).")
    for warning in pick.warnings:
        out.append(f"Measurement warning {warning.code}: {warning.message}")
    env = run.results.environment
    out.append(
        f"Figures are for this machine ({env.get('cpu_model', 'unknown CPU')}, {pick.threads} threads) and the "
        "framework versions in results.json; re-measure on the target before relying on them."
    )
    return out


def with_serving(run: Run, outcome: Outcome, policy: MeasuredPolicy) -> Outcome:
    """deploy.json, DEPLOY.md and the report written again with the serving step's measured policy, which
    `serve DIR` and `deploy` then take."""
    _write_deploy(run, outcome.advice, outcome.runner_up, outcome.fallback, outcome.baseline, policy, "serving")
    run.save()
    return replace(outcome, report=write_report(run), serving=policy)


def _write_deploy(
    run: Run,
    advice: Advice,
    runner_up: CaseResult | None,
    fallback: CaseResult | None,
    baseline: CaseResult | None,
    policy: MeasuredPolicy | None = None,
    step: str = "advise",
) -> Path:
    pick = advice.pick
    assert pick is not None
    folder = run.folder
    source = run.spec.ref if run.spec.kind not in ("onnx", "openvino_ir") else str(Path(run.spec.ref).resolve())
    env = run.results.environment
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "source_model": run.request.model,
        "objective": run.request.objective,
        "constraints_text": constraints_text(run),
        "cpu": env.get("cpu_model", "unknown CPU"),
        "chosen": entry(pick, source, folder),
        "runner_up": entry(runner_up, source, folder) if runner_up else None,
        "fallback": entry(fallback, source, folder) if fallback else None,
        "baseline": entry(baseline, source, folder) if baseline and baseline.ok else None,
        "serving": policy.serving_block()
        if policy
        else {"max_batch": pick.batch, "max_delay_ms": BATCHING_DELAY_MS if pick.batch > 1 else 0.0},
    }
    if advice.price_per_hour is not None:
        manifest["price_per_hour"] = advice.price_per_hour
        manifest["chosen"]["cost_per_million"] = advice.cost_of(pick)
    write_manifest(folder, manifest)
    path = folder / "DEPLOY.md"
    notes = caveats(run, pick) + ([f"Serving: {policy.summary()}."] if policy else [])
    path.write_text(render_deploy_md(manifest, folder, notes))
    note(run, step, f"wrote {path.name}, deploy.json (serve with `infermeter serve {folder}`)")
    return path
