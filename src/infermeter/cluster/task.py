"""The node's side of `bench --cluster`: one Ray task runs one unit (`cluster.units`) through the same sweep
machinery as a local run, and sends back its cases as results-file dicts.

The task first says where it runs (node id, hostname, class label, when it took the slot), so that the driver knows
which node a lost task was on; then it runs the unit and returns each case with its `node` record (the node's
environment included). It asks no CPUs of Ray (`num_cpus=0`): the slot resource is what keeps a node to one case,
and a CPU request would only make Ray set the worker's thread variables to that count.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import ray

from infermeter.cluster import MACHINE_LABEL
from infermeter.cluster.session import label_value
from infermeter.cluster.units import Unit
from infermeter.machine.environment import new_results_file
from infermeter.results.records import NodeRecord, write_record


@dataclass(frozen=True)
class NodeStart:
    """Where and when a task took its node's slot: its first message to the driver."""

    node_id: str
    hostname: str
    machine: str | None
    held_from_s: float


def _this_node() -> NodeStart:
    context = ray.get_runtime_context()
    labels = context.get_node_labels() or {}
    return NodeStart(context.get_node_id(), platform.node(), label_value(labels, MACHINE_LABEL), time.time())


def run_here(unit: Unit, start: NodeStart) -> list[dict[str, Any]]:
    """Run `unit` on this node as a local sweep would (ONNX exports, build stage, isolated workers, interleaved
    rounds) and return its cases as results-file dicts, each with this node's record."""
    from infermeter.machine.environment import collect_environment
    from infermeter.measure.benchrun import SilentDisplay, prepare_onnx
    from infermeter.measure.isolation import set_thread_environment
    from infermeter.measure.sweep import run_sweep
    from infermeter.results.schema import case_to_dict

    # Ray set this worker's OMP_NUM_THREADS to the task's CPU request (1 for none): the unit's own count instead,
    # so that the exports here and the environment recorded say what the cases run with (each case's worker sets
    # it again before any framework loads, as it does locally).
    set_thread_environment(unit.threads)
    environment = collect_environment()
    results = new_results_file((), environment)
    if unit.scenario.prepare_first:  # not a cold start, which times the conversion itself
        prepare_onnx(unit.items, SilentDisplay())
    run_sweep(list(unit.items), results, None, unit.isolate, build_first=unit.scenario.prepare_first)
    record = NodeRecord(
        start.node_id,
        start.hostname,
        machine=start.machine,
        held_from_s=start.held_from_s,
        held_until_s=time.time(),
        environment=environment,
    )
    for case in results.cases:
        write_record(case, record)
    return [case_to_dict(case) for case in results.cases]


@ray.remote(num_cpus=0, max_retries=0)
def run_unit(unit: Unit) -> Iterator[tuple[str, Any]]:
    """The Ray task: ("started", NodeStart), then ("finished", [case dicts]). Never retried by Ray: the driver
    decides, knowing which node was lost (`cluster.driver`)."""
    start = _this_node()
    yield ("started", start)
    yield ("finished", run_here(unit, start))
