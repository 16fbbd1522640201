"""Which of the layers a reduced-precision study marked FP32 the engine really ran in FP32, read from what the engine
ran, never assumed from the mark: OpenVINO's runtime model (each layer's `runtimePrecision` and the
`originalLayersNames` it fused), ONNX Runtime's profiled run of the mixed graph (each kernel's input and output
types), torch's output dtype of each module kept outside autocast. A mark on a layer the engine fused into another
one, or ran in BF16/FP16 anyway, does not count as held: an engine that held none has no mixed model to time (it
would be the full reduced-precision model timed twice)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

# Runtime-model layers that move or hold data: what they "ran in" says nothing about a marked layer.
OV_DATA_LAYERS = ("Input", "Output", "Const", "Reorder")
REDUCED = ("bf16", "fp16")
# ONNX Runtime's profiler and torch's dtype spellings of the float types.
FLOAT_WORDS = {"float": "fp32", "float16": "fp16", "bfloat16": "bf16", "double": "fp64",
               "torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}  # fmt: skip
KERNEL_SUFFIX = "_kernel_time"
LISTED = 8


@dataclass(frozen=True)
class MarkReadback:
    """What `engine` did with the layers marked FP32 (`marked`), read back from what it ran (`how`): `held` ran in
    FP32; `reduced` ran in BF16/FP16 despite the mark; `unseen` are not in what the engine ran under their names
    (fused into another layer, or renamed); `fp32_anyway` held but ran in FP32 without the mark too (where the
    engine's full run was read), so they change nothing."""

    engine: str
    marked: tuple[str, ...]
    _: KW_ONLY  # the rest by keyword
    held: tuple[str, ...] = ()
    reduced: tuple[str, ...] = ()
    unseen: tuple[str, ...] = ()
    fp32_anyway: tuple[str, ...] = ()
    how: str = ""

    @property
    def held_count(self) -> int:
        """How many marks held."""
        return len(self.held)

    @property
    def effective(self) -> tuple[str, ...]:
        """The held marks that change what the engine runs (held, and not in FP32 anyway): without one, the mixed
        model is the full one."""
        return tuple(name for name in self.held if name not in self.fp32_anyway)

    def summary(self) -> str:
        """`1 of 4 FP32 marks held`."""
        return f"{self.held_count} of {len(self.marked)} FP32 mark(s) held"

    def mixed_cell(self) -> str | None:
        """What a table shows in the mixed column when no held mark changes anything (else None: a mixed figure)."""
        if self.effective:
            return None
        return "= full (no mark held)" if not self.held else "= full (held marks ran FP32 anyway)"

    def lines(self) -> list[str]:
        """One line with the count and the held names, then one per kind of mark that did not hold."""
        out = [
            f"{self.engine}: {self.summary()} (read from {self.how})" + (f": {_listed(self.held)}" if self.held else "")
        ]
        if self.reduced:
            out.append(f"{self.engine}: the FP32 mark did not hold (ran in reduced precision): {_listed(self.reduced)}")
        if self.unseen:
            out.append(f"{self.engine}: not in what it ran under their names (fused into another layer or renamed): "
                       f"{_listed(self.unseen)}")  # fmt: skip
        if self.fp32_anyway:
            out.append(f"{self.engine}: held, but ran in FP32 without the mark too: {_listed(self.fp32_anyway)}")
        if not self.effective:
            out.append(f"{self.engine}: no mixed model timed: it would be the full model timed twice")
        return out


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    return ", ".join(names[:LISTED]) + (f" (+{len(names) - LISTED} more)" if len(names) > LISTED else "")


def _sorted_readback(engine: str, marked: Iterable[str], ran: dict[str, list[str]], how: str,
                     anyway: Callable[[str], bool] = lambda _name: False) -> MarkReadback:  # fmt: skip
    """The readback from `ran`: each marked name → the precisions of what the engine ran for it (empty: unseen)."""
    names = sorted(set(marked))
    held = [n for n in names if ran.get(n) and not any(p in REDUCED for p in ran[n])]
    return MarkReadback(
        engine,
        tuple(names),
        held=tuple(held),
        reduced=tuple(n for n in names if any(p in REDUCED for p in ran.get(n, ()))),
        unseen=tuple(n for n in names if not ran.get(n)),
        fp32_anyway=tuple(n for n in held if anyway(n)),
        how=how,
    )


def openvino_runtime_layers(compiled: Any) -> list[tuple[tuple[str, ...], str]]:
    """The layers of an OpenVINO compiled model's runtime model that compute: (the original layers each fused,
    the precision it runs in), data layers (inputs, outputs, constants, reorders) left out."""
    from infermeter.backends.openvino_profile import precision_word

    layers = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) in OV_DATA_LAYERS:
            continue
        names = tuple(n.strip() for n in info["originalLayersNames"].astype(str).split(",") if n.strip())
        layers.append((names, precision_word(info["runtimePrecision"].astype(str))))
    return layers


