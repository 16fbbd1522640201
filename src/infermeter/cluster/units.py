"""The plan cut into cluster tasks: one plan item per task, or a whole comparison group when it runs interleaved (its
cases are timed in turns in one process tree, so its pairs stay on one machine). Plain data: no Ray here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infermeter.measure.plan import PlanItem
from infermeter.measure.scenarios import LATENCY, Scenario
from infermeter.measure.sweep import comparison_groups


@dataclass(frozen=True)
class Unit:
    """What one task runs on one node: `items` (one, or an interleaved group's pending ones), with the plan's
    isolation and scenario (`measure.scenarios`). Every item of a unit shares the machine class and the thread
    count (both are part of the comparison group)."""

    items: tuple[PlanItem, ...]
    isolate: bool = True
    scenario: Scenario = LATENCY

    @property
    def machine(self) -> str | None:
        """The class of node this unit must run on (None: any node with a slot)."""
        return self.items[0].case.machine

    @property
    def threads(self) -> int:
        """The intra-op threads of the unit's cases."""
        return self.items[0].case.threads

    @property
    def label(self) -> str:
        """How a person sees the unit: its first case, and how many more run with it."""
        case = self.items[0].case
        more = f" +{len(self.items) - 1} interleaved" if len(self.items) > 1 else ""
        where = f" on {case.machine}" if case.machine else ""
        return f"{case.model} · {case.backend} {case.precision} b{case.batch}{more}{where}"


def plan_units(todo: Sequence[PlanItem], isolate: bool, scenario: Scenario = LATENCY) -> list[Unit]:
    """The pending items as tasks, in plan order: a comparison group of two or more runs as one unit when it is
    interleaved (the rule `measure.sweep.run_sweep` applies locally), each item alone otherwise."""
    units: list[Unit] = []
    for group in comparison_groups(todo):
        if isolate and len(group) > 1 and group[0].case.settings.interleave:
            units.append(Unit(tuple(group), isolate, scenario))
        else:
            units.extend(Unit((item,), isolate, scenario) for item in group)
    return units
