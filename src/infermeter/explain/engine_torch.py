"""torch eager's profile for explain (backend `torch`): one scope per module (forward pre/post hooks reading a
monotonic clock, synchronous on CPU), each module's self time (its scope minus its child modules' scopes),
matched to the ONNX nodes the exporter made inside that module: from the torch.export-based exporter's
`pkg.torch.onnx.name_scopes` metadata, or from the TorchScript-based exporter's node names
(`/layer1/layer1.0/conv1/Conv`)."""

from __future__ import annotations

import ast
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from infermeter.explain.original import OriginalGraph
from infermeter.explain.records import Unit

WARMUP_RUNS = 3
NAME_SCOPES = "pkg.torch.onnx.name_scopes"


def scope_candidates(name: str, metadata: dict[str, str]) -> list[str]:
    """The modules an exported node may sit in, deepest first: the exporter's name_scopes (qualified module
    names, the last entry the operator), else the scopes of a TorchScript-exported name, where a part may repeat
    its parent (`/layer1/layer1.0/conv1/Conv` sits in `layer1.0.conv1`)."""
    if NAME_SCOPES in metadata:
        try:
            scopes = [str(s) for s in ast.literal_eval(metadata[NAME_SCOPES])]
        except (ValueError, SyntaxError):
            scopes = []
        return list(reversed(scopes[:-1]))
    paths, path = [], ""
    for part in name.strip("/").split("/")[:-1]:
        path = part if not path or part.startswith(path + ".") else f"{path}.{part}"
        paths.append(path)
    return list(reversed(paths))


def module_of(candidates: list[str], modules: set[str]) -> str:
    """The first (deepest) candidate that is a module of the model ("" is the model itself)."""
    return next((c for c in candidates if c in modules), "")


def nodes_by_module(original: OriginalGraph, modules: set[str]) -> dict[str, list[str]]:
    """The original nodes grouped by the module each was exported from."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for node in original.names:
        grouped[module_of(scope_candidates(node, original.metadata[node]), modules)].append(node)
    return grouped


def module_children(model: Any) -> dict[str, list[str]]:
    """Each module's qualified name -> its child modules' qualified names."""
    return {name: [f"{name}.{c}" if name else c for c, _ in m.named_children()] for name, m in model.named_modules()}


class ScopeClock:
    """Forward hooks on every module of a model: each call's inclusive time and its children's, in µs."""

    def __init__(self, model: Any) -> None:
        self.self_us: dict[str, list[float]] = defaultdict(list)
        self._stack: list[list[float]] = []
        self._handles = []
        self.children = module_children(model)
        for name, module in model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._enter))
            self._handles.append(module.register_forward_hook(self._leave(name)))

    def _enter(self, *_: Any) -> None:
        self._stack.append([time.perf_counter_ns() / 1e3, 0.0])  # start, children's inclusive time

    def _leave(self, name: str) -> Callable[..., None]:
        def leave(*_: Any) -> None:
            start, children = self._stack.pop()
            inclusive = time.perf_counter_ns() / 1e3 - start
            self.self_us[name].append(inclusive - children)
            if self._stack:
                self._stack[-1][1] += inclusive

        return leave

    def remove(self) -> None:
        """Take the hooks off."""
        for handle in self._handles:
            handle.remove()


def torch_units(module: Any, run: Callable[[], object], iterations: int, original: OriginalGraph) -> list[Unit]:
    """The units of an eager module: one per module that holds exported nodes, timed over `iterations` runs
    (a module called several times per run: its calls summed per run)."""
    modules = {name for name, _ in module.named_modules()}
    grouped = nodes_by_module(original, modules)
    for _ in range(WARMUP_RUNS):
        run()
    clock = ScopeClock(module)
    try:
        per_run: dict[str, list[float]] = defaultdict(list)
        for _ in range(iterations):
            clock.self_us.clear()
            run()
            for name, calls in clock.self_us.items():
                per_run[name].append(sum(calls))
    finally:
        clock.remove()
    types = {name: type(m).__name__ for name, m in module.named_modules()}
    return merged_units(per_run, grouped, types, clock.children)


def merged_units(
    per_run: dict[str, list[float]],
    grouped: dict[str, list[str]],
    types: dict[str, str],
    children: dict[str, list[str]],
    mode: str = "eager",
) -> list[Unit]:
    """One unit per module with exported nodes, in the order the modules finished (`mode` ends each kernel's
    text: how torch ran it). A leaf module with no node of
    its own (the exporter folded it into the next one, as a Conv into the BatchNormalization after it, or
    dropped it, as an Identity) joins the next module that has nodes, so that its time lands on them; container
    modules with no node keep their self time as a unit of no node (Python between their children)."""
    units: list[Unit] = []
    pending: list[tuple[str, list[float]]] = []
    for name, times in per_run.items():
        nodes = tuple(grouped.get(name, ()))
        if not nodes and not children.get(name):
            pending.append((name, times))
            continue
        parts: tuple[tuple[str, float], ...] = ()
        if nodes and pending:
            members = [*pending, (name, times)]
            parts = tuple((types[n], float(np.median(t))) for n, t in members)
            times = [sum(t) for t in zip(*(t for _, t in members), strict=False)]
            kernel = "+".join(types[n] for n, _ in members) + f" ({mode})"
            name, pending = "+".join(n for n, _ in members), []
        else:
            kernel = f"{types[name]} ({mode})"
        label = name or "(model)"
        op_type = types.get(name, kernel)
        units.append(
            Unit(
                label,
                nodes,
                time_us=float(np.median(times)),
                kernel=kernel,
                op_type=op_type,
                precision="",
                kind="compute",
                parts=parts,
            )
        )
    units += [
        Unit(n, (), time_us=float(np.median(t)), kernel=f"{types[n]} ({mode})", op_type=types[n]) for n, t in pending
    ]
    return units
