"""The workloads `peak` times: a large matrix product per (framework, precision), and streaming copies/triads.

Each probe builder takes (threads, size) and returns a `Workload`: a callable doing one operation (outside any
timer, all inputs already in place) and how many operations (FLOPs or integer ops, or bytes) one call does.
A builder raises ImportError when its framework is missing and `ProbeSkipped` when the hardware or framework
cannot do that precision; both are recorded, not fatal. Frameworks are imported inside the builders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


class ProbeSkipped(Exception):
    """This framework cannot run this precision here (the message says why)."""


@dataclass
class Workload:
    """One timed operation: `run()` does it once; `work` is FLOPs/ops or bytes per call; `sync` waits for a
    device (no-op on CPU); `note` says what the engine really computed in, where it can tell."""

    run: Callable[[], Any]
    work: float
    sync: Callable[[], None] = lambda: None
    note: str = ""
    cleanup: Callable[[], None] = lambda: None
    # Device timer: (run, repeats) -> seconds measured on the device (CUDA events); None means host clock.
    device_timer: Callable[[Callable[[], Any], int], float] | None = None


def _matmul_flops(n: int) -> float:
    # n x n by n x n: n^2 outputs, n multiply-adds each, 2 operations per multiply-add.
    return 2.0 * n**3


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def numpy_fp32(threads: int, n: int) -> Workload:
    """numpy's BLAS (OpenBLAS in the wheels) sgemm, limited to `threads` with threadpoolctl when present."""
    a = _rng().standard_normal((n, n), dtype=np.float32)
    b = _rng().standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    note = ""
    limiter: Any = None
    try:
        from threadpoolctl import threadpool_limits

        limiter = threadpool_limits(limits=threads, user_api="blas")
    except ImportError:
        note = "threadpoolctl missing: numpy's BLAS used its default thread count"
    return Workload(
        lambda: np.matmul(a, b, out=out),
        _matmul_flops(n),
        note=note,
        cleanup=(lambda: limiter.restore_original_limits()) if limiter is not None else (lambda: None),
    )


def _torch_matmul(threads: int, n: int, dtype_name: str) -> Workload:
    import torch

    dtype = getattr(torch, dtype_name)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    if dtype_name == "int8":
        a = torch.randint(-64, 64, (n, n), dtype=torch.int8)
        b = torch.randint(-64, 64, (n, n), dtype=torch.int8)
        try:
            torch._int_mm(a[:32, :32].contiguous(), b[:32, :32].contiguous())
        except (RuntimeError, AttributeError) as exc:
            torch.set_num_threads(previous)
            raise ProbeSkipped(f"torch._int_mm unavailable on CPU: {exc}") from exc
        out = torch.empty((n, n), dtype=torch.int32)
        return Workload(
            lambda: torch._int_mm(a, b, out=out),
            _matmul_flops(n),
            note="int8 x int8 -> int32 (torch._int_mm)",
            cleanup=lambda: torch.set_num_threads(previous),
        )
    a = torch.randn((n, n)).to(dtype)
    b = torch.randn((n, n)).to(dtype)
    out = torch.empty((n, n), dtype=dtype)
    return Workload(lambda: torch.mm(a, b, out=out), _matmul_flops(n), cleanup=lambda: torch.set_num_threads(previous))


def torch_fp32(threads: int, n: int) -> Workload:
    """torch.mm in float32 (oneDNN / MKL on CPU)."""
    return _torch_matmul(threads, n, "float32")


def torch_bf16(threads: int, n: int) -> Workload:
    """torch.mm in bfloat16 (AMX / AVX512-BF16 kernels where the CPU has them)."""
    return _torch_matmul(threads, n, "bfloat16")


def torch_fp16(threads: int, n: int) -> Workload:
    """torch.mm in float16."""
    return _torch_matmul(threads, n, "float16")


def torch_int8(threads: int, n: int) -> Workload:
    """torch._int_mm: int8 x int8 with int32 accumulation."""
    return _torch_matmul(threads, n, "int8")


