"""TorchScript's profile for explain (backend `torchscript`): `torch.profiler` with `with_modules=True` on the
backend's own traced, frozen (and by default optimized) module. The trace gives each operator the module
hierarchy it was traced from (`TOP(Net)::forward.body(Sequential)::forward.0(Block)::forward.conv(Conv2d)::
forward.`), so each operator's time goes to a module, and the modules become units matched to the exported ONNX
nodes exactly as torch eager's are (`engine_torch.nodes_by_module`, `engine_torch.merged_units`).

Freezing and `optimize_for_inference` rewrite part of the graph: a convolution becomes a `prim::mkldnn_convolution`
the profiler does not record (its time is a gap between recorded operators), a Linear a `matmul` with no module
scope (`TOP(Net)::forward.`). That time is placed by order: one eager run of the same module records the order of
its module calls, and the time between two scoped operators goes to the modules the eager run called, whole,
between them that TorchScript never shows a scope for. When operators with no scope ran there (they may be the
next module's own code, rewritten), those modules and the next operator's module are one unit: the block is
coarser rather than wrong. What runs after the last scoped operator goes with the modules called after it and
the model's own code."""

from __future__ import annotations

import json
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.explain.engine_torch import WARMUP_RUNS, merged_units, module_children, nodes_by_module
from infermeter.explain.original import OriginalGraph
from infermeter.explain.records import Unit

# One level of an operator's module hierarchy: `instance(Type)::method.` (the first is `TOP(Type)::forward.`).
LEVEL = re.compile(r"([^.()]+)\(([^()]*)\)::[^.]*\.")
# Layout conversions optimize_for_inference inserts around MKLDNN operators.
LAYOUT_OPS = frozenset({"aten::to_mkldnn", "aten::to_dense"})
LAYOUT_UNIT = "(layout conversions)"
# Trace times are whole ns written in µs: an operator starting this close to the end of the one before follows it.
EPSILON_US = 1e-6


@dataclass(frozen=True)
class TracedOp:
    """A top-level operator of one TorchScript run: its name, µs span, and module (None: no module scope)."""

    name: str
    start_us: float
    duration_us: float
    module: str | None


@dataclass(frozen=True)
class TracedRun:
    """One run of the module: its span in µs and its top-level operators in order."""

    start_us: float
    end_us: float
    ops: list[TracedOp]


def call_tokens(module: Any, run: Callable[[], object]) -> list[tuple[str, bool]]:
    """One eager run's module calls as (module name, entering) tokens, in order (hooks off afterwards)."""
    tokens: list[tuple[str, bool]] = []
    handles = []
    for name, sub in module.named_modules():
        handles.append(sub.register_forward_pre_hook(lambda *_, n=name: tokens.append((n, True))))
        handles.append(sub.register_forward_hook(lambda *_, n=name: tokens.append((n, False))))
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return tokens


def module_of_hierarchy(hierarchy: str, types: dict[str, str]) -> str | None:
    """The qualified module name an operator's hierarchy names (`body.0.conv`), None when it names only the
    model (no module scope). A level names an attribute of the module above it, or an entry of a container
    that was never called itself (`0(EncoderLayer)` for `layers.0` of a ModuleList): the shortest such path
    with that type."""
    levels = LEVEL.findall(hierarchy)[1:]  # the first level is the model itself (TOP)
    path = ""
    for instance, kind in levels:
        prefix = f"{path}." if path else ""
        direct = prefix + instance
        if direct in types:
            path = direct
            continue
        inside = [n for n in types if n.startswith(prefix) and n.endswith(f".{instance}") and types[n] == kind]
        if not inside:
            break
        path = min(inside, key=lambda n: n.count("."))
    return path or None


def traced_runs(trace: dict[str, Any], types: dict[str, str]) -> list[TracedRun]:
    """The runs of a chrome trace (`export_chrome_trace`): each outermost `forward` operator, with the outermost
    operators inside it (what nests inside those is their own work)."""
    events = sorted(
        (e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and e.get("cat") == "cpu_op"),
        key=lambda e: (float(e["ts"]), -float(e["dur"])),
    )
    runs: list[TracedRun] = []
    for event in events:
        start, duration = float(event["ts"]), float(event["dur"])
        current = runs[-1] if runs else None
        if current is not None and start < current.end_us:
            if not current.ops or start >= _end(current.ops[-1]) - EPSILON_US:
                module = module_of_hierarchy(str(event.get("args", {}).get("Module Hierarchy", "")), types)
                current.ops.append(TracedOp(str(event["name"]), start, duration, module))
        elif event["name"] == "forward":
            runs.append(TracedRun(start, start + duration, []))
    return runs


def _end(op: TracedOp) -> float:
    return op.start_us + op.duration_us


