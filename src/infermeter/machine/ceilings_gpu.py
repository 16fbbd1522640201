"""GPU probes for `peak` (torch on CUDA, timed with CUDA events). Written for CUDA machines; never imported
without one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infermeter.machine.ceiling_probes import ProbeSkipped, Workload

GPU_MATRIX_SIZE = 8192


def gpu_bandwidth_bytes() -> int:
    """Per-array size for the device-memory probes: 1 GiB, or 1/8 of free device memory when less."""
    import torch

    free, _total = torch.cuda.mem_get_info()
    return int(min(1 << 30, free // 8))


def cuda_event_seconds(run: Callable[[], Any], repeats: int) -> float:
    """Device time of `repeats` calls between two CUDA events (host launch gaps excluded once the queue fills)."""
    import torch

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        run()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 1000.0


def _event_timed(run: Callable[[], Any], work: float, note: str = "") -> Workload:
    """A workload timed with CUDA events; `sync` waits for the device during warm-up."""
    import torch

    return Workload(run, work, sync=torch.cuda.synchronize, note=note, device_timer=cuda_event_seconds)


def _matmul(dtype_name: str, tf32: bool = False) -> Callable[[int, int], Workload]:
    def build(_threads: int, n: int) -> Workload:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = tf32
        if dtype_name == "int8":
            a = torch.randint(-64, 64, (n, n), dtype=torch.int8, device="cuda")
            b = torch.randint(-64, 64, (n, n), dtype=torch.int8, device="cuda").t().contiguous().t()
            try:
                torch._int_mm(a, b)
            except RuntimeError as exc:
                raise ProbeSkipped(f"torch._int_mm failed on this GPU: {exc}") from exc
            return _event_timed(lambda: torch._int_mm(a, b), 2.0 * n**3, "int8 x int8 -> int32")
        dtype = getattr(torch, dtype_name)
        a = torch.randn((n, n), device="cuda", dtype=dtype)
        b = torch.randn((n, n), device="cuda", dtype=dtype)
        out = torch.empty((n, n), device="cuda", dtype=dtype)
        return _event_timed(lambda: torch.mm(a, b, out=out), 2.0 * n**3, "TF32 tensor cores" if tf32 else "")

    return build


def _copy(_threads: int, n_bytes: int) -> Workload:
    import torch

    src = torch.ones(n_bytes // 4, device="cuda")
    dst = torch.empty_like(src)
    return _event_timed(lambda: dst.copy_(src), 2.0 * src.numel() * 4, "device-to-device copy")


def _triad(_threads: int, n_bytes: int) -> Workload:
    import torch

    numel = n_bytes // 4
    a = torch.empty(numel, device="cuda")
    b = torch.ones(numel, device="cuda")
    c = torch.ones(numel, device="cuda")
    return _event_timed(lambda: torch.add(b, c, alpha=3.0, out=a), 3.0 * numel * 4, "STREAM triad")


GPU_PROBES: tuple[tuple[str, str, Callable[[int, int], Workload]], ...] = (
    ("torch", "fp32", _matmul("float32")),
    ("torch", "tf32", _matmul("float32", tf32=True)),
    ("torch", "fp16", _matmul("float16")),
    ("torch", "bf16", _matmul("bfloat16")),
    ("torch", "int8", _matmul("int8")),
    ("torch copy", "bandwidth", _copy),
    ("torch triad", "bandwidth", _triad),
)
