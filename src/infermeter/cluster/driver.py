"""The driver of `bench --cluster`: every pending unit (`cluster.units`) submitted as a Ray task at once, Ray's
scheduler giving each node one at a time (the slot), and each unit's cases written to the results file as its task
returns, so that an interruption or a dead node loses only what is in flight.

A task whose node dies (or whose worker Ray loses) is `lost`: it is submitted once more, kept off that node, on
another node of its class; lost twice, or with no other node to go to, its cases are recorded as `lost`, with the
nodes and the reasons. A task that fails in Python (infermeter missing on the node, a bug) is not retried: its cases
are `failed`, with the node and the error. Ctrl-C (or SIGTERM) cancels every task in flight and keeps what
finished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from infermeter import __version__
from infermeter.cluster import MACHINE_LABEL, NODE_ID_LABEL, SLOT_RESOURCE
from infermeter.cluster.session import slot_nodes
from infermeter.cluster.task import NodeStart, run_unit
from infermeter.cluster.units import Unit
from infermeter.core.errors import describe_exception
from infermeter.measure.execute import blank_result
from infermeter.measure.plan import PlanItem
from infermeter.measure.scenarios import Scenario
from infermeter.measure.sweep import SweepEvent
from infermeter.results.io import write_results
from infermeter.results.records import LostAttempt, NodeRecord, read_record, write_record
from infermeter.results.schema import CaseResult, ResultsFile, case_from_dict, now_iso

# How often the wait for the next message wakes up (a Ctrl-C is seen between waits).
WAIT_S = 0.5
# A unit is tried this many times in all when its node is lost under it.
ATTEMPTS = 2
# The leading hex digits of a node id shown in progress (hostnames repeat: containers, one machine's test nodes).
NODE_ID_SHOWN = 8


@dataclass
class Flight:
    """A unit's task in flight: where it runs once it has said (`start`), and the attempts lost before it."""

    unit: Unit
    lost: tuple[LostAttempt, ...] = ()
    start: NodeStart | None = None


def task_options(unit: Unit, avoid_node: str | None = None) -> dict[str, Any]:
    """The Ray options of a unit's task: one slot, on a node of its class, never on `avoid_node`."""
    selector: dict[str, str] = {}
    if unit.machine is not None:
        selector[MACHINE_LABEL] = unit.machine
    if avoid_node:
        selector[NODE_ID_LABEL] = f"!{avoid_node}"
    options: dict[str, Any] = {"resources": {SLOT_RESOURCE: 1}, "name": f"infermeter {unit.label}"}
    if selector:
        options["label_selector"] = selector
    return options