class CallOrder:
    """The eager run's module calls, to place a TorchScript operator's time: which module is innermost after
    each token, where each call of a module (the model's own left out) begins and ends, and which modules
    TorchScript shows a scope for (`seen`)."""

    def __init__(self, tokens: list[tuple[str, bool]], seen: set[str]) -> None:
        self.seen = seen
        self.innermost: list[str] = []
        self.calls: list[tuple[str, int, int]] = []  # module, index of its enter token, of its exit token
        stack: list[tuple[str, int]] = []
        for index, (name, entering) in enumerate(tokens):
            if entering:
                stack.append((name, index))
            elif stack:
                module, begin = stack.pop()
                if module:
                    self.calls.append((module, begin, index))
            self.innermost.append(stack[-1][0] if stack else "")
        self.calls.sort(key=lambda call: call[1])
        self.enters = {index for name, index, _ in self.calls if name in seen}
        self._places: dict[tuple[int, str], int] = {}

    def place(self, pointer: int, module: str) -> int:
        """The token after which `module`'s operator ran: the latest point inside `module`, from the first one at
        or after `pointer` up to the next call of a module TorchScript shows (`pointer` when there is none)."""
        if (pointer, module) not in self._places:
            self._places[pointer, module] = self._place(pointer, module)
        return self._places[pointer, module]

    def _place(self, pointer: int, module: str) -> int:
        size = len(self.innermost)
        first = next((i for i in range(max(pointer, 0), size) if self.innermost[i] == module), None)
        if first is None:
            return pointer
        last = first
        for index in range(first + 1, size):
            if index in self.enters:
                break
            if self.innermost[index] == module:
                last = index
        return last

    def unseen_between(self, pointer: int, until: int) -> tuple[str, ...]:
        """The modules TorchScript shows no scope for whose calls ran whole between the two tokens."""
        found = [m for m, begin, end in self.calls if pointer < begin and end <= until and m not in self.seen]
        return tuple(dict.fromkeys(found))


def run_times(run: TracedRun, order: CallOrder) -> dict[tuple[str, ...], float]:
    """One run's µs per unit key (a module, or modules run together) and on LAYOUT_UNIT. Each scoped operator's
    time goes to its module. The time before it (gaps: operators the profiler does not record; operators with no
    scope) goes to the unseen modules called whole since the operator before, joined with this operator's
    module when operators with no scope ran there (they may be that module's own, rewritten), else to this
    operator's module."""
    times: dict[tuple[str, ...], float] = defaultdict(float)
    pointer, pending, unscoped, clock = -1, 0.0, False, run.start_us
    for op in run.ops:
        gap, clock = max(op.start_us - clock, 0.0), _end(op)
        if op.module is None:
            if op.name in LAYOUT_OPS:
                times[(LAYOUT_UNIT,)] += op.duration_us
                pending += gap
            else:
                pending, unscoped = pending + gap + op.duration_us, True
            continue
        until = order.place(pointer, op.module)
        unseen = order.unseen_between(pointer, until)
        if unseen and not unscoped:
            times[unseen] += pending + gap
            times[(op.module,)] += op.duration_us
        else:
            times[(*unseen, op.module)] += pending + gap + op.duration_us
        pointer, pending, unscoped = until, 0.0, False
    times[(*order.unseen_between(pointer, len(order.innermost)), "")] += pending + max(run.end_us - clock, 0.0)
    return times


def profiled_runs(run: Callable[[], object], iterations: int, types: dict[str, str]) -> list[TracedRun]:
    """`iterations` runs under torch.profiler with module hierarchies, read back from its chrome trace."""
    import torch

    for _ in range(WARMUP_RUNS):
        run()
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, with_modules=True) as profiler:
        for _ in range(iterations):
            run()
    with tempfile.TemporaryDirectory(prefix="infermeter-torchscript-") as folder:
        path = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return traced_runs(trace, types)


def torchscript_units(
    eager: Any, run_eager: Callable[[], object], run: Callable[[], object], iterations: int, original: OriginalGraph
) -> list[Unit]:
    """TorchScript's units: its operators' module scopes over `iterations` profiled runs of `run`, placed by
    the order of the module calls of one run of the same model in eager mode (`eager`, run by `run_eager`)."""
    types = {name: type(m).__name__ for name, m in eager.named_modules()}
    tokens = call_tokens(eager, run_eager)
    runs = profiled_runs(run, iterations, types)
    if not runs:
        raise RuntimeError("torch.profiler recorded no TorchScript run (no `forward` in its trace)")
    seen = {op.module for r in runs for op in r.ops if op.module is not None}
    order = CallOrder(tokens, seen)
    per_key = [run_times(r, order) for r in runs]
    keys = list(dict.fromkeys(key for times in per_key for key in times))
    return units_of(keys, per_key, types, eager, original)


def units_of(
    keys: list[tuple[str, ...]],
    per_key: list[dict[tuple[str, ...], float]],
    types: dict[str, str],
    eager: Any,
    original: OriginalGraph,
) -> list[Unit]:
    """The units of the keys, through eager's matching: a key of several modules is one unit of all their nodes."""
    grouped = nodes_by_module(original, set(types))
    children = module_children(eager)
    per_run: dict[str, list[float]] = {}
    for key in keys:
        name = "+".join(m or "(model)" for m in key) if len(key) > 1 else key[0]
        per_run[name] = [times.get(key, 0.0) for times in per_key]
        if len(key) > 1:
            grouped[name] = [n for m in key for n in grouped.get(m, [])]
            types[name] = "+".join(types.get(m, m) for m in key)
            children[name] = []
    moving = per_run.pop(LAYOUT_UNIT, None)
    units = [replace(u, parts=()) for u in merged_units(per_run, grouped, types, children, mode="torchscript")]
    if moving is not None:
        kernel = "aten::to_mkldnn / to_dense (torchscript)"
        time_us = float(np.median(moving))
        units.append(Unit(LAYOUT_UNIT, (), time_us=time_us, kernel=kernel, op_type="Reorder", kind="data_movement"))
    return units
