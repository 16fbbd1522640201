"""The checks of `infermeter check`, each one call into the command that owns it.

- export: `export.export_model` (torch.export-based exporter with the TorchScript-based fallback, ONNX checker,
  strict shape inference, outputs against PyTorch, every dynamic axis run at two more sizes), plus where in the
  model an unsupported operator is called (`models.op_origin`);
- parity: `parity.run.check_backend` per engine against the PyTorch reference, the engines that read ONNX served
  the exported file (what the team deploys), the others the model itself;
- latency: the baseline and the new model as one interleaved group of two, measured until the sequential
  decision of `compare --rerun` (`decision_rounds.decided_group`): fails on a slowdown of the threshold, or when
  the budget of rounds ends undecided (*unknown*: a gate that cannot tell must not pass). Engines that read
  ONNX measure both sides' exported files (the baseline's from the conversion cache);
- same outputs (opt-in): the new model's PyTorch outputs against the baseline's on the same inputs.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from infermeter.compare.verdict import CaseChange
from infermeter.core.case import Case, MeasureSettings
from infermeter.core.errors import InfermeterError, describe_exception
from infermeter.modelci.config import CheckConfig
from infermeter.models.inputs import Feeds
from infermeter.models.spec import ModelSpec

STATUSES = ("pass", "fail", "skip")


@dataclass(frozen=True)
class Outcome:
    """One check: `status` pass, fail or skip; `reason` one line a person reads first; `details` the lines under
    it (the export's own checks, a backend's traceback); `change` the latency comparison, when measured."""

    name: str
    status: str
    reason: str
    details: tuple[str, ...] = ()
    seconds: float = 0.0
    change: CaseChange | None = None

    @property
    def failed(self) -> bool:
        """True when the check failed."""
        return self.status == "fail"


def _safe_name(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text).strip("_") or "model"


def export_step(spec: ModelSpec, folder: Path, config: CheckConfig) -> tuple[Outcome, Path | None]:
    """Export `spec` to ONNX in `folder` and verify it; the outcome and the file (None when no file was made)."""
    from infermeter.export.torch_export import export_model

    start = time.perf_counter()
    if not spec.has_torch_form:
        reason = f"{spec.ref} is already a {spec.kind} file: nothing to export"
        return Outcome("export", "skip", reason), Path(spec.path) if spec.kind == "onnx" and spec.path else None
    output = folder / f"{_safe_name(spec.name)}.onnx"
    report = export_model(spec, output, simplify=False, samples=config.samples)
    # Simplification is `infermeter export`'s option, off here: the file checked is the file the engines measure.
    details = tuple(f"{c.name}: {c.status}: {c.detail}" for c in report.checks if c.name != "simplify")
    seconds = time.perf_counter() - start
    failed = [c for c in report.checks if c.status == "fail"]
    if report.unsupported_op:
        where = f", called in {'; '.join(report.unsupported_op_modules)}" if report.unsupported_op_modules else ""
        reason = f"operator {report.unsupported_op} is not supported by the ONNX exporters{where}"
        return Outcome("export", "fail", reason, details, seconds), None
    exported = output if output.is_file() and not any(c.name == "export" for c in failed) else None
    if failed:
        return Outcome("export", "fail", "; ".join(f"{c.name}: {c.detail}" for c in failed), details, seconds), exported
    axes = ", ".join(f"{n}:{a}={label}" for n, named in report.dynamic_axes.items() for a, label in named.items())
    reason = (
        f"{report.exporter} exporter, opset {report.opset}; dynamic axes {axes or 'none'}; outputs match PyTorch "
        f"(max abs error {report.max_abs_error or 0:.3g})"
    )
    return Outcome("export", "pass", reason, details, seconds), exported


def _feeds(spec: ModelSpec, config: CheckConfig) -> list[Feeds]:
    from infermeter.parity.data import random_feeds

    return random_feeds(spec, config.batch, (), config.samples, seed=0)


def _case(spec: ModelSpec, backend: str, config: CheckConfig, settings: MeasureSettings | None = None) -> Case:
    from infermeter.models.inputs import resolve_shapes
    from infermeter.results.env import default_threads

    shapes = tuple(resolve_shapes(spec.inputs, config.batch).items())
    threads = config.threads or default_threads()
    return Case(
        spec.ref,
        backend,
        precision="fp32",
        batch=config.batch,
        shape_mode="static",
        threads=threads,
        input_shapes=shapes,
        settings=settings or MeasureSettings(),
    )


def reads_onnx(backend: str) -> bool:
    """True when `backend` loads ONNX files (it is served the exported file rather than the model)."""
    from infermeter.backends.registry import get_backend

    return ".onnx" in get_backend(backend).model_files


def parity_steps(spec: ModelSpec, onnx_path: Path | None, config: CheckConfig) -> list[Outcome]:
    """One outcome per engine of `config.backends`: its outputs against the reference on seeded random inputs."""
    from infermeter.parity import default_tolerance
    from infermeter.parity.run import candidate_spec, check_backend, choose_reference, reference_outputs

    tolerance = default_tolerance("fp32")
    try:
        reference = choose_reference(spec, None)
        feeds = _feeds(spec, config)
        expected = reference_outputs(spec, _case(spec, config.backends[0], config), feeds, reference)
    except InfermeterError as exc:
        return [Outcome(f"parity {name}", "fail", str(exc)) for name in config.backends]
    outcomes = []
    for name in config.backends:
        start = time.perf_counter()
        served = None
        if reads_onnx(name) and spec.kind != "onnx":
            if onnx_path is None:
                outcomes.append(Outcome(f"parity {name}", "skip", "no ONNX file to serve it: the export failed"))
                continue
            try:
                served = candidate_spec(spec, onnx_path)
            except InfermeterError as exc:
                outcomes.append(Outcome(f"parity {name}", "fail", f"the exported file cannot be served: {exc}"))
                continue
        record = check_backend(spec, _case(spec, name, config), feeds, expected, reference, tolerance, served=served)
        first, _, rest = record.reason.partition("\n")
        status = "pass" if record.status == "pass" else "fail"
        what = "the exported ONNX file" if served is not None else spec.ref
        reason = f"{what} against {reference} on {len(feeds)} input sets: {first}"
        details = tuple(line for line in rest.splitlines() if line.strip())
        outcomes.append(Outcome(f"parity {name}", status, reason, details, time.perf_counter() - start))
    return outcomes


def _measured_spec(spec: ModelSpec, backend: str, onnx_path: Path | None) -> ModelSpec:
    """What `backend` measures of `spec`: the exported file for engines that read ONNX, else the model."""
    from infermeter.models.convert import onnx_for
    from infermeter.models.resolve import resolve_model

    if not reads_onnx(backend) or spec.kind == "onnx":
        return spec
    return resolve_model(str(onnx_path if onnx_path is not None else onnx_for(spec).path))


def latency_step(spec: ModelSpec, base: ModelSpec, onnx_path: Path | None, config: CheckConfig) -> Outcome:
    """The new model against the baseline on `config.gate_backend`, interleaved, judged on per-round ratios."""
    from infermeter.compare.decision_rounds import apply_decision, decided_group
    from infermeter.compare.rerun import SIDE_OPTION, paired_change
    from infermeter.measure.plan import PlanItem

    backend = config.gate_backend
    name = f"latency {backend}"
    start = time.perf_counter()
    if reads_onnx(backend) and spec.has_torch_form and onnx_path is None:
        return Outcome(name, "skip", "no ONNX file to measure: the export failed")
    # Rounds go on until the sequential decision (at least config.rounds, at most config.budget_rounds); the
    # precision target does not stop them (target_ci 0).
    settings = MeasureSettings(
        min_time_s=config.min_time_s, max_time_s=config.max_time_s, rounds=config.rounds, seed=0, target_ci=0.0
    )
    items = []
    for side, model, exported in (("base", base, None), ("new", spec, onnx_path)):
        try:
            measured = _measured_spec(model, backend, exported)
        except InfermeterError as exc:
            # A baseline that cannot be exported (the change fixes that) leaves nothing to compare with: not a
            # failure of the change.
            status = "skip" if side == "base" else "fail"
            return Outcome(name, status, f"the {side} model cannot be measured on {backend}: {exc}")
        # The shapes from the model's own inputs (an ONNX file's symbolic dims have no default sizes); the side tag
        # keeps two identical cases two items, as in `compare --rerun`.
        case = replace(_case(model, backend, config, settings), model=measured.ref, options=((SIDE_OPTION, side),))
        items.append(PlanItem(measured, (case,)))
    done, decision, why_not = decided_group(items, config.decision_params())
    seconds = time.perf_counter() - start
    if why_not is not None:
        return Outcome(name, "fail", f"not measured: {why_not}", (), seconds)
    label = f"{spec.name} {backend} fp32 b{config.batch}"
    change = apply_decision(paired_change(done[0][1], done[1][1], label, config.threshold, config.alpha), decision)
    return Outcome(name, _latency_status(change), describe_change(change, config), tuple(change.notes), seconds, change)


def _latency_status(change: CaseChange) -> str:
    if change.ratio is None or change.verdict == "precision differs":
        return "fail"  # not measured: a gate that cannot measure must not pass silently
    return "fail" if change.regression or change.undecided else "pass"


def describe_change(change: CaseChange, config: CheckConfig) -> str:
    """One line: the ratio with its interval, p, and what it means against the threshold (with a sequential
    decision: its outcome, the ratio and interval it reached, its rounds and why it stopped)."""
    if change.ratio is None:
        return "; ".join(change.notes) or f"not measured ({change.verdict})"
    if change.decision is not None:
        verdicts = {
            "slower": f"decided slower by the {config.threshold:.0%} threshold",
            "faster": f"decided faster by the {config.threshold:.0%} threshold",
            "same": f"decided: no {config.threshold:.0%} change",
            "unknown": "undecided within the budget, which fails the gate (docs/regression-gate.md)",
        }
        return f"{verdicts.get(change.verdict, change.verdict)}: {change.decision.summary()}"
    low, high = change.ratio_ci95 or (change.ratio, change.ratio)
    figures = (
        f"new/base P50 {change.ratio:.3f}x [95% CI {low:.3f}, {high:.3f}] over {change.replicates[0]} interleaved "
        f"rounds, p={change.p_value:.2g}"
    )
    if change.regression:
        verdict = f"significantly slower, beyond the {config.threshold:.0%} threshold"
    elif change.verdict == "slower":
        verdict = f"significantly slower but within the {config.threshold:.0%} threshold"
    elif change.verdict == "faster":
        verdict = "significantly faster"
    else:
        verdict = f"no significant change at alpha {config.alpha:g}"
    return f"{figures}: {verdict}"


def same_outputs_step(spec: ModelSpec, base: ModelSpec, config: CheckConfig) -> Outcome:
    """The new model's PyTorch outputs against the baseline's on the same seeded inputs (fp32 tolerance)."""
    from infermeter.parity import default_tolerance, judge
    from infermeter.parity.run import choose_reference, compare_samples, reference_outputs

    start = time.perf_counter()
    if [(i.name, i.shape, i.dtype) for i in spec.inputs] != [(i.name, i.shape, i.dtype) for i in base.inputs]:
        return Outcome("same outputs", "fail", "the model's inputs differ from the baseline's")
    tolerance = default_tolerance("fp32")
    try:
        feeds = _feeds(spec, config)
        reference = choose_reference(base, None)
        expected = reference_outputs(base, _case(base, reference, config), feeds, reference)
        got = reference_outputs(spec, _case(spec, reference, config), feeds, choose_reference(spec, None))
    except InfermeterError as exc:
        return Outcome("same outputs", "fail", describe_exception(exc))
    passed, reason, _ = judge(compare_samples(spec.output_names, expected, got, tolerance), tolerance)
    status = "pass" if passed else "fail"
    return Outcome("same outputs", status, f"against the baseline: {reason}", (), time.perf_counter() - start)