def _reason(exc: BaseException) -> str:
    """`TypeName: first sentence` of Ray's error (its messages go on with debugging advice)."""
    first = str(exc).strip().split(". ")[0].splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class ClusterSweep:
    """The units of one sweep on the connected cluster, recorded into `results` (and `path`) as they return.
    `positions` maps each plan item (by id) to its index in the plan, for the progress events."""

    def __init__(
        self,
        results: ResultsFile,
        path: Path | None,
        positions: dict[int, int],
        on_event: Callable[[SweepEvent], None],
        warn: Callable[[str], None],
    ) -> None:
        self.results, self.path, self.positions = results, path, positions
        self.on_event, self.warn = on_event, warn
        self.in_flight: dict[Any, Flight] = {}
        self._versions_checked: set[str] = set()

    def run(self, units: Sequence[Unit]) -> None:
        """Submit every unit, then record each as it returns; on any interrupt, cancel what is in flight."""
        try:
            for unit in units:
                self._submit(Flight(unit))
            while self.in_flight:
                ready, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=WAIT_S)
                for generator in ready:
                    self._receive(generator)
        except BaseException:
            self.cancel()
            raise

    def cancel(self) -> None:
        """Stop every task in flight at once (its node's case worker dies with it)."""
        for generator in self.in_flight:
            with contextlib.suppress(Exception):
                ray.cancel(generator, force=True)
        self.in_flight.clear()

    def _submit(self, flight: Flight) -> None:
        avoid = flight.lost[-1].node_id if flight.lost else None
        generator = run_unit.options(**task_options(flight.unit, avoid)).remote(flight.unit)
        self.in_flight[generator] = replace(flight, start=None)
        self._phase(flight.unit, "waiting for a node")

    def _receive(self, generator: Any) -> None:
        flight = self.in_flight[generator]
        try:
            kind, payload = ray.get(next(generator))
        except StopIteration:
            del self.in_flight[generator]
            return
        except RayTaskError as exc:  # the task's own Python error: it would fail the same way anywhere
            del self.in_flight[generator]
            cause = getattr(exc, "cause", None) or exc
            self._unrun(flight, "failed", f"on node {self._where(flight)}: {describe_exception(cause)}", flight.lost)
            return
        except RayError as exc:  # the node died, or Ray lost the task's worker
            del self.in_flight[generator]
            self._lost(flight, _reason(exc))
            return
        if kind == "started":
            flight.start = payload
            where = f"{payload.hostname} [{payload.node_id[:NODE_ID_SHOWN]}]"
            self._phase(flight.unit, f"running on {where} ({self._running()} running)")
        else:
            del self.in_flight[generator]
            self._finished(flight, payload)

    def _running(self) -> int:
        return sum(1 for flight in self.in_flight.values() if flight.start is not None)

    @staticmethod
    def _where(flight: Flight) -> str:
        return flight.start.hostname if flight.start is not None else "(not yet known)"

    def _lost(self, flight: Flight, reason: str) -> None:
        start = flight.start
        attempt = LostAttempt(
            start.node_id if start else "", start.hostname if start else "", flight.unit.machine, reason, now_iso()
        )
        lost = (*flight.lost, attempt)
        others = [n for n in slot_nodes() if n.node_id != attempt.node_id and flight.unit.machine in (None, n.machine)]
        if len(lost) < ATTEMPTS and others:
            self._phase(flight.unit, f"lost on {attempt.hostname or 'its node'} ({reason}); retrying on another node")
            self._submit(Flight(flight.unit, lost))
            return
        why = reason if others else f"{reason}; no other live node of its class to retry on"
        self._unrun(flight, "lost", f"lost with node {attempt.hostname or '(unknown)'}: {why}", lost)

    def _unrun(self, flight: Flight, status: str, error: str, lost: tuple[LostAttempt, ...]) -> None:
        """Record every case of the flight's unit as `status` (it ran nowhere to the end), with its last node."""
        start = flight.start
        node = NodeRecord(
            start.node_id if start else "",
            start.hostname if start else "",
            machine=start.machine if start else flight.unit.machine,
            held_from_s=start.held_from_s if start else 0.0,
            held_until_s=None,
            lost=lost,
        )
        for item in flight.unit.items:
            result = blank_result(item.spec, item.case, status, error)
            write_record(result, node)
            self._record(item, result)

    def _finished(self, flight: Flight, payload: list[dict[str, Any]]) -> None:
        items = {case.id: item for item in flight.unit.items for case in item.chain}
        for data in payload:
            result = case_from_dict(data)
            node = read_record(result, NodeRecord)
            if node is not None and flight.lost:
                write_record(result, replace(node, lost=flight.lost))
                where = ", ".join(f"{a.hostname or '(unknown node)'} ({a.reason})" for a in flight.lost)
                result.notes.append(f"retried on {node.hostname}: lost before with {where}")
            if node is not None:
                self._check_version(node)
            self._record(items[result.id], result)

    def _record(self, item: PlanItem, result: CaseResult) -> None:
        self.results.cases.append(result)
        if self.path is not None:
            write_results(self.path, self.results)
        position = self.positions[id(item)]
        self.on_event(SweepEvent("done", position, len(self.positions), item.case, result=result))

    def _phase(self, unit: Unit, text: str) -> None:
        for item in unit.items:
            position = self.positions[id(item)]
            self.on_event(SweepEvent("phase", position, len(self.positions), item.case, phase=text))

    def _check_version(self, node: NodeRecord) -> None:
        if node.node_id in self._versions_checked:
            return
        self._versions_checked.add(node.node_id)
        there = node.environment.get("frameworks", {}).get("infermeter")
        if there is not None and there != __version__:
            self.warn(f"node {node.hostname} runs infermeter {there}, this driver {__version__}: install one version")


def run_on_cluster(
    items: Sequence[PlanItem],
    todo: Sequence[PlanItem],
    results: ResultsFile,
    path: Path | None,
    isolate: bool,
    scenario: Scenario,
    on_event: Callable[[SweepEvent], None],
    warn: Callable[[str], None],
) -> None:
    """Run `todo` (the pending part of the plan `items`) on the connected cluster, appending each case to
    `results` and rewriting `path` atomically as each task returns; the plan's other items are reported skipped."""
    from infermeter.cluster.units import plan_units

    positions = {id(item): index for index, item in enumerate(items)}
    pending = {id(item) for item in todo}
    for item in items:
        if id(item) not in pending:
            on_event(SweepEvent("skipped", positions[id(item)], len(items), item.case))
    ClusterSweep(results, path, positions, on_event, warn).run(plan_units(todo, isolate, scenario))
