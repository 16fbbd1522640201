"""What a case's run measures, its scenario, chosen once from its settings: the latency scenario (the stop rule over
timed bursts, interleaved with the other cases of its group) or the soak (one long stream of requests per case, its
memory over time its own). The launcher (a fresh worker, or this process with --no-isolation) is the caller's
choice; each scenario says how it runs under either, so no other module branches on which scenario a case runs.
A cold start is a plan of its own (`measure.coldstart`), and generation runs its own cases (`llm.runner`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.execute import PhaseCallback
from infermeter.measure.shapes import EVERY_SIZE
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult

# (model, case, phase callback, built artifact) -> the case's result; never raises for the case's own failures.
CaseRun = Callable[[ModelSpec, Case, PhaseCallback | None, Artifact | None], CaseResult]


@dataclass(frozen=True)
class Scenario:
    """One way of measuring a case: its name, whether its cases share interleaved rounds, and how it runs in a
    fresh worker (`run_isolated`) or in this process (`run_in_process`)."""

    name: str
    interleaved: bool
    run_isolated: CaseRun
    run_in_process: CaseRun
    # How many sizes of a --dynamic range its cases feed: 8 spread over the range, or every size (a soak draws from
    # every size of the range, as real traffic does).
    dynamic_points: int = 8


def _latency_isolated(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None, artifact: Artifact | None
) -> CaseResult:
    from infermeter.measure.burstworker import run_worker_until_stopped
    from infermeter.measure.latency_worker import CaseWorker

    return run_worker_until_stopped(CaseWorker(spec, case, on_phase, artifact), case.settings)


def _latency_in_process(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None, artifact: Artifact | None
) -> CaseResult:
    from infermeter.measure.execute import execute_case

    return execute_case(spec, case, on_phase, artifact)


def _soak_isolated(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None, artifact: Artifact | None
) -> CaseResult:
    from infermeter.measure.soak_run import run_soak

    return run_soak(spec, case, on_phase, artifact)


def _soak_in_process(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None, artifact: Artifact | None
) -> CaseResult:
    from infermeter.measure.soak_case import soak_case

    return soak_case(spec, case, artifact, on_phase)


LATENCY = Scenario("latency", interleaved=True, run_isolated=_latency_isolated, run_in_process=_latency_in_process)
SOAK = Scenario(
    "soak", interleaved=False, run_isolated=_soak_isolated, run_in_process=_soak_in_process, dynamic_points=EVERY_SIZE
)


def scenario_of(settings: MeasureSettings) -> Scenario:
    """The scenario cases with these settings run: a soak when they ask for one (`bench --soak`), else latency."""
    return SOAK if settings.soaking else LATENCY
