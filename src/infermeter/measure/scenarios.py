"""What a run measures, its scenario: the latency scenario (the stop rule over timed bursts, interleaved with the
other cases of its group), the soak (one long stream of requests per case, its memory over time its own), or the
cold start (a fresh process per pass, from nothing to its first result, without and with caches).

A case's scenario is chosen once from its settings (`scenario_of`: a soak with `bench --soak`); a plan's once from
the command (`bench --cold-start` turns the plan into cold-start passes, `measure.coldstart`; stored in the plan,
`stored_scenario`). The launcher (a fresh worker, or this process with --no-isolation) is the caller's choice; each
scenario says how its cases run under either and what the run around them does (the ONNX exports and builds first,
the roofline, the table shown), so no other module branches on which scenario runs. Generation runs its own cases
(`llm.runner`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.coldstart import cold_start_plan
from infermeter.measure.execute import PhaseCallback
from infermeter.measure.shapes import EVERY_SIZE
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:  # the plan's module runs its items through the scenarios
    from infermeter.measure.plan import PlanItem

# (model, case, phase callback, built artifact) -> the case's result; never raises for the case's own failures.
CaseRun = Callable[[ModelSpec, Case, PhaseCallback | None, Artifact | None], CaseResult]
# A plan's items -> the items the scenario runs (the same for all but a cold start).
PlanExpansion = Callable[[list["PlanItem"]], list["PlanItem"]]

# The tables `bench` shows after a run (`cli.bench`): the summary (and the soak's, when cases soaked), or the cold
# start's phases.
SUMMARY_TABLE = "summary"
COLD_START_TABLE = "cold_start"


def _as_planned(items: list[PlanItem]) -> list[PlanItem]:
    return items


@dataclass(frozen=True)
class Scenario:
    """One way of measuring: its name (stored in the plan) and the bench flag that asks for it, how its cases run
    in a fresh worker (`run_isolated`) or in this process (`run_in_process`), and what it needs of the run."""

    name: str
    flag: str  # "": the default
    _: KW_ONLY
    run_isolated: CaseRun
    run_in_process: CaseRun
    interleaved: bool = True  # its cases share interleaved rounds with the rest of their group
    # Each request draws its sizes from the whole --dynamic range (or --data's own lengths), as real traffic does,
    # rather than a case being measured at sizes spread over it.
    draws_sizes: bool = False
    isolated_only: bool = False  # each case needs a worker of its own: --no-isolation is refused
    expand: PlanExpansion = _as_planned  # the plan's items -> the ones it runs
    # The ONNX exports and the build stage run before any case; False where the case times them itself.
    prepare_first: bool = True
    roofline: bool = True  # achieved GFLOP/s against the machine's ceilings make sense of its figures
    no_repeat: str = ""  # why --repeat cannot go with it ("": it can)
    table: str = SUMMARY_TABLE  # what `bench` shows after the run

    @property
    def dynamic_points(self) -> int:
        """How many sizes of a --dynamic range its cases feed: 8 spread over the range, or every size."""
        return EVERY_SIZE if self.draws_sizes else 8


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


LATENCY = Scenario("latency", "", run_isolated=_latency_isolated, run_in_process=_latency_in_process)
SOAK = Scenario(
    "soak",
    "--soak",
    run_isolated=_soak_isolated,
    run_in_process=_soak_in_process,
    interleaved=False,
    draws_sizes=True,
    isolated_only=True,
)
# Each pass is a latency case in a fresh worker (a short loop after the first result), one after another: the
# conversion and build are what it times, and a throughput of ten samples says nothing of the machine's ceilings.
COLD_START = Scenario(
    "cold_start",
    "--cold-start",
    run_isolated=_latency_isolated,
    run_in_process=_latency_in_process,
    interleaved=False,
    isolated_only=True,
    expand=cold_start_plan,
    prepare_first=False,
    roofline=False,
    no_repeat="a cold start already times fresh processes",
    table=COLD_START_TABLE,
)
SCENARIOS = {scenario.name: scenario for scenario in (LATENCY, SOAK, COLD_START)}


def scenario_of(settings: MeasureSettings) -> Scenario:
    """The scenario cases with these settings run: a soak when they ask for one (`bench --soak`), else latency."""
    return SOAK if settings.soaking else LATENCY


def stored_scenario(plan: Mapping[str, Any]) -> Scenario:
    """The scenario a stored plan block names (`planfile`): its `scenario`, or an older plan's `cold_start` flag.
    KeyError for a name this infermeter does not know."""
    if "scenario" in plan:
        return SCENARIOS[str(plan["scenario"])]
    return COLD_START if bool(plan.get("cold_start", False)) else LATENCY