def stems_from(op_name: str, node: str) -> bool:
    """True when OpenVINO's operation `op_name` comes from the ONNX node `node`: its name, or one of the operations
    the ONNX frontend decomposed it into (`/conv/Conv/WithoutBiases` beside the bias Add named `/conv/Conv`)."""
    return op_name == node or op_name.startswith(node + "/")


def mark_openvino(model: Any, nodes: Iterable[str]) -> int:
    """Mark the operations of `model` (an `openvino.Model` read from the ONNX graph) that stem from `nodes` with
    OpenVINO's DisableFP16Compression attribute; returns how many operations were marked."""
    wanted, count = set(nodes), 0
    for op in model.get_ordered_ops():
        name = op.get_friendly_name()
        if any(stems_from(name, node) for node in wanted):
            # "precise" in an IR, DisablePrecisionConversion once read: the key is what makes it a typed attribute
            # that save_model writes into the IR.
            op.get_rt_info()["precise_0"] = ""
            count += 1
    return count


def _ov_ran(layers: list[tuple[tuple[str, ...], str]], nodes: Iterable[str]) -> dict[str, list[str]]:
    return {node: [p for names, p in layers if any(stems_from(n, node) for n in names)] for node in nodes}


def openvino_marks(compiled: Any, full: Any, marked: Iterable[str]) -> MarkReadback:
    """What OpenVINO ran each `marked` ONNX node in: the runtime layers of `compiled` (the marked model) whose
    original layers stem from it; held when none of them ran BF16/FP16, unseen when no runtime layer names it.
    `full` (the same model compiled without marks) says which held marks ran FP32 anyway."""
    names = set(marked)
    ran, unmarked = _ov_ran(openvino_runtime_layers(compiled), names), _ov_ran(openvino_runtime_layers(full), names)

    def anyway(name: str) -> bool:
        return bool(unmarked[name]) and not any(p in REDUCED for p in unmarked[name])

    return _sorted_readback("openvino", names, ran, "the runtime model's runtimePrecision", anyway)


def _kernel_types(event: dict[str, Any]) -> list[str]:
    args = event.get("args") or {}
    shapes = [*(args.get("input_type_shape") or []), *(args.get("output_type_shape") or [])]
    words = [next(iter(item)) for item in shapes if isinstance(item, dict) and item]
    return [FLOAT_WORDS[w] for w in words if w in FLOAT_WORDS]


def onnxruntime_marks(mixed: Path, marked: Iterable[str], feeds: dict[str, Any], threads: int) -> MarkReadback:
    """What ONNX Runtime ran each `marked` node of the mixed graph `mixed` in, from one profiled run with its graph
    optimizations on: the kernel of that name, else the kernel that writes the node's output after optimization
    (a fused or re-laid-out node is renamed); held when its float inputs and outputs all stay FP32."""
    import onnx
    import onnxruntime as ort

    names = set(marked)
    outputs = {node.name: list(node.output) for node in onnx.load(str(mixed), load_external_data=False).graph.node}
    with tempfile.TemporaryDirectory(prefix="infermeter-marks-") as scratch:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.log_severity_level = threads, 3
        options.enable_profiling, options.profile_file_prefix = True, str(Path(scratch) / "marks")
        options.optimized_model_filepath = str(Path(scratch) / "optimized.onnx")
        session = ort.InferenceSession(str(mixed), options, providers=["CPUExecutionProvider"])
        session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
        optimized = onnx.load(options.optimized_model_filepath, load_external_data=False).graph.node
    kernels = {str(e["name"]).removesuffix(KERNEL_SUFFIX): _kernel_types(e) for e in events
               if e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)}  # fmt: skip
    writer = {out: node.name for node in optimized for out in node.output}
    ran: dict[str, list[str]] = {}
    for name in names:
        runtime = name if name in kernels else next((writer[o] for o in outputs.get(name, ()) if o in writer), None)
        ran[name] = kernels.get(runtime, []) if runtime is not None else []
    return _sorted_readback("onnxruntime", names, ran, "a profiled run of the mixed graph: its kernels' types")


def torch_marks(module: Any, kept: Iterable[str], run: Callable[[], object]) -> MarkReadback:
    """What torch ran each `kept` module in under autocast (its exclusions applied by the caller): the dtype of its
    float output in one run of `run()`, read by a forward hook; unseen when the module never ran."""
    import torch

    names, seen, hooks = set(kept), dict[str, list[str]](), []
    for name, sub in module.named_modules():
        if name in names:

            def hook(_module: Any, _inputs: Any, output: Any, name: str = name) -> None:
                tensors = output if isinstance(output, tuple | list) else (output,)
                dtypes = [str(t.dtype) for t in tensors if torch.is_tensor(t) and t.is_floating_point()]
                seen.setdefault(name, [FLOAT_WORDS.get(d, d) for d in dtypes])

            hooks.append(sub.register_forward_hook(hook))
    try:
        run()
    finally:
        for handle in hooks:
            handle.remove()
    return _sorted_readback("torch", names, seen, "each kept module's output dtype under autocast")
