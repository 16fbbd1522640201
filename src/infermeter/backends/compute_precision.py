"""The precision an engine really computed in, read from the engine after a run, never inferred from the CPU's
flags: ONNX Runtime's kernel input types in a profiled run, OpenVINO's `runtimePrecision` of its runtime model,
the dtypes of the compute operators torch's profiler saw.

Why not the flags: ONNX Runtime's CPU provider has no x86 FP16 convolution or matmul kernels whatever the CPU
offers; it inserts casts and runs its FP32 kernels. A CPU with AVX512-FP16 made the old flag test say "fp16".
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Operators that do a model's arithmetic, as ONNX Runtime's profiler names them (fused forms included); the rest
# (casts, reshapes, activations) says nothing about the precision a model computes in.
ORT_COMPUTE_OPS = frozenset({
    "Conv", "ConvTranspose", "FusedConv", "MatMul", "FusedMatMul", "Gemm", "FusedGemm", "Attention",
    "MultiHeadAttention", "GroupQueryAttention", "MatMulNBits", "QLinearConv", "QLinearMatMul", "ConvInteger",
    "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QAttention", "NhwcFusedConv",
})  # fmt: skip
# torch's operators below the autocast dispatch (aten::conv2d and aten::linear are also seen before the cast).
TORCH_COMPUTE_OPS = frozenset({
    "aten::convolution", "aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math",
})  # fmt: skip
# Element type spellings of ONNX Runtime's profiler and torch's kineto events -> infermeter precisions.
TYPE_WORDS = {
    "float": "fp32", "float16": "fp16", "bfloat16": "bf16", "double": "fp64", "int8": "int8", "uint8": "int8",
    "c10::Half": "fp16", "c10::BFloat16": "bf16",
}  # fmt: skip


@dataclass(frozen=True)
class ComputeReading:
    """What the engine computed in (`precision`) and how many of its compute kernels ran in each precision, as the
    engine reported them (`counts`: {"fp32": 12}); `how` says where the reading came from."""

    precision: str
    counts: dict[str, int]
    how: str

    def evidence(self) -> str:
        """`onnxruntime profile: 12 fp32 compute kernels`."""
        counted = ", ".join(f"{n} {p}" for p, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
        return f"{self.how}: {counted or 'no'} compute kernels"


def majority(counts: Counter[str] | dict[str, int], how: str) -> ComputeReading | None:
    """The reading of these counts: the precision most compute kernels ran in (ties go to the wider one), or None
    when the engine reported no compute kernel."""
    if not counts:
        return None
    width = {"fp64": 0, "fp32": 1, "bf16": 2, "fp16": 3, "int8": 4}
    best = min(counts, key=lambda p: (-counts[p], width.get(p, 9)))
    return ComputeReading(best, dict(counts), how)


def ort_kernel_counts(events: Iterable[dict[str, Any]]) -> Counter[str]:
    """The compute kernels of an ONNX Runtime profile (its JSON events) counted by their first input's type."""
    counts: Counter[str] = Counter()
    for event in events:
        args = event.get("args") or {}
        if event.get("cat") != "Node" or args.get("op_name") not in ORT_COMPUTE_OPS:
            continue
        if not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        inputs = args.get("input_type_shape") or []
        if inputs and isinstance(inputs[0], dict) and inputs[0]:
            word = next(iter(inputs[0]))
            counts[TYPE_WORDS.get(word, word)] += 1
    return counts


def ort_profiled(make_session: Callable[[Any], Any], feeds: dict[str, Any]) -> ComputeReading | None:
    """Create a session with profiling on (`make_session(options_patch)` applies the patch to its SessionOptions),
    run it once on `feeds`, and read the compute kernels' input types from the profile. The profile file is
    removed."""
    with tempfile.TemporaryDirectory(prefix="infermeter-ort-precision-") as scratch:

        def patch(options: Any) -> None:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(scratch) / "probe")

        session = make_session(patch)
        session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
    return majority(ort_kernel_counts(events), "onnxruntime profile")


def ort_model_precision(path: str, feeds: dict[str, Any], providers: list[str] | None = None,
                        threads: int = 1) -> ComputeReading | None:  # fmt: skip
    """What ONNX Runtime computes the ONNX file `path` in, from a profiled run on `feeds` (graph optimizations at
    their default; providers default to the CPU provider)."""
    import onnxruntime as ort

    def make(patch: Callable[[Any], None]) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        patch(options)
        return ort.InferenceSession(path, options, providers=providers or ["CPUExecutionProvider"])

    return ort_profiled(make, feeds)


def torch_kernel_counts(events: Iterable[Any]) -> Counter[str]:
    """torch kineto events of the compute operators counted by their first input's dtype."""
    counts: Counter[str] = Counter()
    for event in events:
        if event.name() in TORCH_COMPUTE_OPS and event.dtypes():
            word = event.dtypes()[0]
            counts[TYPE_WORDS.get(word, word)] += 1
    return counts


def torch_profiled(run: Callable[[], object]) -> ComputeReading | None:
    """Run `run()` once under torch's profiler (input shapes and types recorded) and read the compute operators'
    dtypes."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run()
    return majority(torch_kernel_counts(prof.profiler.kineto_results.events()), "torch profiler")


def openvino_runtime(compiled: Any) -> ComputeReading | None:
    """What an OpenVINO compiled model computes in: its runtime model's compute layers by `runtimePrecision`."""
    from infermeter.backends.openvino_profile import runtime_mix

    counts = {p: n for p, n in runtime_mix(compiled, listed=0).counts.items() if p != "?"}
    return majority(counts, "openvino runtimePrecision")
