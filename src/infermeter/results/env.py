"""Machine metadata recorded with every results file: what must match before two results are compared. The record
itself, with every backend's framework version, is assembled by `environment.collect_environment`."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import psutil

ISA_FLAGS: tuple[str, ...] = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx_vnni")
ISA_FLAGS += ("amx_tile", "amx_int8", "amx_bf16", "avx512_fp16", "asimd", "sve")
# The variables that set the thread pools' sizes (a worker sets them before any framework loads) and, with the
# pinning ones, every thread variable a results file records.
THREAD_COUNT_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
THREAD_VARIABLES = (*THREAD_COUNT_VARIABLES, "KMP_AFFINITY", "OMP_PROC_BIND")
# Fields that make two results incomparable without a caveat.
COMPARABLE_KEYS = ("cpu_model", "logical_cores", "physical_cores", "frameworks", "gpu")


def cpu_model_and_flags() -> tuple[str, list[str]]:
    """The CPU's model name and the flags of `ISA_FLAGS` it has (from /proc/cpuinfo)."""
    model = platform.processor() or platform.machine()
    flags: set[str] = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name":
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    return model, [f for f in ISA_FLAGS if f in flags]


def cpu_isa() -> list[str]:
    """The ISA flags of `ISA_FLAGS` this CPU has (from /proc/cpuinfo), e.g. to decide bf16/fp16 support."""
    return cpu_model_and_flags()[1]


def host_signature() -> dict[str, object]:
    """The host facts a compiled artifact depends on: the architecture and the ISA flags the CPU offers."""
    return {"arch": platform.machine(), "isa": cpu_isa()}


def gpus() -> list[dict[str, str]]:
    """Name, driver and memory of each NVIDIA GPU `nvidia-smi` lists (none without it)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            gpus.append({"name": parts[0], "driver": parts[1], "memory": parts[2]})
    return gpus


def default_threads() -> int:
    """One intra-op thread per physical core available to this process (hyper-threads add noise, not speed)."""
    physical = psutil.cpu_count(logical=False) or 1
    if hasattr(os, "sched_getaffinity"):
        physical = min(physical, len(os.sched_getaffinity(0)))
    return max(1, physical)


def environment_differences(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """Human-readable differences between two environments in the fields that matter for comparison."""
    diffs = []
    for key in COMPARABLE_KEYS:
        a, b = first.get(key), second.get(key)
        if key == "frameworks" and isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                if name != "infermeter" and a.get(name) != b.get(name):
                    diffs.append(f"{name} {a.get(name, 'absent')} vs {b.get(name, 'absent')}")
        elif a != b:
            diffs.append(f"{key}: {a} vs {b}")
    return diffs
