"""The plan of a generation sweep (`llm bench`): which cases run, in which order, and how each is run
by the one sweep (`measure.sweep.run_sweep`): alone until its stop rule, or interleaved with the other cases of
its comparison group (the backends and GGUF levels of one model, `GenerateCase.group_key`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from infermeter.build.case_build import BuildOutcome
from infermeter.core.case import MeasureSettings
from infermeter.llm.backends.base import GenerateCase, model_family
from infermeter.llm.generation_metrics import SLO
from infermeter.measure.burstworker import BurstWorker
from infermeter.measure.isolation import PhaseCallback
from infermeter.results.schema import CaseResult


@dataclass(frozen=True)
class GenerationMatrix:
    """The flags of a generation sweep, parsed and checked: every model × batch × backend, with the same request
    shape (`prompt_len`, `gen_len`), counts (`requests` at least, `warmup`), threads (resolved), backend options,
    case timeout and goodput SLO. `measure`: the stop rule and rounds (`--min-time`, `--max-time`, `--target-ci`,
    `--rounds`, `--no-interleave`), None for exactly `requests` requests per case."""

    models: tuple[str, ...]
    backends: tuple[str, ...]
    _: KW_ONLY  # the rest by keyword
    batches: tuple[int, ...] = (1,)
    prompt_len: int = 64
    gen_len: int = 32
    requests: int = 5
    warmup: int = 1
    threads: int = 1
    options: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 600.0
    seed: int = 0
    measure: MeasureSettings | None = None
    slo: SLO = field(default_factory=SLO)


@dataclass(frozen=True)
class GenerationItem:
    """One row of a generation sweep: its case (a chain of one) and the SLO its goodput is judged against; runs
    through the same sweep and interleaved rounds as an inference `PlanItem` (`measure.plan.SweepItem`)."""

    chain: tuple[GenerateCase, ...]
    slo: SLO = field(default_factory=SLO)

    @property
    def case(self) -> GenerateCase:
        """The case."""
        return self.chain[0]

    def unrunnable(self, index: int, built: BuildOutcome | None) -> CaseResult | None:
        """The `unavailable` result of a case that cannot run here, else None."""
        from infermeter.llm.runner import blank_generate_result, unavailable_reason

        reason = unavailable_reason(self.chain[index])
        return blank_generate_result(self.chain[index], "unavailable", reason) if reason else None

    def worker(self, index: int, on_phase: PhaseCallback, built: BuildOutcome | None) -> BurstWorker:
        """The case in a fresh worker, loading."""
        from infermeter.llm.runner import GenerationWorker

        return GenerationWorker(self.chain[index], self.slo, on_phase)

    def run_alone(self, index: int, on_phase: PhaseCallback, built: BuildOutcome | None, isolate: bool) -> CaseResult:
        """The case until its stop rule, in a worker of its own (`isolate`) or in this process."""
        from infermeter.llm.runner import execute_generate_case, run_generate_isolated

        case = self.chain[index]
        return run_generate_isolated(case, self.slo, on_phase) if isolate else execute_generate_case(case, self.slo)

    def recorded(self, result: CaseResult) -> None:
        """Nothing to add: a generation case's inputs are the shipped text."""


def generation_plan(matrix: GenerationMatrix) -> list[GenerationItem]:
    """The matrix in the order it runs: model family, batch, then the family's models (its GGUF levels) and the
    backends innermost, so that each comparison group is a run of consecutive items whose first case is the
    baseline. Each case carries only its own backend's options (`backends.options.options_for`)."""
    from infermeter.backends.options import options_for

    own = {name: options_for(name, matrix.options) for name in matrix.backends}
    families = list(dict.fromkeys(model_family(model) for model in matrix.models))
    items = []
    for family in families:
        members = [model for model in matrix.models if model_family(model) == family]
        for batch in matrix.batches:
            for model in members:
                for backend in matrix.backends:
                    case = GenerateCase(
                        model=model,
                        backend=backend,
                        prompt_len=matrix.prompt_len,
                        gen_len=matrix.gen_len,
                        batch=batch,
                        threads=matrix.threads,
                        requests=matrix.requests,
                        warmup=matrix.warmup,
                        options=own[backend],
                        timeout_s=matrix.timeout_s,
                        seed=matrix.seed,
                        measure=matrix.measure,
                    )
                    items.append(GenerationItem((case,), matrix.slo))
    return items


def matrix_to_dict(matrix: GenerationMatrix) -> dict[str, Any]:
    """The JSON form of a generation matrix (inside the results file's `plan` block)."""
    data = dataclasses.asdict(matrix)
    data["options"] = [list(kv) for kv in matrix.options]
    return data


def matrix_from_dict(data: dict[str, Any]) -> GenerationMatrix:
    """Inverse of `matrix_to_dict`; KeyError, TypeError or ValueError when it is not one."""
    from infermeter.measure.planfile import settings_from_json

    measure = data.get("measure")
    slo = data.get("slo") or {}
    return GenerationMatrix(
        models=tuple(str(m) for m in data["models"]),
        backends=tuple(str(b) for b in data["backends"]),
        batches=tuple(int(b) for b in data["batches"]),
        prompt_len=int(data["prompt_len"]),
        gen_len=int(data["gen_len"]),
        requests=int(data["requests"]),
        warmup=int(data["warmup"]),
        threads=int(data["threads"]),
        options=tuple((str(k), str(v)) for k, v in data.get("options", [])),
        timeout_s=float(data["timeout_s"]),
        seed=int(data.get("seed", 0)),
        measure=None if measure is None else settings_from_json(measure),
        slo=SLO(slo.get("ttft_ms"), slo.get("tpot_ms")),
    )


def run_together(cases: Sequence[GenerateCase], slo: SLO | None = None) -> list[CaseResult]:
    """`cases` measured as one comparison group, each in its own worker: in interleaved rounds (paired speedups
    over the first) unless their settings say `interleave=False` or their workers would not fit in memory, then
    one after the other. The results in the order of `cases`."""
    from infermeter.measure.interleave import run_group

    items = [GenerationItem((case,), slo or SLO()) for case in cases]
    if len(items) > 1 and items[0].case.settings.interleave:
        done, reason = run_group(items, lambda _index, _case, _phase: None)
        if reason is None:
            return [result for _, result, _ in done]
    return [item.run_alone(0, lambda _phase: None, None, isolate=True) for item in items]
