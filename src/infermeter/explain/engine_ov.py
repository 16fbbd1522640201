"""OpenVINO's profile for explain: a compiled model with PERF_COUNT on (the backend's own session, loaded with
its profiling options), each primitive's real time, exec type and status from `get_profiling_info`, and from the
runtime model (`get_runtime_model()`) the `originalLayersNames` each primitive fused and its `runtimePrecision`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from infermeter.backends.openvino_profile import WARMUP_RUNS, precision_word
from infermeter.explain.original import OriginalGraph, is_data_movement, walk_back
from infermeter.explain.records import Unit

# Layers that are the model's ends or its constants, not work.
BOOKKEEPING = ("Parameter", "Result", "Input", "Output", "Const", "Constant")
# Exec types of OpenVINO's reference (unoptimized) implementations.
REFERENCE_MARKS = ("ref", "reference")


def runtime_layers(compiled: Any) -> tuple[dict[str, tuple[list[str], str]], dict[str, list[str]]]:
    """Per runtime-model layer (friendly name): the original layer names it holds and its runtime precision; and
    which layers read each layer's outputs."""
    layers, readers = {}, defaultdict(list)
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        names = info["originalLayersNames"].astype(str) if "originalLayersNames" in info else ""
        precision = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else ""
        layers[op.get_friendly_name()] = ([n for n in names.split(",") if n], precision)
        for value in op.inputs():
            readers[value.get_source_output().get_node().get_friendly_name()].append(op.get_friendly_name())
    return layers, dict(readers)


def recover_unnamed(units: list[Unit], readers: dict[str, list[str]], original: OriginalGraph) -> list[Unit]:
    """Units whose original layer names are all made up (OpenVINO's `MVN_35` for a decomposed LayerNormalization)
    get the original nodes that feed the nearest named units reading them and that no other unit names: the
    nodes between this unit's named neighbours."""
    by_name = {u.name: u for u in units}
    claimed = {n for u in units for n in u.nodes}
    result = []
    for unit in units:
        if unit.nodes or not unit.executed or unit.kind != "compute":
            result.append(unit)
            continue
        todo, tensors = list(readers.get(unit.name, [])), []
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen or len(seen) > 8:
                continue
            seen.add(name)
            reader = by_name.get(name)
            if reader is not None and reader.nodes:
                tensors += [t for node in reader.nodes for t in original.inputs[node] if t not in original.constants]
            else:
                todo += readers.get(name, [])
        found = walk_back(original, tensors, set(), claimed)
        result.append(replace(unit, nodes=found) if found else unit)
    return result


def _nodes(names: list[str], original: OriginalGraph) -> tuple[str, ...]:
    found: list[str] = []
    for name in names:
        node = original.node_for(name)
        if node is not None and node not in found:
            found.append(node)
    return tuple(found)


def _read(request: Any) -> dict[str, tuple[str, str, str, float]]:
    found = {}
    for info in request.get_profiling_info():
        status = str(info.status).rsplit(".", 1)[-1]
        found[info.node_name] = (info.node_type, info.exec_type, status, info.real_time.total_seconds() * 1e6)
    return found


def counters(request: Any, run: Callable[[], object], iterations: int) -> dict[str, tuple[str, str, str, float]]:
    """Per primitive: (layer type, exec type, status, mean real µs of the profiled iterations).

    The CPU plugin reports each primitive's mean real time over every run of the request so far, the first run
    (which repacks weights, many times slower) included; so the counters are read after the warm-up and again
    after `iterations` more runs, and the mean of those runs alone is taken from the two running means."""
    for _ in range(WARMUP_RUNS):
        run()
    before = _read(request)
    for _ in range(iterations):
        run()
    after = _read(request)
    total = WARMUP_RUNS + iterations
    result = {}
    for name, (layer_type, exec_type, status, mean_us) in after.items():
        earlier = before.get(name, (layer_type, exec_type, status, 0.0))[3]
        result[name] = (layer_type, exec_type, status, max(0.0, (mean_us * total - earlier * WARMUP_RUNS) / iterations))
    return result


def ov_units(session: Any, prepared: Any, iterations: int, original: OriginalGraph) -> list[Unit]:
    """The units of an `OpenVinoSession` compiled with PERF_COUNT on: one per primitive (its mean over the
    profiled iterations: the plugin keeps no per-run figure), optimized-out ones kept at zero time (their nodes are
    accounted for, they cost nothing)."""
    layers, readers = runtime_layers(session.compiled_model)
    units = []
    per_node = counters(session.infer_request, lambda: session.run(prepared), iterations)
    for name, (layer_type, exec_type, status, mean_us) in per_node.items():
        if layer_type in BOOKKEEPING:
            continue
        names, precision = layers.get(name, ([name], ""))
        executed = status == "EXECUTED"
        word = precision_word(precision or exec_type)
        kind = "data_movement" if is_data_movement(layer_type) else "compute"
        text = f"{layer_type} {exec_type} ({word})" if executed else f"{layer_type} (optimized out)"
        time_us = mean_us if executed else 0.0
        units.append(
            Unit(
                name,
                _nodes(names or [name], original),
                time_us=time_us,
                kernel=text,
                op_type=layer_type,
                precision=word,
                kind=kind,
                executed=executed,
            )
        )
    return recover_unnamed(units, readers, original)
