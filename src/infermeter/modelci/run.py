"""One model's CI in one call: export, parity on each engine, the latency gate against the baseline."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from infermeter.modelci.config import CheckConfig
from infermeter.modelci.steps import Outcome
from infermeter.models.spec import ModelSpec


@dataclass(frozen=True)
class CheckReport:
    """What `infermeter check` found: the settings it ran with, each check's outcome, where and how long."""

    config: CheckConfig
    outcomes: tuple[Outcome, ...]
    started: str
    duration_s: float
    machine: str
    version: str

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped checks do not fail the run)."""
        return not any(outcome.failed for outcome in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        """The checks that failed, in the order they ran."""
        return [outcome for outcome in self.outcomes if outcome.failed]


def _machine() -> str:
    from infermeter.machine.environment import collect_environment

    env = collect_environment()
    return f"{env.get('cpu_model', '?')}, {env.get('physical_cores', '?')} physical cores, {env.get('os', '?')}"


def run_check(
    config: CheckConfig,
    export_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> CheckReport:
    """Run every check of `config` (checked first: UsageError for a bad setting, ModelError for a model that does
    not resolve). The exported ONNX file is written into `export_dir` when given, else into a temporary folder
    removed afterwards. `progress` is told what starts. A failing check is an outcome, never an exception."""
    from infermeter.modelci.baseline import baseline_ref
    from infermeter.modelci.steps import export_step, latency_step, parity_steps, same_outputs_step
    from infermeter.models.resolve import resolve_model
    from infermeter.results.schema import now_iso

    say = progress or (lambda _text: None)
    config.check()
    started, start = now_iso(), time.perf_counter()
    outcomes: list[Outcome] = []
    # The baseline first: a revision that does not exist is a usage error before minutes of work, not after.
    with baseline_ref(config.model, config.baseline) if config.baseline else nullcontext(None) as baseline:
        folder = export_dir or Path(tempfile.mkdtemp(prefix="infermeter-check-"))
        folder.mkdir(parents=True, exist_ok=True)
        try:
            spec = _load(config.model)
            if isinstance(spec, Outcome):
                return _report(config, [spec], started, start)
            base = resolve_model(baseline.ref) if baseline is not None and baseline.ref is not None else None
            say(f"exporting {config.model} to ONNX and verifying it")
            export, onnx_path = export_step(spec, folder, config)
            outcomes.append(export)
            say(f"checking parity on {', '.join(config.backends)}")
            outcomes.extend(parity_steps(spec, onnx_path, config))
            if base is None:
                why = baseline.description if baseline is not None else "no --baseline to compare with"
                outcomes.append(Outcome(f"latency {config.gate_backend}", "skip", why))
            else:
                if config.same_outputs:
                    say("comparing outputs with the baseline's")
                    outcomes.append(same_outputs_step(spec, base, config))
                say(f"measuring the baseline and the new model interleaved on {config.gate_backend}")
                outcomes.append(latency_step(spec, base, onnx_path, config))
        finally:
            if export_dir is None:
                shutil.rmtree(folder, ignore_errors=True)
    return _report(config, outcomes, started, start)


def _report(config: CheckConfig, outcomes: list[Outcome], started: str, start: float) -> CheckReport:
    from infermeter import __version__

    return CheckReport(config, tuple(outcomes), started, time.perf_counter() - start, _machine(), __version__)


def _load(model: str) -> ModelSpec | Outcome:
    """The model's spec, or a failed `load` outcome when its source exists but does not load: a change that
    breaks the model's import or factory is a failed check, not a usage error. A model that is not there at all
    is one (ModelError)."""
    from infermeter.core.errors import InfermeterError, ModelError
    from infermeter.modelci.baseline import model_source
    from infermeter.models.resolve import resolve_model

    try:
        return resolve_model(model)
    except ModelError as exc:
        try:
            source, _ = model_source(model)
        except InfermeterError:
            raise exc from None
        if not source.exists():
            raise
        return Outcome("load", "fail", str(exc))