def _ort_session(model: Any, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    # Idle ORT threads spin by default and would steal cores from the probes timed after this one.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _ort_matmul(threads: int, n: int, integer: bool) -> Workload:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    a: np.ndarray
    b: np.ndarray
    if integer:
        a = _rng().integers(0, 255, (n, n), dtype=np.uint8)
        b = _rng().integers(-127, 127, (n, n), dtype=np.int8)
        node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
        a_type, y_type = TensorProto.UINT8, TensorProto.INT32
    else:
        a = _rng().standard_normal((n, n), dtype=np.float32)
        b = _rng().standard_normal((n, n), dtype=np.float32)
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        a_type, y_type = TensorProto.FLOAT, TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "peak",
        [helper.make_tensor_value_info("a", a_type, [n, n])],
        [helper.make_tensor_value_info("y", y_type, [n, n])],
        [numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = _ort_session(model, threads)
    # IOBinding with a preallocated output: the timed call does the product, not an output allocation.
    binding = session.io_binding()
    binding.bind_cpu_input("a", a)
    out = ort.OrtValue.ortvalue_from_numpy(np.empty((n, n), dtype=np.int32 if integer else np.float32))
    binding.bind_ortvalue_output("y", out)
    note = "uint8 x int8 -> int32 (MatMulInteger)" if integer else ""
    return Workload(lambda: session.run_with_iobinding(binding), _matmul_flops(n), note=note)


def ort_fp32(threads: int, n: int) -> Workload:
    """ONNX Runtime CPU MatMul, float32 (MLAS)."""
    return _ort_matmul(threads, n, integer=False)


def ort_int8(threads: int, n: int) -> Workload:
    """ONNX Runtime CPU MatMulInteger, uint8 x int8 -> int32 (MLAS VNNI/AMX kernels where present)."""
    return _ort_matmul(threads, n, integer=True)


def _openvino_matmul(threads: int, n: int, hint: str, int8: bool) -> Workload:
    import openvino as ov
    import openvino.opset13 as ops

    a = _rng().random((n, n), dtype=np.float32)
    b = (_rng().random((n, n), dtype=np.float32) - 0.5).astype(np.float32)
    param = ops.parameter([n, n], np.float32, name="a")
    x: Any = param
    weight: Any = ops.constant(b)
    if int8:
        # FakeQuantize on both operands is how quantized models reach OpenVINO: its low-precision transformations
        # turn the pair into a u8 x i8 MatMul. The runtime precision is read back below, not assumed.
        def fq(node: Any, low: float, high: float, levels: int) -> Any:
            lo, hi = ops.constant(np.float32(low)), ops.constant(np.float32(high))
            return ops.fake_quantize(node, lo, hi, lo, hi, levels)

        x = fq(param, 0.0, 1.0, 256)
        weight = fq(weight, -0.5, 0.5, 255)
    model = ov.Model([ops.matmul(x, weight, False, False)], [param], "peak")
    config = {"INFERENCE_PRECISION_HINT": hint, "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    compiled = ov.Core().compile_model(model, "CPU", config)
    runtime = [
        str(op.get_rt_info()["runtimePrecision"].astype(str))
        for op in compiled.get_runtime_model().get_ops()
        if str(op.get_rt_info()["layerType"].astype(str)) in ("MatMul", "FullyConnected")
    ]
    wanted = {"f32": ("f32",), "bf16": ("bf16",), "int8": ("u8", "i8")}["int8" if int8 else hint]
    if not runtime or runtime[0] not in wanted:
        raise ProbeSkipped(f"OpenVINO ran the product in {runtime[0] if runtime else 'unknown'}, not {wanted[0]}")
    request = compiled.create_infer_request()
    request.set_input_tensor(ov.Tensor(a))
    return Workload(lambda: request.infer(), _matmul_flops(n), note=f"runtime precision {runtime[0]}")


def openvino_fp32(threads: int, n: int) -> Workload:
    """OpenVINO CPU MatMul with inference precision f32."""
    return _openvino_matmul(threads, n, "f32", int8=False)


def openvino_bf16(threads: int, n: int) -> Workload:
    """OpenVINO CPU MatMul with the bf16 inference precision hint (verified from the runtime model)."""
    return _openvino_matmul(threads, n, "bf16", int8=False)


def openvino_int8(threads: int, n: int) -> Workload:
    """OpenVINO CPU MatMul quantized with FakeQuantize (runs u8 x i8, verified from the runtime model)."""
    return _openvino_matmul(threads, n, "f32", int8=True)


def numpy_copy(threads: int, n_bytes: int) -> Workload:
    """np.copyto of a large float32 array: one read and one write per element (numpy copies on one thread)."""
    src = np.ones(n_bytes // 4, dtype=np.float32)
    dst = np.zeros_like(src)
    return Workload(lambda: np.copyto(dst, src), 2.0 * src.nbytes, note="single-threaded")


def _torch_stream(threads: int, n_bytes: int, triad: bool) -> Workload:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    numel = n_bytes // 4
    a = torch.zeros(numel)
    b = torch.ones(numel)
    c = torch.full((numel,), 2.0)
    if triad:
        # STREAM triad a = b + s*c: two arrays read, one written; write-allocate traffic is not counted (as STREAM).
        return Workload(
            lambda: torch.add(b, c, alpha=3.0, out=a), 3.0 * numel * 4, cleanup=lambda: torch.set_num_threads(previous)
        )
    return Workload(lambda: a.copy_(b), 2.0 * numel * 4, cleanup=lambda: torch.set_num_threads(previous))


def torch_copy(threads: int, n_bytes: int) -> Workload:
    """torch copy_ of a large float32 tensor (multi-threaded): read + write."""
    return _torch_stream(threads, n_bytes, triad=False)


def torch_triad(threads: int, n_bytes: int) -> Workload:
    """STREAM triad with torch: a = b + s*c, bytes = 3 x array size."""
    return _torch_stream(threads, n_bytes, triad=True)


# (engine, precision, builder). Precision "bandwidth" marks the memory probes (size in bytes, not n).
CPU_PROBES: tuple[tuple[str, str, Callable[[int, int], Workload]], ...] = (
    ("numpy", "fp32", numpy_fp32),
    ("torch", "fp32", torch_fp32),
    ("onnxruntime", "fp32", ort_fp32),
    ("openvino", "fp32", openvino_fp32),
    ("torch", "bf16", torch_bf16),
    ("openvino", "bf16", openvino_bf16),
    ("torch", "fp16", torch_fp16),
    ("torch", "int8", torch_int8),
    ("onnxruntime", "int8", ort_int8),
    ("openvino", "int8", openvino_int8),
    ("numpy copy", "bandwidth", numpy_copy),
    ("torch copy", "bandwidth", torch_copy),
    ("torch triad", "bandwidth", torch_triad),
)
